"""Bound sockets of one replica, and the tasks serving their connections."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable

from gateweave_conformance.echo import conn

ConnHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Listeners:
    """Opens TCP/UDP listeners and closes them, with every live connection, on ``close``."""

    def __init__(self) -> None:
        self._servers: list[asyncio.Server] = []
        self._transports: list[asyncio.BaseTransport] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def tcp(
        self,
        host: str,
        port: int,
        handler: ConnHandler,
        *,
        tls: ssl.SSLContext | None = None,
    ) -> int:
        """Listen on ``host:port``; returns the bound port."""

        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.add(task)
            self._writers.add(writer)
            conn.set_nodelay(writer)
            try:
                await handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
                pass
            except asyncio.CancelledError:
                # Only ``close`` cancels these tasks; ending normally keeps asyncio's
                # stream callback from reporting the cancellation as an error.
                pass
            finally:
                self._writers.discard(writer)
                if task is not None:
                    self._tasks.discard(task)
                if not writer.is_closing():
                    writer.close()

        server = await asyncio.start_server(
            on_conn, host, port, ssl=tls, ssl_handshake_timeout=10 if tls else None, backlog=512
        )
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def udp(self, host: str, port: int, protocol: asyncio.DatagramProtocol) -> int:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: protocol, local_addr=(host, port)
        )
        self._transports.append(transport)
        return int(transport.get_extra_info("sockname")[1])

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for transport in self._transports:
            transport.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self._servers.clear()
        self._transports.clear()
