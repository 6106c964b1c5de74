"""Which listener serves which route, read back from the last translation's IR.

The xDS IR is per Envoy listener (a port of a Gateway's address), not per Gateway API
listener, but it keeps enough to say who serves what:

* an HTTP port's virtual host serves one domain, and a domain belongs to the most specific
  listener of the port whose hostname selects it (the infrastructure IR names the listeners
  of each port) - the rule :func:`gateweave.translate.hostnames.first_selecting` implements;
* a TLS port's filter chains are named ``<port>/<listener>`` (HTTPS, its routes in its own
  route configuration) or ``<port>/<listener>/<namespace>/<TLSRoute>`` (TLS passthrough or
  termination to TCP);
* IR route names start with ``<kind>/<namespace>/<name>`` (the kind in lowercase).

TCP and UDP ports name no route (their proxy is the port's); the graph then falls back to
the route's status (see :mod:`gateweave.dashboard.graph`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from gateweave import ir
from gateweave.api.kinds import ROUTE_KINDS
from gateweave.translate.hostnames import first_selecting, selectors, specificity

RouteId = str  # "<Kind>/<namespace>/<name>", the key /api/traffic uses too
# (gateway "ns/name", route id) -> names of the listeners that serve the route there
Served = dict[tuple[str, RouteId], set[str]]


_KIND_BY_LOWER = {kind.lower(): kind for kind in ROUTE_KINDS}


def route_id(ir_route_name: str) -> RouteId | None:
    """The route an IR route belongs to (``<kind, lowercase>/<ns>/<name>/rule/<i>/match/<j>``);
    None for the routes translation adds itself (a misdirected request's 421)."""
    parts = ir_route_name.split("/", 3)
    kind = _KIND_BY_LOWER.get(parts[0])
    if len(parts) < 3 or kind is None:
        return None
    return f"{kind}/{parts[1]}/{parts[2]}"


def served_listeners(
    xds: Mapping[str, ir.XdsGateway],
    infra: Mapping[str, ir.InfraGateway],
    hostnames: Mapping[tuple[str, str], str | None],
) -> Served:
    """For every Gateway of the IR: which of its listeners serve which routes.

    ``hostnames``: (gateway "ns/name", listener name) -> the listener's hostname (None: any).
    """
    out: Served = defaultdict(set)
    for node, gw in xds.items():
        ports = infra.get(node)
        for port in gw.ports:
            gw_name = "/".join(
                port.name.split("/", 2)[:2]
            )  # its Gateway (a merged class's node has several)
            on_port = _listeners_on(ports, port, None if gw_name == node else gw_name)
            if port.http is not None:
                ranked = sorted(
                    on_port, key=lambda name: (specificity(hostnames.get((gw_name, name))), name)
                )
                sel = selectors([(name, hostnames.get((gw_name, name))) for name in ranked])
                for vhost in port.http.virtual_hosts:
                    owner = first_selecting(sel, vhost.domains[0])
                    if owner is not None:
                        _add(out, gw_name, owner, (r.name for r in vhost.routes))
            for chain in port.filter_chains:
                listener, _, rest = chain.name[len(port.name) + 1 :].partition("/")
                if chain.http is not None:
                    _add(
                        out,
                        gw_name,
                        listener,
                        (r.name for vh in chain.http.virtual_hosts for r in vh.routes),
                    )
                elif rest:
                    out[(gw_name, f"TLSRoute/{rest}")].add(listener)
    return dict(out)


def _listeners_on(
    ports: ir.InfraGateway | None, port: ir.Port, merged_gateway: str | None
) -> list[str]:
    """The names of the Gateway's listeners on an Envoy listener (from the infrastructure IR;
    a merged class's names each listener with its Gateway, ``merged_gateway``)."""
    transport = "UDP" if port.protocol == "UDP" else "TCP"
    for p in ports.ports if ports is not None else ():
        if p.port == port.port and p.protocol == transport:
            names = p.name.split(",")
            if merged_gateway is None:
                return names
            return [n.rpartition("/")[2] for n in names if n.rpartition("/")[0] == merged_gateway]
    return []


def _add(out: Served, gateway: str, listener: str, ir_route_names: Iterable[str]) -> None:
    for name in ir_route_names:
        rid = route_id(name)
        if rid is not None:
            out[(gateway, rid)].add(listener)
