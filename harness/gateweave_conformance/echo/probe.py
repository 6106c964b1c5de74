"""Readiness probes (ECHO.md, section 5): an echo is ready when its listeners answer."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from typing import Any

from gateweave_conformance.echo.spec import Mode
from gateweave_conformance.echo.tcpserver import WELCOME


async def _http(host: str, port: int, path: str = "/health", answer: bytes = b"200 ") -> bool:
    """``GET path`` answered with a status line starting ``HTTP/1.1 <answer>`` (the echo's health
    path answers 200; the file server has none, so any answer to ``/`` tells it is up)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read(65536)
        return data.startswith(b"HTTP/1.1 " + answer)
    finally:
        writer.close()


async def _grpc(host: str, port: int) -> bool:
    import grpc

    from gateweave_conformance import grpcecho_pb2 as pb
    from gateweave_conformance import grpcecho_pb2_grpc as pb_grpc

    async with grpc.aio.insecure_channel(f"{host}:{port}") as channel:
        stub = pb_grpc.GrpcEchoStub(channel)
        await stub.Echo(pb.EchoRequest(), timeout=2)
    return True


async def _tcp(host: str, port: int) -> bool:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        return await reader.readline() == WELCOME
    finally:
        writer.close()


class _OneReply(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if not self.reply.done():
            self.reply.set_result(data)


async def _datagram(host: str, port: int, payload: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    proto = _OneReply()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: proto, remote_addr=(host, port), family=socket.AF_INET
    )
    try:
        transport.sendto(payload)
        return await asyncio.wait_for(proto.reply, 1)
    finally:
        transport.close()


def dns_query(qid: int, name: str = "foo.bar.com.", qtype: int = 1) -> bytes:
    """A standard query (RD set) for ``name``, as the UDPRoute test sends it."""
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".") if p)
    return (
        struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        + labels
        + b"\x00"
        + struct.pack("!HH", qtype, 1)
    )


async def probe_once(mode: Mode, host: str, port: int) -> bool:
    """One readiness check of the listener on ``host:port``."""
    try:
        async with asyncio.timeout(3):
            if mode == "http":
                return await _http(host, port)
            if mode == "grpc":
                return await _grpc(host, port)
            if mode == "files":
                return await _http(host, port, "/", b"")
            if mode == "tcp":
                return await _tcp(host, port)
            if mode == "udp":
                return (
                    await _datagram(host, port, b"gateway-api-conformance-udp-echo")
                ).startswith(b"{")
            qid = int.from_bytes(os.urandom(2), "big")
            reply = await _datagram(host, port, dns_query(qid))
            return (
                len(reply) >= 12
                and struct.unpack("!H", reply[:2])[0] == qid
                and bool(reply[2] & 0x80)
            )
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    except Exception as err:  # grpc.aio.AioRpcError and friends
        if type(err).__module__.startswith("grpc"):
            return False
        raise


async def wait_ready(mode: Mode, host: str, port: int, timeout: float = 10.0) -> bool:
    """Probe until ready or ``timeout`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await probe_once(mode, host, port):
            return True
        if loop.time() >= deadline:
            return False
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)
