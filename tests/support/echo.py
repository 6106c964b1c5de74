"""Bytes through a TCP listener to an echo backend and back."""

from __future__ import annotations

import asyncio
import socket


async def echo_through(ip: str, port: int, payload: bytes) -> bytes | None:
    """What came back for ``payload`` sent on one connection (``None``: no connection)."""

    def talk() -> bytes | None:
        try:
            with socket.create_connection((ip, port), timeout=2) as sock:
                sock.sendall(payload)
                got = b""
                while len(got) < len(payload):
                    data = sock.recv(65536)
                    if not data:
                        break
                    got += data
                return got
        except OSError:
            return None

    return await asyncio.to_thread(talk)
