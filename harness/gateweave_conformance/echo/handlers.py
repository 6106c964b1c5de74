"""The HTTP echo's behaviour (ECHO.md, section 1), independent of the wire protocol."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any
from urllib.parse import unquote

from gateweave_conformance.echo import gojson, websocket
from gateweave_conformance.echo.godur import GoError, atoi, parse_duration
from gateweave_conformance.echo.httpmsg import (
    Request,
    ResetConnection,
    Response,
    echo_set_headers,
    escape_path,
    go_clean_path,
)
from gateweave_conformance.echo.logbook import EchoLog

_STATUS_TARGET = re.compile(r"/status/([0-9]{3})")
_JSON_HEADERS = [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]


@dataclasses.dataclass(frozen=True)
class Identity:
    """The pod context every echo reports (``namespace``, ``ingress``, ``service``, ``pod``)."""

    namespace: str = ""
    ingress: str = ""
    service: str = ""
    pod: str = ""

    def as_json(self) -> dict[str, str]:
        return {
            "namespace": self.namespace,
            "ingress": self.ingress,
            "service": self.service,
            "pod": self.pod,
        }


@dataclasses.dataclass
class WebSocketAccept:
    """The handshake succeeded: the HTTP/1.1 layer answers 101 and echoes frames."""

    headers: list[tuple[str, str]]


def _error(status: int, message: str) -> Response:
    return Response(status, list(_JSON_HEADERS), gojson.marshal({"message": message}))


def _text(status: int, body: str) -> Response:
    return Response(status, [("Content-Type", "text/plain; charset=utf-8")], body.encode())


class HttpEcho:
    """One replica's HTTP handlers; the retry counts and lock are per replica, as upstream."""

    def __init__(self, identity: Identity, http_port: str, log: EchoLog) -> None:
        self.identity = identity
        self.http_port = http_port
        self.log = log
        self._retry_lock = asyncio.Lock()
        self._retry_attempts: dict[str, int] = {}

    # -------------------------------------------------------------- entry points

    async def serve_main(self, req: Request) -> Response | WebSocketAccept:
        """Ports 3000 and 8443: upstream's ServeMux behind ``preserveSlashes``."""
        if req.method == "CONNECT":
            return await self.echo(req)
        path = unquote(req.raw_path).replace("//", "/")
        cleaned = go_clean_path(path)
        if cleaned in ("/status", "/retry"):
            return self._redirect(cleaned + "/", req.raw_query, req.method)
        if cleaned != path:
            return self._redirect(cleaned, req.raw_query, req.method)
        if cleaned == "/health":
            return _text(200, "OK")
        if cleaned == "/ws":
            return self.websocket(req)
        if cleaned.startswith("/status/"):
            return self.status(req)
        if cleaned.startswith("/retry/"):
            return await self.retry(req)
        return await self.echo(req)

    async def serve_h2c_port(self, req: Request) -> Response:
        """Port 3001: every path is echoed; HTTP/1.x needs ``Upgrade: h2c``."""
        if req.proto != "HTTP/2.0" and req.header_get("Upgrade") != "h2c":
            return _text(400, "Expected h2c request")
        return await self.echo(req)

    # -------------------------------------------------------------- handlers

    async def echo(self, req: Request) -> Response:
        self.log.write(f"Echoing back request made to {req.target} to client ({req.remote})")
        try:
            await _delay(req.query_get("delay"))
        except GoError as err:
            return _error(500, str(err))
        body: dict[str, Any] = {
            "path": req.target,
            "host": req.host,
            "method": req.method,
            "proto": req.proto,
            "headers": dict(sorted(req.headers.items())),
            "httpPort": self.http_port,
            **self.identity.as_json(),
        }
        if req.tls is not None:
            body["tls"] = req.tls.http_json()
        headers = [
            (name, value)
            for name, value in echo_set_headers(req.headers.get("X-Echo-Set-Header", []))
            if name not in ("Content-Type", "X-Content-Type-Options")
        ]
        return Response(200, headers + _JSON_HEADERS, gojson.marshal_indent(body))

    def status(self, req: Request) -> Response:
        match = _STATUS_TARGET.fullmatch(req.target)
        return Response(int(match.group(1)) if match else 400)

    async def retry(self, req: Request) -> Response:
        uuid = req.query_get("uuid")
        if not uuid:
            return _text(400, "uuid is required")
        try:
            succeed_after = atoi(req.query_get("succeedAfter"))
        except GoError:
            return _text(400, "succeedAfter is required")
        response_code: int | None
        try:
            response_code = atoi(req.query_get("responseCode"))
        except GoError:
            response_code = None
        async with self._retry_lock:
            if self._retry_attempts.get(uuid, 0) < succeed_after:
                self._retry_attempts[uuid] = self._retry_attempts.get(uuid, 0) + 1
                try:
                    await _delay(req.query_get("delayRetry"))
                except GoError as err:
                    return _error(500, str(err))
                if response_code is not None and 100 <= response_code <= 999:
                    return Response(response_code)
                if response_code is None and req.proto == "HTTP/2.0":
                    # Go's HTTP/2 ResponseWriter cannot be hijacked.
                    return _error(500, "response writer does not support hijacking")
                raise ResetConnection()
            return await self.echo(req)

    def websocket(self, req: Request) -> Response | WebSocketAccept:
        if req.proto == "HTTP/2.0":
            # x/net/websocket hijacks the connection, which HTTP/2 refuses: stream reset.
            raise ResetConnection()
        result = websocket.check_handshake(req)
        if isinstance(result, Response):
            return result
        self.log.write(f"established websocket connection {req.header_get('Origin')}")
        return WebSocketAccept(result)

    @staticmethod
    def _redirect(path: str, raw_query: str, method: str) -> Response:
        location = escape_path(path) + (f"?{raw_query}" if raw_query else "")
        headers = [("Location", location)]
        body = b""
        if method in ("GET", "HEAD"):
            headers.append(("Content-Type", "text/html; charset=utf-8"))
            body = f'<a href="{location}">Moved Permanently</a>.\n\n'.encode()
        return Response(301, headers, body)


async def _delay(value: str) -> None:
    if not value:
        return
    seconds = parse_duration(value)
    if seconds > 0:
        await asyncio.sleep(seconds)
