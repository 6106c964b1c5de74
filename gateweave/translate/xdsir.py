"""Assembly of the xDS IR per Gateway from resolved listeners and attached routes.

One :class:`~gateweave.ir.XdsGateway` per accepted Gateway that has an address. Its ready
listeners are grouped by port:

* HTTP listeners -> one ``Port(protocol="HTTP")`` whose RouteConfig has one virtual host per
  domain. A domain belongs to the most specific listener on the port whose hostname matches
  it (exact, then longer wildcards, then no hostname): a request is handled by the listener
  it selects, so a broader listener's routes never serve a host a narrower listener owns.
* HTTPS and TLS listeners -> ``Port(protocol="TLS")`` with filter chains selected by SNI:
  one per HTTPS listener (termination + its own RouteConfig), one per TLSRoute on a TLS
  listener (passthrough, or termination + TCP proxy) for the route's hostnames. A server name
  is claimed once per port, most specific listener first, then oldest route.
* TCP / UDP listeners -> a proxy to the oldest attached route's backends (none: reject).

Within a virtual host, routes follow Gateway API precedence (see ``http_precedence``).
"""

from __future__ import annotations

from collections import defaultdict

import msgspec

from gateweave import ir
from gateweave.translate.attachment import Attachment, PrecedenceKey
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx
from gateweave.translate.hostnames import matches, specificity

_HTTP_KINDS = ("HTTPRoute", "GRPCRoute")
_FAMILY = {"HTTP": "HTTP", "HTTPS": "TLS", "TLS": "TLS", "TCP": "TCP", "UDP": "UDP"}


def build_xds(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.XdsGateway]:
    out: dict[str, ir.XdsGateway] = {}
    for gw in sorted(gateways, key=lambda g: g.key):
        if gw.serving:
            out[gw.name] = _gateway(gw)
    return out


def _gateway(gw: GatewayCtx) -> ir.XdsGateway:
    # One Envoy listener per (port, transport): UDP listeners may share a port number with TCP ones.
    by_port: dict[tuple[int, bool], list[ListenerCtx]] = defaultdict(list)
    for lc in gw.all_listeners():
        if lc.ready and lc.protocol in _FAMILY:
            by_port[(lc.port, lc.protocol == "UDP")].append(lc)
    ports: list[ir.Port] = []
    for port, udp in sorted(by_port):
        lcs = by_port[(port, udp)]
        family = _FAMILY[lcs[0].protocol]
        lcs = sorted((lc for lc in lcs if _FAMILY[lc.protocol] == family), key=lambda lc: specificity(lc.hostname))
        name = f"{gw.name}/{port}/udp" if udp else f"{gw.name}/{port}"
        if family == "HTTP":
            ports.append(ir.Port(name=name, port=port, protocol="HTTP", http=_route_config(name, lcs)))
        elif family == "TLS":
            ports.append(ir.Port(name=name, port=port, protocol="TLS", filter_chains=_filter_chains(name, lcs)))
        elif family == "TCP":
            ports.append(ir.Port(name=name, port=port, protocol="TCP", tcp=_l4_proxy(name, lcs, "TCPRoute")))
        else:
            ports.append(ir.Port(name=name, port=port, protocol="UDP", udp=_l4_proxy(name, lcs, "UDPRoute")))
    return ir.XdsGateway(name=gw.name, address=gw.address, ports=tuple(ports), clusters=_clusters(gw, ports))


def _route_config(name: str, lcs: list[ListenerCtx], peers: list[ListenerCtx] | None = None) -> ir.RouteConfig:
    """Virtual hosts of the HTTP listeners ``lcs`` (most specific first) that share one port or filter chain.

    ``peers`` (HTTPS): every listener that has a filter chain on the port, most specific first,
    ``lcs`` being the one whose chain this is; a domain belongs to the most specific of them.
    """
    owners = lcs if peers is None else peers
    per_domain: dict[str, list[tuple[PrecedenceKey, ir.Route]]] = {}
    for lc in lcs:
        for att in lc.routes:
            if not isinstance(att, Attachment) or att.kind not in _HTTP_KINDS:
                continue
            for domain in att.hostnames or ("*",):
                if _owner(owners, domain) is not lc:
                    continue
                per_domain.setdefault(domain, []).extend(att.translation.http)
    vhosts = []
    for domain in sorted(per_domain):
        entries = sorted(per_domain[domain], key=lambda kr: kr[0])
        seen: set[str] = set()
        routes = []
        for _, r in entries:
            if r.name not in seen:
                seen.add(r.name)
                routes.append(r)
        vhosts.append(ir.VirtualHost(name=f"{name}/{domain}", domains=(domain,), routes=tuple(routes)))
    if peers is not None:
        vhosts = _misdirected(name, lcs[0], peers, vhosts)
    return ir.RouteConfig(name=name, virtual_hosts=tuple(vhosts))


