"""Connection-level helpers shared by the TCP-based listeners."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any, Protocol


class Readable(Protocol):
    async def read(self, n: int) -> bytes: ...


def set_nodelay(writer: asyncio.StreamWriter) -> None:
    """Disable Nagle: header and body writes must not wait for a delayed ACK."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0, then close)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def remote_of(writer: asyncio.StreamWriter) -> str:
    """Go's ``RemoteAddr().String()``: ``ip:port`` or ``[ipv6]:port``."""
    peer: Any = writer.get_extra_info("peername")
    if not peer:
        return ""
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 2)
    except (TimeoutError, OSError, ConnectionError):
        pass


class Prefixed:
    """A stream reader that first yields bytes already read from the connection."""

    def __init__(self, prefix: bytes, reader: Readable) -> None:
        self._buf = bytearray(prefix)
        self._reader = reader

    async def read(self, n: int) -> bytes:
        if self._buf:
            out = bytes(self._buf[:n])
            del self._buf[:n]
            return out
        return await self._reader.read(n)

    async def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = await self._reader.read(max(n - len(self._buf), 65536))
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(self._buf), n)
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out
