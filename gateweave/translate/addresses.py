"""Gateway addresses in standalone mode: spec.addresses checked, the rest assigned from a pool.

Every Gateway gets its own loopback address so many Gateways can listen on the same port.
The assignment is a pure function of the set of Gateways: each Gateway's preferred slot is a
hash of its namespace/name, so adding or removing other Gateways almost never moves it; on a
collision the Gateway that sorts first (creationTimestamp, then namespace/name) keeps the slot.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.context import sort_key

SUPPORTED_TYPES = ("IPAddress",)
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


@dataclass
class AddressResult:
    address: str = ""  # "" when none could be assigned
    # Accepted=False reason (UnsupportedAddress) or Programmed=False reason (AddressNotUsable / AddressNotAssigned)
    accept_reason: str = ""
    program_reason: str = ""
    message: str = ""


def _usable(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip in LOOPBACK or ip == ipaddress.ip_address("::1")


def assign(gateways: list[m.Gateway], pool: str) -> dict[tuple[str, str], AddressResult]:
    results: dict[tuple[str, str], AddressResult] = {}
    taken: dict[str, tuple[str, str]] = {}
    want_pool: list[m.Gateway] = []
    for gw in sorted(gateways, key=sort_key):
        key = (gw.metadata.namespace, gw.metadata.name)
        res = AddressResult()
        results[key] = res
        requested: list[str] = []
        for addr in gw.spec.addresses:
            if addr.type not in SUPPORTED_TYPES:
                res.accept_reason = c.R_UNSUPPORTED_ADDRESS
                res.message = f"address type {addr.type!r} is not supported (supported: IPAddress)"
                break
            if not addr.value:
                continue  # an empty value asks the implementation to pick one
            try:
                ip = ipaddress.ip_address(addr.value)
            except ValueError:
                res.accept_reason = c.R_UNSUPPORTED_ADDRESS
                res.message = f"{addr.value!r} is not an IP address"
                break
            if not _usable(ip):
                res.program_reason = c.R_ADDRESS_NOT_USABLE
                res.message = f"address {addr.value} is not a loopback address this host can bind"
                continue
            requested.append(str(ip))
        if res.accept_reason:
            continue
        if len(requested) > 1:
            res.program_reason = c.R_ADDRESS_NOT_USABLE
            res.message = "standalone mode binds one address per Gateway; more than one was requested"
            continue
        if res.program_reason:
            continue
        if requested:
            owner = taken.get(requested[0])
            if owner is not None:
                res.program_reason = c.R_ADDRESS_NOT_USABLE
                res.message = f"address {requested[0]} is already used by Gateway {owner[0]}/{owner[1]}"
                continue
            taken[requested[0]] = key
            res.address = requested[0]
        else:
            want_pool.append(gw)
    net = ipaddress.ip_network(pool, strict=False)
    size = net.num_addresses
    for gw in want_pool:
        key = (gw.metadata.namespace, gw.metadata.name)
        digest = hashlib.sha256(f"{key[0]}/{key[1]}".encode()).digest()
        start = int.from_bytes(digest[:8], "big") % size
        for i in range(size):
            candidate = net.network_address + ((start + i) % size)
            text = str(candidate)
            if candidate == net.network_address or (size > 2 and candidate == net.broadcast_address):
                continue
            if text not in taken:
                taken[text] = key
                results[key].address = text
                break
        else:
            results[key].program_reason = c.R_ADDRESS_NOT_ASSIGNED
            results[key].message = f"the address pool {pool} is exhausted"
    return results
