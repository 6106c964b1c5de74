"""The TCP keepalive options of another process's sockets (a running Envoy's), read on the
sockets themselves: each of its socket descriptors is copied into this process
(``pidfd_getfd``, which needs root, as the tests that use it run), and its addresses and options
read with ``getsockname`` / ``getpeername`` / ``getsockopt``."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Iterable, Iterator
from typing import NamedTuple

_SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture


class Keepalive(NamedTuple):
    on: bool  # SO_KEEPALIVE
    probes: int  # TCP_KEEPCNT
    idle_s: int  # TCP_KEEPIDLE
    interval_s: int  # TCP_KEEPINTVL


def _sockets(pid: int) -> Iterator[socket.socket]:
    """Copies of process ``pid``'s socket descriptors (closed after each step)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for entry in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if not os.readlink(f"/proc/{pid}/fd/{entry}").startswith("socket:"):
                    continue
            fd = libc.syscall(_SYS_PIDFD_GETFD, pidfd, int(entry), 0)
            if fd < 0:
                continue  # closed meanwhile
            with socket.socket(fileno=fd) as sock:
                yield sock
    finally:
        os.close(pidfd)


def keepalive_of(pids: Iterable[int], peer: tuple[str, int]) -> list[Keepalive]:
    """The keepalive options of the TCP sockets of processes ``pids`` connected to ``peer``
    (address, port)."""
    out = []
    for pid in pids:
        for sock in _sockets(pid):
            if sock.type != socket.SOCK_STREAM or sock.family != socket.AF_INET:
                continue
            try:
                if sock.getpeername()[:2] != peer:
                    continue
            except OSError:
                continue  # not connected (a listening socket)
            out.append(
                Keepalive(
                    on=bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)),
                    probes=sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                    idle_s=sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    interval_s=sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                )
            )
    return out
