"""UDP mode (JSON echo on 8080) and the DNS stand-in (53/udp) (ECHO.md, section 4)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from gateweave_conformance.echo import dns, gojson
from gateweave_conformance.echo.handlers import Identity
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.logbook import EchoLog
from gateweave_conformance.echo.spec import EchoSpec

_READ_LIMIT = 1024  # upstream reads into a 1024-byte buffer


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, reply: Callable[[bytes, tuple[Any, ...]], bytes | None]) -> None:
        self._reply = reply
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        out = self._reply(data, addr)
        if out is not None and self._transport is not None:
            self._transport.sendto(out, addr)

    def error_received(self, exc: Exception) -> None:  # ICMP errors: keep serving
        pass


def udp_reply(identity: Identity, data: bytes) -> bytes:
    payload = data[:_READ_LIMIT]
    return gojson.marshal({"request": gojson.go_string(payload), **identity.as_json()})


async def start_udp(
    spec: EchoSpec, identity: Identity, log: EchoLog, listeners: Listeners
) -> dict[str, int]:
    def reply(data: bytes, addr: tuple[Any, ...]) -> bytes:
        log.write(f"Received UDP {gojson.go_string(data[:_READ_LIMIT])} from {addr[0]}:{addr[1]}")
        return udp_reply(identity, data)

    port = await listeners.udp(spec.host, spec.udp_port, _Datagrams(reply))
    log.write(f"UDP server listening on :{port}")
    return {"udp": port}


async def start_dns(spec: EchoSpec, log: EchoLog, listeners: Listeners) -> dict[str, int]:
    def reply(data: bytes, addr: tuple[Any, ...]) -> bytes | None:
        return dns.answer(data, addr[0], addr[1])

    port = await listeners.udp(spec.host, spec.dns_port, _Datagrams(reply))
    log.write(f"DNS stand-in listening on {spec.host}:{port}/udp")
    return {"dns": port}
