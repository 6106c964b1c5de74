"""HTTP mode: HTTP/1.x on 3000, h2c on 3001, HTTPS (ALPN h2/http1.1) on 8443."""

from __future__ import annotations

import asyncio

from gateweave_conformance.echo import conn
from gateweave_conformance.echo.handlers import HttpEcho
from gateweave_conformance.echo.http1 import serve_http1
from gateweave_conformance.echo.http2 import PREFACE, H2Server, http_stream_handler
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.spec import EchoSpec
from gateweave_conformance.echo.tlsinfo import ServerTLS


async def start_http(spec: EchoSpec, app: HttpEcho, listeners: Listeners) -> dict[str, int]:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_http1(conn.Prefixed(b"", reader), writer, app.serve_main)

    async def h2c(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b""
        while len(head) < len(PREFACE) and PREFACE.startswith(head):
            chunk = await reader.read(len(PREFACE) - len(head))
            if not chunk:
                return
            head += chunk
        prefixed = conn.Prefixed(head, reader)
        if head == PREFACE:
            handler = http_stream_handler(app.serve_h2c_port, conn.remote_of(writer), None)
            await H2Server(prefixed, writer, handler).run()
        else:
            await serve_http1(prefixed, writer, app.serve_h2c_port)

    ports = {
        "http": await listeners.tcp(spec.host, spec.http_port, plain),
        "h2c": await listeners.tcp(spec.host, spec.h2c_port, h2c),
    }
    app.http_port = str(ports["http"])  # what HTTP_PORT says, also when 0 picked a port
    app.log.write(f"Starting server, listening on port {ports['http']} (http)")
    app.log.write(f"Starting server, listening on port {ports['h2c']} (h2c)")
    if spec.has_tls:
        assert spec.tls_cert and spec.tls_key
        tls = ServerTLS(
            spec.tls_cert, spec.tls_key, alpn=["h2", "http/1.1"], client_ca=spec.client_ca
        )

        async def https(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state = tls.state(writer.get_extra_info("ssl_object"))
            prefixed = conn.Prefixed(b"", reader)
            if state.negotiated_protocol == "h2":
                handler = http_stream_handler(app.serve_main, conn.remote_of(writer), state)
                await H2Server(prefixed, writer, handler).run()
            else:
                await serve_http1(prefixed, writer, app.serve_main, tls=state)

        ports["https"] = await listeners.tcp(spec.host, spec.https_port, https, tls=tls.context)
        app.log.write(f"Starting server, listening on port {ports['https']} (https)")
    return ports
