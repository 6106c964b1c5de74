"""Facts about this host's network that translation takes as inputs (translate reads no host
state itself): the addresses assigned to its interfaces, and the lowest port the Envoys it
starts may bind.

Addresses come from the kernel over rtnetlink (an RTM_GETADDR dump, IPv4 and IPv6, no
subprocess); :class:`AddressWatch` listens to the kernel's address notifications and calls
back with the new set whenever it changes (an address added, removed, an interface gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger("gateweave.infra.netenv")

# rtnetlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h)
_NETLINK_ROUTE = 0
_NLMSG_HDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, interface index
_RTATTR = struct.Struct("=HH")  # length, type
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_RTM_NEWADDR, _RTM_GETADDR = 20, 22
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_RTMGRP_IPV4_IFADDR, _RTMGRP_IPV6_IFADDR = 0x10, 0x100

CAP_NET_BIND_SERVICE = 10


def _align(n: int) -> int:
    return (n + 3) & ~3


def _addresses_in(data: bytes, out: set[str]) -> bool:
    """Adds the addresses of the RTM_NEWADDR messages in ``data``; True at the dump's end."""
    offset = 0
    while offset + _NLMSG_HDR.size <= len(data):
        length, kind, _, _, _ = _NLMSG_HDR.unpack_from(data, offset)
        if length < _NLMSG_HDR.size:
            return True
        if kind in (_NLMSG_DONE, _NLMSG_ERROR):
            return True
        if kind == _RTM_NEWADDR:
            body = offset + _NLMSG_HDR.size
            family = data[body]
            attrs: dict[int, bytes] = {}
            pos, end = body + _IFADDRMSG.size, offset + length
            while pos + _RTATTR.size <= end:
                alen, atype = _RTATTR.unpack_from(data, pos)
                if alen < _RTATTR.size:
                    break
                attrs[atype] = data[pos + _RTATTR.size : pos + alen]
                pos += _align(alen)
            # IPv4: IFA_LOCAL is this host's address (IFA_ADDRESS is the peer on point-to-point
            # links).
            raw = attrs.get(_IFA_LOCAL) or attrs.get(_IFA_ADDRESS)
            if family == socket.AF_INET and raw is not None and len(raw) == 4:
                out.add(str(ipaddress.IPv4Address(raw)))
            elif family == socket.AF_INET6 and raw is not None and len(raw) == 16:
                out.add(str(ipaddress.IPv6Address(raw)))
        offset += _align(length)
    return False


def local_addresses() -> frozenset[str]:
    """Every IP address assigned to an interface of this host (network namespace)."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_ROUTE) as sock:
        sock.settimeout(5.0)
        request = _NLMSG_HDR.pack(
            _NLMSG_HDR.size + _IFADDRMSG.size, _RTM_GETADDR, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
        ) + _IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(request)
        out: set[str] = set()
        for _ in range(100_000):  # bounded: a dump ends with NLMSG_DONE
            if _addresses_in(sock.recv(1 << 16), out):
                break
        return frozenset(out)


def unprivileged_port_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        return 1024


def _ambient_capabilities() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapAmb:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def privileged_ports_below() -> int:
    """Ports below this one the Envoys this process starts may not bind: 0 as root or with
    CAP_NET_BIND_SERVICE in the ambient set (which a child keeps across exec), else
    ``net.ipv4.ip_unprivileged_port_start``."""
    if os.geteuid() == 0 or _ambient_capabilities() & (1 << CAP_NET_BIND_SERVICE):
        return 0
    return unprivileged_port_start()


class AddressWatch:
    """Calls ``on_change(addresses)`` when the host's set of addresses changes (netlink
    address notifications wake it; the set is then read again and compared)."""

    def __init__(
        self, on_change: Callable[[frozenset[str]], None], current: frozenset[str]
    ) -> None:
        self.on_change = on_change
        self.current = current
        self._sock: socket.socket | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_ROUTE)
        sock.bind((0, _RTMGRP_IPV4_IFADDR | _RTMGRP_IPV6_IFADDR))
        sock.setblocking(False)
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        with contextlib.suppress(BlockingIOError, InterruptedError):
            for _ in range(1024):  # drain what is queued; the set is read again below
                sock.recv(1 << 16)
        try:
            now = local_addresses()
        except OSError as exc:
            log.warning("cannot read the host's addresses", error=str(exc))
            return
        if now != self.current:
            self.current = now
            log.info("host addresses changed", addresses=sorted(now))
            self.on_change(now)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(ValueError, RuntimeError):
                asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
