"""TCP mode: the line protocol on 3000 and, with TLS material, on 8443 (ECHO.md, section 3)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateweave_conformance.echo import gojson
from gateweave_conformance.echo.handlers import Identity
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.logbook import EchoLog
from gateweave_conformance.echo.spec import EchoSpec
from gateweave_conformance.echo.tlsinfo import ServerTLS, TLSState

WELCOME = b"Gateway API Test TCP Server\n"
_MAX_LINE = 64 * 1024  # bufio.Scanner's default token limit


def test_payload(identity: Identity, tcp_port: str, tls_port: str, tls: TLSState | None) -> bytes:
    body: dict[str, Any] = {**identity.as_json(), "tcpport": tcp_port}
    if tls_port:
        body["tlsport"] = tls_port
    body["isTLS"] = tls is not None
    if tls is not None:
        info: dict[str, Any] = {"version": tls.go_version_name, "serverName": tls.server_name}
        if tls.negotiated_protocol:
            info["negotiatedProtocol"] = tls.negotiated_protocol
        # "curves" is omitted: Python's ssl does not expose the negotiated group.
        info["cipherSuite"] = tls.cipher_suite
        body["tls"] = info
    return gojson.marshal(body) + b"\n"


async def _lines(reader: asyncio.StreamReader) -> Any:
    """bufio.Scanner with ScanLines: ``\\n``-split, trailing ``\\r`` dropped, last line at EOF."""
    buf = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            if buf:
                yield buf.removesuffix(b"\r")
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.removesuffix(b"\r")
        if len(buf) > _MAX_LINE:
            return


async def serve_tcp_echo(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes, is_tls: bool
) -> None:
    writer.write(WELCOME)
    await writer.drain()
    async for line in _lines(reader):
        if line == b"TEST":
            writer.write(payload)
        elif line == b"IS_TLS":
            writer.write(b"true\n" if is_tls else b"false\n")
        elif line == b"PING":
            writer.write(b"PONG\n")
        else:
            continue
        await writer.drain()


async def start_tcp(
    spec: EchoSpec, identity: Identity, log: EchoLog, listeners: Listeners
) -> dict[str, int]:
    ports: dict[str, int] = {}
    tls = ServerTLS(spec.tls_cert, spec.tls_key) if spec.tls_cert and spec.tls_key else None

    def port_strings() -> tuple[str, str]:
        # TLS_PORT is reported even without TLS material, as upstream does.
        return str(ports["tcp"]), str(ports.get("tls", spec.tls_port))

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_tcp_echo(reader, writer, test_payload(identity, *port_strings(), None), False)

    ports["tcp"] = await listeners.tcp(spec.host, spec.tcp_port, plain)
    log.write(f"Starting server (tcp) protocol=tcp port={ports['tcp']}")
    if tls is not None:

        async def secure(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state = tls.state(writer.get_extra_info("ssl_object"))
            await serve_tcp_echo(
                reader, writer, test_payload(identity, *port_strings(), state), True
            )

        ports["tls"] = await listeners.tcp(spec.host, spec.tls_port, secure, tls=tls.context)
        log.write(f"Starting server (tcp) protocol=tls port={ports['tls']}")
    return ports
