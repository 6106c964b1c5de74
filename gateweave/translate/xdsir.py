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

Within a virtual host, routes follow Gateway API precedence (the keys httproute/grpcroute build).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import msgspec

from gateweave import ir
from gateweave.translate.attachment import Attachment
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx
from gateweave.translate.hostnames import (
    Selectors,
    first_selecting,
    only_name,
    selectors,
    specificity,
)

HTTP_KINDS = ("HTTPRoute", "GRPCRoute")
_UNKNOWN = object()  # a domain whose owner is not looked up yet (owner() may return None)
_FAMILY = {"HTTP": "HTTP", "HTTPS": "TLS", "TLS": "TLS", "TCP": "TCP", "UDP": "UDP"}


def build_xds(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.XdsGateway]:
    out: dict[str, ir.XdsGateway] = {}
    for gw in sorted(gateways, key=lambda g: g.key):
        if gw.serving:
            out[gw.name] = _gateway(gw)
    return out


PortPlan = tuple[
    int, bool, str, str, list[ListenerCtx]
]  # (port, udp, family, Envoy listener name, listeners)


def port_plan(gw: GatewayCtx) -> list[PortPlan]:
    """The Gateway's Envoy listeners: one per (port, transport), UDP listeners may share a port
    number with TCP ones; each with its ready listeners of one family, most specific first."""
    by_port: dict[tuple[int, bool], list[ListenerCtx]] = defaultdict(list)
    for lc in gw.all_listeners():
        if lc.ready and lc.protocol in _FAMILY:
            by_port[(lc.port, lc.protocol == "UDP")].append(lc)
    plan: list[PortPlan] = []
    for port, udp in sorted(by_port):
        lcs = by_port[(port, udp)]
        family = _FAMILY[lcs[0].protocol]
        lcs = sorted(
            (lc for lc in lcs if _FAMILY[lc.protocol] == family),
            key=lambda lc: specificity(lc.hostname),
        )
        name = f"{gw.name}/{port}/udp" if udp else f"{gw.name}/{port}"
        plan.append((port, udp, family, name, lcs))
    return plan


def _gateway(gw: GatewayCtx) -> ir.XdsGateway:
    ports: list[ir.Port] = []
    used: set[str] = set()
    for port, _, family, name, lcs in port_plan(gw):
        if family == "HTTP":
            ports.append(
                ir.Port(
                    name=name,
                    port=port,
                    protocol="HTTP",
                    address=gw.address,
                    http=_route_config(name, lcs, used=used),
                    client=port_client(lcs),
                )
            )
        else:
            l4 = l4_port(
                name, port, gw.address, family, lcs, functools.partial(_https_config, used=used)
            )
            used |= proxy_clusters(l4)
            ports.append(l4)
    known: dict[str, ir.Cluster] = {}
    seen: set[int] = set()
    for lc in gw.all_listeners():
        for att in lc.routes:
            tr = att.translation
            tr_id = id(tr)
            if tr_id not in seen:
                seen.add(tr_id)
                for cl in tr.clusters:
                    known[cl.name] = cl
            if att.effect_clusters:  # a policy's own upstreams (an auth service)
                known.update(att.effect_clusters)
                used.update(att.effect_clusters)

    derived = policy_clusters(ports, known)
    known.update(derived)
    used |= derived.keys()
    return ir.XdsGateway(
        name=gw.name,
        address=gw.address,
        ports=tuple(ports),
        clusters=gateway_clusters(gw, used, known),
        telemetry=gw.telemetry,
    )


# An HTTPS listener's RouteConfig on its filter chain: (chain name, listener, HTTPS peers) ->
# config.
HttpsConfig = Callable[[str, ListenerCtx, list[ListenerCtx]], ir.RouteConfig]


def l4_port(
    name: str,
    port: int,
    address: str,
    family: str,
    lcs: list[ListenerCtx],
    https_config: HttpsConfig,
) -> ir.Port:
    """A TLS, TCP or UDP Envoy listener (``family`` from :func:`port_plan`) on ``address``."""
    if family == "TLS":
        return ir.Port(
            name=name,
            port=port,
            protocol="TLS",
            address=address,
            filter_chains=_filter_chains(name, lcs, https_config),
            client=port_client(lcs),
        )
    if family == "TCP":
        return ir.Port(
            name=name,
            port=port,
            protocol="TCP",
            address=address,
            tcp=_l4_proxy(name, lcs, "TCPRoute"),
            client=port_client(lcs),
        )
    return ir.Port(
        name=name, port=port, protocol="UDP", address=address, udp=_l4_proxy(name, lcs, "UDPRoute")
    )


