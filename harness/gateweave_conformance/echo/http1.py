"""HTTP/1.x connections (h11 on asyncio streams), as Go's net/http server answers them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import h11

from gateweave_conformance.echo import conn, websocket
from gateweave_conformance.echo.gojson import go_string
from gateweave_conformance.echo.handlers import WebSocketAccept
from gateweave_conformance.echo.httpmsg import (
    REASONS,
    Request,
    ResetConnection,
    Response,
    http_date,
    merge_headers,
)
from gateweave_conformance.echo.tlsinfo import TLSState

Handler = Callable[[Request], Awaitable[Response | WebSocketAccept]]

_MAX_DRAIN = 4 << 20
_DRAIN_TIMEOUT = 10.0
_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\n\r\n400 Bad Request"
)


async def _next_event(c: h11.Connection, reader: conn.Prefixed) -> object:
    while True:
        event = c.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await reader.read(65536)
            except ConnectionError:
                data = b""
            c.receive_data(data)
            continue
        return event


def to_request(event: h11.Request, remote: str, tls: TLSState | None) -> Request:
    """Go's view of the request: Host and Transfer-Encoding leave the header map."""
    target = go_string(event.target)
    pairs: list[tuple[str, str]] = []
    host = ""
    for raw_name, value in event.headers.raw_items():
        lower = raw_name.lower()
        if lower == b"host":
            host = host or go_string(value)
        elif lower != b"transfer-encoding":
            pairs.append((go_string(raw_name), go_string(value)))
    headers = merge_headers(pairs)
    pragma = headers.get("Pragma")
    if pragma and pragma[0] == "no-cache" and "Cache-Control" not in headers:
        headers["Cache-Control"] = ["no-cache"]  # Go's fixPragmaCacheControl
    if target.startswith(("http://", "https://")):
        authority = target.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
        host = authority or host
    return Request(
        method=go_string(event.method),
        target=target,
        host=host,
        proto="HTTP/" + event.http_version.decode(),
        headers=headers,
        remote=remote,
        tls=tls,
    )


def _response_bytes(c: h11.Connection, method: str, resp: Response, close: bool) -> bytes:
    status = resp.status
    out = b""
    if 100 <= status < 200:
        # Go sends an informational header, then 200 when the handler returns.
        out += c.send(h11.InformationalResponse(status_code=status, headers=[]))
        status = 200
    headers = [*resp.headers, ("Date", http_date())]
    if status not in (204, 304):
        headers.append(("Content-Length", str(len(resp.body))))
    if close:
        headers.append(("Connection", "close"))
    out += c.send(
        h11.Response(status_code=status, headers=headers, reason=REASONS.get(status, "").encode())
    )
    if resp.body and method != "HEAD" and status not in (204, 304):
        out += c.send(h11.Data(data=resp.body))
    out += c.send(h11.EndOfMessage()) or b""
    return out


async def serve_http1(
    reader: conn.Prefixed,
    writer: asyncio.StreamWriter,
    handler: Handler,
    *,
    tls: TLSState | None = None,
) -> None:
    """Serve requests on one connection until it closes."""
    remote = conn.remote_of(writer)
    c = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
    while True:
        try:
            event = await _next_event(c, reader)
        except h11.RemoteProtocolError:
            writer.write(_BAD_REQUEST)
            await conn.close(writer)
            return
        if not isinstance(event, h11.Request):
            await conn.close(writer)
            return
        req = to_request(event, remote, tls)
        try:
            result = await handler(req)
        except ResetConnection:
            conn.reset(writer)
            return
        if isinstance(result, WebSocketAccept):
            writer.write(c.send(h11.InformationalResponse(status_code=101, headers=result.headers)))
            await writer.drain()
            leftover, _closed = c.trailing_data
            await websocket.echo_loop(conn.Prefixed(leftover, reader), writer)
            await conn.close(writer)
            return
        close = c.they_are_waiting_for_100_continue or any(
            name.lower() == "connection" and value.lower() == "close"
            for name, value in result.headers
        )
        try:
            writer.write(_response_bytes(c, req.method, result, close))
            await writer.drain()
        except (h11.LocalProtocolError, ConnectionError):
            conn.reset(writer)
            return
        if close or c.our_state is not h11.DONE or not await _drain_body(c, reader):
            await conn.close(writer)
            return
        c.start_next_cycle()


async def _drain_body(c: h11.Connection, reader: conn.Prefixed) -> bool:
    """Read and drop the rest of the request body; False when the connection must close."""
    seen = 0
    try:
        async with asyncio.timeout(_DRAIN_TIMEOUT):
            while c.their_state is h11.SEND_BODY:
                event = await _next_event(c, reader)
                if isinstance(event, h11.Data):
                    seen += len(event.data)
                    if seen > _MAX_DRAIN:
                        return False
                elif not isinstance(event, h11.EndOfMessage):
                    return False
    except (TimeoutError, h11.RemoteProtocolError):
        return False
    return c.their_state is h11.DONE
