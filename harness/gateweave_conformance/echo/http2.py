"""HTTP/2 server connections (the ``h2`` state machine on asyncio streams)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from gateweave_conformance.echo import conn
from gateweave_conformance.echo.gojson import go_string
from gateweave_conformance.echo.handlers import WebSocketAccept
from gateweave_conformance.echo.httpmsg import (
    Request,
    ResetConnection,
    Response,
    http_date,
    is_token,
    merge_headers,
)
from gateweave_conformance.echo.tlsinfo import TLSState

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_MAX_BODY = 4 << 20
# Go's HTTP/2 server drops these from responses (connection-specific in HTTP/2).
_HOP_BY_HOP = {"connection", "transfer-encoding", "keep-alive", "proxy-connection", "upgrade"}

Header = tuple[bytes, bytes]


class H2Stream:
    """One request stream: its header block, body, and a way to answer."""

    def __init__(self, server: H2Server, stream_id: int, headers: list[Header]) -> None:
        self.server = server
        self.stream_id = stream_id
        self.headers = headers
        self.body = bytearray()
        self.ended = asyncio.Event()

    def value(self, name: bytes) -> str:
        for key, value in self.headers:
            if key == name:
                return go_string(value)
        return ""

    async def send_headers(
        self, headers: list[tuple[str, str]], *, end_stream: bool = False
    ) -> None:
        self.server.conn.send_headers(
            self.stream_id, [(k.encode(), v.encode()) for k, v in headers], end_stream=end_stream
        )
        await self.server.flush()

    async def send_data(self, data: bytes, *, end_stream: bool = True) -> None:
        s = self.server
        view = memoryview(data)
        while view:
            window = min(
                s.conn.local_flow_control_window(self.stream_id), s.conn.max_outbound_frame_size
            )
            if window <= 0:
                await s.wait_window()
                continue
            chunk, view = view[:window], view[window:]
            s.conn.send_data(self.stream_id, bytes(chunk), end_stream=end_stream and not view)
            await s.flush()
        if not data and end_stream:
            s.conn.end_stream(self.stream_id)
            await s.flush()

    async def reset(self, code: h2.errors.ErrorCodes = h2.errors.ErrorCodes.INTERNAL_ERROR) -> None:
        with contextlib.suppress(h2.exceptions.H2Error):
            self.server.conn.reset_stream(self.stream_id, code)
        await self.server.flush()


StreamHandler = Callable[[H2Stream], Awaitable[None]]


class H2Server:
    """A server-side HTTP/2 connection; each request stream runs ``handler`` in a task."""

    def __init__(
        self,
        reader: conn.Prefixed,
        writer: asyncio.StreamWriter,
        handler: StreamHandler,
        *,
        wait_for_body: bool = False,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.handler = handler
        self.wait_for_body = wait_for_body
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self._streams: dict[int, H2Stream] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._window = asyncio.Event()

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()

    async def wait_window(self) -> None:
        self._window.clear()
        await self._window.wait()

    async def run(self) -> None:
        # Go's limits: 1 MiB header lists, 1 MiB stream and connection receive windows.
        self.conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 20,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 250,
            },
        )
        # h2 applies the new limit only once the client acknowledges our SETTINGS.
        self.conn.decoder.max_header_list_size = 1 << 20
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window((1 << 20) - 65535)
        await self.flush()
        try:
            while True:
                try:
                    data = await self.reader.read(65536)
                except ConnectionError:
                    break
                if not data:
                    break
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    await self.flush()
                    break
                if not self._dispatch(events):
                    await self.flush()
                    break
                await self.flush()
        finally:
            for task in self._tasks.values():
                task.cancel()
            self._window.set()
            await conn.close(self.writer)

    def _dispatch(self, events: list[h2.events.Event]) -> bool:
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived) and ev.stream_id is not None:
                stream = H2Stream(self, ev.stream_id, list(ev.headers or []))
                self._streams[ev.stream_id] = stream
                if ev.stream_ended is not None:
                    stream.ended.set()
                task = asyncio.create_task(self._run_stream(stream))
                self._tasks[ev.stream_id] = task
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id is not None:
                stream_or_none = self._streams.get(ev.stream_id)
                if ev.flow_controlled_length:
                    with contextlib.suppress(h2.exceptions.H2Error):
                        self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if stream_or_none is not None and len(stream_or_none.body) < _MAX_BODY:
                    stream_or_none.body += ev.data or b""
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id is not None:
                ended = self._streams.get(ev.stream_id)
                if ended is not None:
                    ended.ended.set()
            elif isinstance(ev, h2.events.StreamReset) and ev.stream_id is not None:
                running = self._tasks.pop(ev.stream_id, None)
                if running is not None:
                    running.cancel()
                self._streams.pop(ev.stream_id, None)
            elif isinstance(ev, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
                self._window.set()
            elif isinstance(ev, h2.events.ConnectionTerminated):
                return False
        return True

    async def _run_stream(self, stream: H2Stream) -> None:
        try:
            if self.wait_for_body:
                await stream.ended.wait()
            await self.handler(stream)
        except (h2.exceptions.H2Error, ConnectionError):
            pass
        finally:
            self._tasks.pop(stream.stream_id, None)
            self._streams.pop(stream.stream_id, None)


# ------------------------------------------------------------------ HTTP semantics


def to_request(stream: H2Stream, remote: str, tls: TLSState | None) -> Request:
    pairs: list[tuple[str, str]] = []
    host_header = ""
    for name, value in stream.headers:
        if name.startswith(b":"):
            continue
        if name == b"host":
            host_header = host_header or go_string(value)
            continue
        pairs.append((go_string(name), go_string(value)))
    return Request(
        method=stream.value(b":method"),
        target=stream.value(b":path"),
        host=stream.value(b":authority") or host_header,
        proto="HTTP/2.0",
        headers=merge_headers(pairs),
        remote=remote,
        tls=tls,
    )


async def send_response(stream: H2Stream, method: str, resp: Response) -> None:
    status = resp.status if resp.status >= 200 else 200
    headers = [(":status", str(status))]
    for name, value in resp.headers:
        lower = name.lower()
        if is_token(name) and lower not in _HOP_BY_HOP:
            headers.append((lower, value))
    headers.append(("date", http_date()))
    body = resp.body if method != "HEAD" and status not in (204, 304) else b""
    if status not in (204, 304):
        headers.append(("content-length", str(len(resp.body))))
    await stream.send_headers(headers, end_stream=not body)
    if body:
        await stream.send_data(body)


HttpHandler = Callable[[Request], Awaitable[Response | WebSocketAccept]]


def http_stream_handler(handler: HttpHandler, remote: str, tls: TLSState | None) -> StreamHandler:
    """Adapt a request handler to HTTP/2 streams (a reset closes the stream, not the connection)."""

    async def run(stream: H2Stream) -> None:
        req = to_request(stream, remote, tls)
        try:
            result = await handler(req)
        except ResetConnection:
            await stream.reset()
            return
        if isinstance(result, WebSocketAccept):  # not reachable over HTTP/2
            await stream.reset()
            return
        await send_response(stream, req.method, result)

    return run
