"""Gateway addresses, in one of two modes (``TranslateOptions.address_mode``).

**standalone**: a spec.addresses IPAddress is bound as given when it is usable: assigned to
an interface of this host (``TranslateOptions.local_addresses``, which serve reads and keeps
current), a loopback address, or the unspecified address (0.0.0.0, ::, every interface);
otherwise Programmed=False AddressNotUsable. A Gateway without one binds
``TranslateOptions.default_address`` if set (serve --default-address), else gets its own
loopback address from a pool, so many Gateways can listen on the same port. The pool
assignment is a pure function of the set of Gateways: each Gateway's preferred slot is a
hash of its namespace/name, so adding or removing other Gateways almost never moves it; on
a collision the Gateway that sorts first (creationTimestamp, then namespace/name) keeps the
slot. Gateways may share an address (or one binds 0.0.0.0 and another an address under it):
which of them gets a port is decided per listener, in translate/binds.py.

**kubernetes** (``serve --dataplane kubernetes``): each Gateway has its own Envoy pods behind
its own Service, so listeners bind ``0.0.0.0``. spec.addresses IPAddress entries are
requests handed to that Service (the infrastructure IR's ``requested_addresses``; the
infra manager sets ``loadBalancerIP`` on a LoadBalancer Service, ``externalIPs`` on
others); Hostname and NamedAddress are not supported (Accepted=False UnsupportedAddress).
The Gateway's addresses are the Service's, found in the snapshot by the labels the infra
manager puts on it (:func:`gateweave.ir.envoy_labels`): a LoadBalancer Service's ingress
IPs and hostnames - none yet is Programmed=False AddressNotAssigned (the cluster IP is not
what clients of a load balancer reach) - and any other type's externalIPs and cluster IP.
A requested address the Service does not have is Programmed=False AddressNotUsable.
The Gateways of a merged class (``mergeGateways``) share one Envoy Deployment and Service,
found by the class's labels (:func:`gateweave.ir.class_envoy_labels`): each has that
Service's addresses.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.context import sort_key
from gateweave.translate.options import TranslateOptions

SUPPORTED_TYPES = ("IPAddress",)
IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass
class AddressResult:
    address: str = ""  # "" when none could be assigned
    # What is wrong with it, if anything: Accepted=False (UnsupportedAddress) or Programmed=False
    # (AddressNotUsable / AddressNotAssigned).
    not_accepted: c.Condition | None = None
    not_programmed: c.Condition | None = None
    # Kubernetes mode: the IPs to request from the Service, and the Gateway's addresses
    # as (type, value) for status.addresses.
    requested: tuple[str, ...] = ()
    found: list[tuple[str, str]] = field(default_factory=list)


def _usable(ip: IP, local: frozenset[str]) -> bool:
    return ip.is_loopback or ip.is_unspecified or str(ip) in local


def requested_ips(gw: m.Gateway, res: AddressResult) -> list[tuple[str, IP]] | None:
    """The IP addresses ``spec.addresses`` asks for, as (value as given, address) (empty values
    ask for one to be picked), or None, with ``res.not_accepted`` set, when an entry is not a
    supported IP address."""
    out = []
    for addr in gw.spec.addresses:
        if addr.type not in SUPPORTED_TYPES:
            res.not_accepted = c.gateway_unsupported_address(
                f"address type {addr.type!r} is not supported (supported: IPAddress)"
            )
            return None
        if not addr.value:
            continue  # an empty value asks the implementation to pick one
        try:
            out.append((addr.value, ipaddress.ip_address(addr.value)))
        except ValueError:
            res.not_accepted = c.gateway_unsupported_address(f"{addr.value!r} is not an IP address")
            return None
    return out


def assign(
    gateways: list[m.Gateway], options: TranslateOptions
) -> dict[tuple[str, str], AddressResult]:
    local = frozenset(_normal_ip(a) for a in options.local_addresses)
    default = None if options.default_address == "pool" else options.default_address
    results: dict[tuple[str, str], AddressResult] = {}
    taken: dict[str, tuple[str, str]] = {}  # pool addresses in use
    want_pool: list[m.Gateway] = []
    for gw in sorted(gateways, key=sort_key):
        key = (gw.metadata.namespace, gw.metadata.name)
        res = AddressResult()
        results[key] = res
        ips = requested_ips(gw, res)
        if ips is None:
            continue
        source = "address"
        if not ips and default is not None:
            try:
                ips = [(default, ipaddress.ip_address(default))]
            except ValueError:
                res.not_programmed = c.gateway_address_not_usable(
                    f"the default address {default!r} is not an IP address"
                )
                continue
            source = "default address (serve --default-address)"
        requested: list[str] = []
        for value, ip in ips:
            if not _usable(ip, local):
                res.not_programmed = c.gateway_address_not_usable(
                    f"{source} {value} is not assigned to an interface of this host (nor is it "
                    "0.0.0.0 or ::)"
                )
                continue
            requested.append(str(ip))
        if len(requested) > 1:
            res.not_programmed = c.gateway_address_not_usable(
                "standalone mode binds one address per Gateway; more than one was requested"
            )
            continue
        if res.not_programmed is not None:
            continue
        if requested:
            # Gateways may share an address: their listeners' ports decide (translate/binds.py).
            taken.setdefault(requested[0], key)
            res.address = requested[0]
        else:
            want_pool.append(gw)
    net = ipaddress.ip_network(options.address_pool, strict=False)
    size = net.num_addresses
    for gw in want_pool:
        key = (gw.metadata.namespace, gw.metadata.name)
        digest = hashlib.sha256(f"{key[0]}/{key[1]}".encode()).digest()
        start = int.from_bytes(digest[:8], "big") % size
        for i in range(size):
            candidate = net.network_address + ((start + i) % size)
            text = str(candidate)
            if candidate == net.network_address or (
                size > 2 and candidate == net.broadcast_address
            ):
                continue
            if text not in taken:
                taken[text] = key
                results[key].address = text
                break
        else:
            results[key].not_programmed = c.gateway_address_not_assigned(
                f"the address pool {options.address_pool} is exhausted"
            )
    return results


# ---------------------------------------------------------------- Kubernetes mode

ANY_ADDRESS = "0.0.0.0"
NN = tuple[str, str]


def _normal_ip(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def envoy_services(services: Mapping[NN, m.Service]) -> dict[NN, m.Service]:
    """(namespace, Gateway name) -> the Gateway's Envoy Service (by its labels; if several
    carry them, the first by name)."""
    out: dict[NN, m.Service] = {}
    for (ns, _name), svc in sorted(services.items()):
        labels = svc.metadata.labels
        gateway = labels.get(ir.GATEWAY_NAME_LABEL)
        if gateway is None or (ns, gateway) in out:
            continue
        if all(labels.get(k) == v for k, v in ir.envoy_labels(gateway).items()):
            out[(ns, gateway)] = svc
    return out


def service_addresses(svc: m.Service) -> list[tuple[str, str]]:
    """A Service's addresses as Gateway addresses: a LoadBalancer's ingress, else the
    externalIPs and the cluster IP."""
    out: list[tuple[str, str]] = []
    if svc.spec.type == "LoadBalancer":
        for ingress in svc.status.load_balancer.ingress:
            if ingress.ip:
                out.append(("IPAddress", _normal_ip(ingress.ip)))
            elif ingress.hostname:
                out.append(("Hostname", ingress.hostname))
        return out
    out += [("IPAddress", _normal_ip(ip)) for ip in svc.spec.external_ips]
    if svc.spec.cluster_ip and svc.spec.cluster_ip != "None":
        out.append(("IPAddress", _normal_ip(svc.spec.cluster_ip)))
    return list(dict.fromkeys(out))


def class_services(services: Mapping[NN, m.Service]) -> dict[str, m.Service]:
    """GatewayClass name -> the Envoy Service of its merged Gateways (by its labels,
    :func:`gateweave.ir.class_envoy_labels`; if several carry them, the first by namespace
    and name)."""
    out: dict[str, m.Service] = {}
    for _key, svc in sorted(services.items()):
        labels = svc.metadata.labels
        name = labels.get(ir.GATEWAY_CLASS_LABEL)
        if name is None or name in out:
            continue
        if all(labels.get(k) == v for k, v in ir.class_envoy_labels(name).items()):
            out[name] = svc
    return out


def assign_kubernetes(
    gateways: list[m.Gateway],
    services: Mapping[NN, m.Service],
    merged_classes: set[str] | frozenset[str] = frozenset(),
) -> dict[NN, AddressResult]:
    """Each Gateway's addresses: its Service's, or for a Gateway of a merged class
    (``merged_classes``) the class's one Service's."""
    by_gateway = envoy_services(services)
    by_class = class_services(services) if merged_classes else {}
    results: dict[NN, AddressResult] = {}
    for gw in gateways:
        key = (gw.metadata.namespace, gw.metadata.name)
        res = results[key] = AddressResult(address=ANY_ADDRESS)
        ips = requested_ips(gw, res)
        if ips is None:
            continue
        res.requested = tuple(dict.fromkeys(str(ip) for _, ip in ips))
        merged = gw.spec.gateway_class_name in merged_classes
        svc = by_class.get(gw.spec.gateway_class_name) if merged else by_gateway.get(key)
        if svc is None:
            res.not_programmed = c.gateway_address_not_assigned(
                f"waiting for the shared Envoy Service of GatewayClass "
                f"{gw.spec.gateway_class_name} to be created"
                if merged
                else "waiting for the Gateway's Envoy Service to be created"
            )
            continue
        where = f"Service {svc.metadata.namespace}/{svc.metadata.name}"
        res.found = service_addresses(svc)
        if not res.found:
            res.not_programmed = c.gateway_address_not_assigned(
                f"waiting for the load balancer to assign an address to {where}"
                if svc.spec.type == "LoadBalancer"
                else f"{where} has no cluster IP yet"
            )
            continue
        have = {value for kind, value in res.found if kind == "IPAddress"}
        missing = [ip for ip in res.requested if ip not in have]
        if missing:
            res.not_programmed = c.gateway_address_not_usable(
                f"requested address{'es' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"not assigned to {where} (it has {', '.join(v for _, v in res.found)})"
            )
    return results