def _route_config(
    name: str, lcs: list[ListenerCtx], peers: list[ListenerCtx] | None = None, *, used: set[str]
) -> ir.RouteConfig:
    """Virtual hosts of the HTTP listeners ``lcs`` (most specific first) that share one port or
    filter chain.

    ``peers`` (HTTPS): every listener that has a filter chain on the port, most specific first,
    ``lcs`` being the one whose chain this is; a domain belongs to the most specific of them.
    Adds the names of the clusters its routes send to to ``used``.
    """
    owners = owner_facts(lcs if peers is None else peers)
    per_domain: dict[str, list[Attachment]] = {}
    owner_of: dict[str, ListenerCtx | None] = {}
    for lc in lcs:
        for att in lc.routes:
            tr = att.translation
            if tr.kind not in HTTP_KINDS:
                continue
            for domain in att.hostnames or ("*",):
                own: object = owner_of.get(domain, _UNKNOWN)
                if own is _UNKNOWN:
                    own = owner_of[domain] = first_selecting(owners, domain)  # owner_in's work
                if own is lc:
                    atts = per_domain.get(domain)
                    if atts is None:
                        per_domain[domain] = [att]
                    else:
                        atts.append(att)
                    used.update(tr.http_clusters)
    if peers is None:
        vhosts = [virtual_host(name, domain, per_domain[domain]) for domain in sorted(per_domain)]
    else:
        # (the extra domains are none of the routes': one sort of the domains orders both)
        extras = misdirected(name, lcs[0], peers, per_domain.__contains__)
        vhosts = [
            virtual_host(name, domain, per_domain[domain])
            if domain in per_domain
            else extras[domain]
            for domain in sorted([*per_domain, *extras])
        ]
    return ir.RouteConfig(name=name, virtual_hosts=tuple(vhosts))


def _https_config(
    name: str, lc: ListenerCtx, peers: list[ListenerCtx], *, used: set[str]
) -> ir.RouteConfig:
    return _route_config(name, [lc], peers, used=used)


def virtual_host(name: str, domain: str, atts: list[Attachment]) -> ir.VirtualHost:
    """The virtual host of ``domain`` from the attachments that serve it on its owning listener
    (in the listener's route order): their routes in precedence order, each once."""
    if len(atts) == 1:
        routes: tuple[ir.Route, ...] = atts[0].translation.sorted_http
        effects = atts[0].effects
        if effects:
            routes = tuple([effects.get(r.name, r) for r in routes])
    else:
        seen: set[str] = set()
        out = []
        for key in sorted(key for att in atts for key in att.translation.precedence_keys()):
            r = key[-1]
            if r.name not in seen:
                seen.add(r.name)
                out.append(r)
        routes = tuple(out)
        if any(att.effects for att in atts):
            changed = {name: r for att in atts for name, r in (att.effects or {}).items()}
            routes = tuple([changed.get(r.name, r) for r in routes])
    # (a route's own one-hostname tuple when it is the domain: shared, not a tuple per host;
    # annotated, and only_name rather than a len() test: mypyc would keep a one-item tuple
    # unboxed and make a new one from it)
    hosts = atts[0].hostnames
    domains: tuple[str, ...] = (
        hosts if hosts is not None and only_name(hosts) == domain else (domain,)
    )
    return ir.VirtualHost(name=f"{name}/{domain}", domains=domains, routes=routes)