def _misdirected(
    name: str, lc: ListenerCtx, peers: list[ListenerCtx], vhosts: list[ir.VirtualHost]
) -> list[ir.VirtualHost]:
    """Detection of misdirected requests on the filter chain of HTTPS listener ``lc``.

    The chain was selected by the TLS SNI; the Host (HTTP/2 :authority) may name another
    listener's hostname, e.g. when a client reuses a connection for another origin. Gateway
    API (Listener.hostname): when another listener of the port has an exact or more specific
    entry for the Host, or the chain's listener does not match it while another one does,
    answer 421 Misdirected Request; when no listener matches it, 404.

    Envoy picks the most specific domain (exact, then the longest ``*.`` suffix, then ``*``),
    as listeners are ranked, so it is enough to add: a 421 virtual host for each other
    listener's hostname; the chain listener's own hostname, routeless (404), where no route
    covers it already; and, for a listener with a hostname, a 421 catch-all ``*`` when another
    listener accepts any hostname (else nothing matches: 404).
    """
    taken = {d for vh in vhosts for d in vh.domains}
    extra: list[ir.VirtualHost] = []

    def add(domain: str, status: int | None) -> None:
        if domain in taken:
            return
        taken.add(domain)
        routes: tuple[ir.Route, ...] = ()
        if status is not None:
            match = ir.RouteMatch(path_type="PathPrefix", path="/")
            routes = (ir.Route(name=f"{name}/misdirected/{domain}", match=match, direct_status=status),)
        extra.append(ir.VirtualHost(name=f"{name}/{domain}", domains=(domain,), routes=routes))

    if lc.hostname is not None:
        add(lc.hostname, None)
    for other in peers:
        if other is lc:
            continue
        if other.hostname is not None:
            add(other.hostname, 421)
        elif lc.hostname is not None:
            add("*", 421)
    return sorted(vhosts + extra, key=lambda vh: vh.domains[0])


def _owner(lcs: list[ListenerCtx], domain: str) -> ListenerCtx | None:
    """The most specific listener (``lcs`` is sorted that way) that selects requests for ``domain``."""
    if domain == "*":
        return next((o for o in lcs if o.hostname is None), None)
    return next((o for o in lcs if matches(o.hostname, domain)), None)


def _filter_chains(name: str, lcs: list[ListenerCtx]) -> tuple[ir.FilterChain, ...]:
    chains: list[ir.FilterChain | ListenerCtx] = []  # an HTTPS listener: its chain, built last
    claimed: set[str | None] = set()
    for lc in lcs:
        if lc.protocol == "HTTPS":
            if lc.tls is None or lc.hostname in claimed:
                continue
            claimed.add(lc.hostname)
            chains.append(lc)
            continue
        terminate = lc.listener.tls is not None and lc.listener.tls.mode == "Terminate"
        if terminate and lc.tls is None:
            continue
        for att in lc.routes:
            if not isinstance(att, Attachment) or att.kind != "TLSRoute":
                continue
            hosts: list[str | None] = list(att.hostnames) if att.hostnames is not None else [None]
            mine = [h for h in hosts if h not in claimed]
            if not mine:
                continue
            claimed.update(mine)
            route = att.route
            cname = f"{name}/{lc.name}/{route.metadata.namespace}/{route.metadata.name}"
            chains.append(
                ir.FilterChain(
                    name=cname,
                    server_names=tuple(h for h in mine if h is not None),
                    tls=lc.tls if terminate else None,
                    tcp=ir.TCPProxy(name=cname, backends=att.translation.tcp_terminated if terminate else att.translation.tcp),
                )
            )
    https = [ch for ch in chains if isinstance(ch, ListenerCtx)]
    return tuple(ch if isinstance(ch, ir.FilterChain) else _https_chain(name, ch, https) for ch in chains)


def _https_chain(name: str, lc: ListenerCtx, peers: list[ListenerCtx]) -> ir.FilterChain:
    """The filter chain of HTTPS listener ``lc``; ``peers``: the port's HTTPS listeners with a chain."""
    cname = f"{name}/{lc.name}"
    return ir.FilterChain(
        name=cname,
        server_names=(lc.hostname,) if lc.hostname else (),
        tls=lc.tls,
        http=_route_config(cname, [lc], peers),
    )


def _l4_proxy(name: str, lcs: list[ListenerCtx], kind: str) -> ir.TCPProxy:
    """The oldest route attached to the port's listener wins (routes are attached oldest first)."""
    for lc in lcs:
        for att in lc.routes:
            if isinstance(att, Attachment) and att.kind == kind:
                return ir.TCPProxy(name=name, backends=att.translation.tcp)
    return ir.TCPProxy(name=name)


def _clusters(gw: GatewayCtx, ports: list[ir.Port]) -> tuple[ir.Cluster, ...]:
    """Every cluster the ports refer to, once, sorted by name; upstream TLS gets the Gateway's client certificate."""
    known: dict[str, ir.Cluster] = {}
    for lc in gw.all_listeners():
        for att in lc.routes:
            if isinstance(att, Attachment):
                known.update(att.translation.clusters)
    used: set[str] = set()
    for port in ports:
        configs = [port.http] + [fc.http for fc in port.filter_chains]
        proxies = [port.tcp, port.udp] + [fc.tcp for fc in port.filter_chains]
        for rc in configs:
            if rc is None:
                continue
            for vh in rc.virtual_hosts:
                for r in vh.routes:
                    used.update(w.cluster for w in r.backends)
                    used.update(mi.cluster for mi in r.mirrors)
        for px in proxies:
            if px is not None:
                used.update(w.cluster for w in px.backends)
    cert = gw.backend_client_cert
    out = []
    for cname in sorted(used):
        cl = known.get(cname)
        if cl is None:
            continue
        if cl.tls is not None and cert is not None:
            tls = msgspec.structs.replace(cl.tls, client_cert_pem=cert.cert_pem, client_key_pem=cert.key_pem)
            cl = msgspec.structs.replace(cl, tls=tls)
        out.append(cl)
    return tuple(out)