def misdirected(
    name: str, lc: ListenerCtx, peers: list[ListenerCtx], taken: Callable[[str], bool]
) -> dict[str, ir.VirtualHost]:
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
    listener accepts any hostname (else nothing matches: 404). ``taken(domain)``: the
    domain has a virtual host with routes already. The extra virtual hosts, by domain.
    """
    extra: dict[str, ir.VirtualHost] = {}

    def add(domain: str, status: int | None) -> None:
        if domain in extra or taken(domain):
            return
        routes: tuple[ir.Route, ...] = ()
        if status is not None:
            match = ir.RouteMatch(path_type="PathPrefix", path="/")
            routes = (
                ir.Route(name=f"{name}/misdirected/{domain}", match=match, direct_status=status),
            )
        extra[domain] = ir.VirtualHost(name=f"{name}/{domain}", domains=(domain,), routes=routes)

    if lc.hostname is not None:
        add(lc.hostname, None)
    for other in peers:
        if other is lc:
            continue
        if other.hostname is not None:
            add(other.hostname, 421)
        elif lc.hostname is not None:
            add("*", 421)
    return extra


def owner(lcs: list[ListenerCtx], domain: str) -> ListenerCtx | None:
    """The most specific listener (``lcs`` is sorted that way) that selects requests for
    ``domain``.
    """
    return owner_in(owner_facts(lcs), domain)


OwnerFacts = Selectors[ListenerCtx]


def owner_facts(lcs: list[ListenerCtx]) -> OwnerFacts:
    """What :func:`owner_in` reads of listeners sorted most specific first."""
    return selectors([(lc, lc.hostname) for lc in lcs])


def owner_in(facts: OwnerFacts, domain: str) -> ListenerCtx | None:
    """:func:`owner` over :func:`owner_facts`."""
    return first_selecting(facts, domain)


def _filter_chains(
    name: str, lcs: list[ListenerCtx], https_config: HttpsConfig
) -> tuple[ir.FilterChain, ...]:
    chains: list[ir.FilterChain | ListenerCtx] = []  # an HTTPS listener: its chain, built last
    claimed: set[str | None] = set()
    for lc in lcs:
        if lc.protocol == "HTTPS":
            if lc.tls is None or lc.hostname in claimed:
                continue
            claimed.add(lc.hostname)
            chains.append(lc)
            continue
        terminate = lc.terminates_tls
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
                    tcp=ir.TCPProxy(
                        name=cname,
                        backends=att.translation.tcp_terminated
                        if terminate
                        else att.translation.tcp,
                        route=_route_id(att),
                    ),
                    client=lc.client,
                )
            )
    https = [ch for ch in chains if isinstance(ch, ListenerCtx)]
    return tuple(
        ch if isinstance(ch, ir.FilterChain) else https_chain(name, ch, https, https_config)
        for ch in chains
    )


def https_chain(
    name: str, lc: ListenerCtx, peers: list[ListenerCtx], https_config: HttpsConfig
) -> ir.FilterChain:
    """The filter chain of HTTPS listener ``lc``; ``peers``: the port's HTTPS listeners with a
    chain.
    """
    cname = f"{name}/{lc.name}"
    return ir.FilterChain(
        name=cname,
        server_names=(lc.hostname,) if lc.hostname else (),
        tls=lc.tls,
        http=https_config(cname, lc, peers),
        client=lc.client,
    )


def port_client(lcs: list[ListenerCtx]) -> ir.ClientSettings | None:
    """The client settings of a port (one Envoy listener, and for HTTP one connection manager,
    for its listeners, most specific first): those of the most specific listener a
    ClientTrafficPolicy governs."""
    return next((lc.client for lc in lcs if lc.client is not None), None)


def _l4_proxy(name: str, lcs: list[ListenerCtx], kind: str) -> ir.TCPProxy:
    """The oldest route attached to the port's listener wins (routes are attached oldest first)."""
    for lc in lcs:
        for att in lc.routes:
            if isinstance(att, Attachment) and att.kind == kind:
                return ir.TCPProxy(name=name, backends=att.translation.tcp, route=_route_id(att))
    return ir.TCPProxy(name=name)


def _route_id(att: Attachment) -> str:
    """``<kind>/<ns>/<name>``: the route's name in access logs and metrics."""
    return f"{att.kind}/{att.route.metadata.namespace}/{att.route.metadata.name}"


def proxy_clusters(port: ir.Port) -> set[str]:
    """Names of the clusters a port's TCP/UDP proxies (its own or its filter chains') send to."""
    used: set[str] = set()
    for px in [port.tcp, port.udp] + [fc.tcp for fc in port.filter_chains]:
        if px is not None:
            used.update(w.cluster for w in px.backends)
    return used


def policy_clusters(
    ports: Iterable[ir.Port], known: Mapping[str, ir.Cluster]
) -> dict[str, ir.Cluster]:
    """The copies of clusters with a BackendTrafficPolicy's settings that the ports' HTTP routes
    send to (:func:`ir.policy_cluster`), by name."""
    out: dict[str, ir.Cluster] = {}
    for port in ports:
        for config in [port.http] + [fc.http for fc in port.filter_chains]:
            for vh in config.virtual_hosts if config is not None else ():
                for r in vh.routes:
                    policy = r.cluster_policy
                    if policy is None:
                        continue
                    for b in r.backends:
                        base = known.get(b.cluster)
                        if base is not None:
                            name = ir.policy_cluster(base.name, policy)
                            out[name] = msgspec.structs.replace(base, name=name, policy=policy)
    return out


def atts_clusters(atts: Iterable[Attachment]) -> set[str]:
    """Names of the clusters the routes of these attachments send to."""
    used: set[str] = set()
    for att in atts:
        used.update(att.translation.http_clusters)
    return used


def gateway_clusters(
    gw: GatewayCtx, used: Iterable[str], known: Mapping[str, ir.Cluster]
) -> tuple[ir.Cluster, ...]:
    """Every cluster of ``used`` that routes defined (``known``), once, sorted by name; upstream
    TLS gets the Gateway's client certificate."""
    cert = gw.backend_client_cert
    out = []
    for cname in sorted(used):
        cl = known.get(cname)
        if cl is None:
            continue
        if cl.tls is not None and cert is not None:
            cl = with_client_cert(cl, cert)
        out.append(cl)
    return tuple(out)


def with_client_cert(cl: ir.Cluster, cert: ir.Certificate) -> ir.Cluster:
    """``cl`` presenting the Gateway's client certificate, unless it has its own (a Backend's)."""
    assert cl.tls is not None
    if cl.tls.client_cert_pem:
        return cl
    tls = msgspec.structs.replace(
        cl.tls, client_cert_pem=cert.cert_pem, client_key_pem=cert.key_pem
    )
    return msgspec.structs.replace(cl, tls=tls)
