"""Listeners: HTTP (HCM over RDS), TLS (SNI filter chains), TCP (tcp_proxy), UDP (udp_proxy)."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence

from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import (
    address_pb2,
    base_pb2,
    extension_pb2,
    protocol_pb2,
    socket_option_pb2,
)
from envoy.config.listener.v3 import listener_components_pb2 as lc
from envoy.config.listener.v3 import listener_pb2, udp_listener_config_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.filters.listener.proxy_protocol.v3 import proxy_protocol_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.connection_limit.v3 import connection_limit_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import route_pb2 as udp_route_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import udp_proxy_pb2
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.http.original_ip_detection.custom_header.v3 import custom_header_pb2
from envoy.extensions.http.original_ip_detection.xff.v3 import xff_pb2
from envoy.type.v3 import http_status_pb2
from google.protobuf import wrappers_pb2
from xds.core.v3 import extension_pb2 as xds_extension_pb2
from xds.type.matcher.v3 import matcher_pb2

from gateweave import ir
from gateweave.xds import compression, extauth, responseoverride, security, telemetry, tls
from gateweave.xds.clusters import ads_source
from gateweave.xds.resources import pack, stat_name
from gateweave.xds.routes import (
    FAULT_FILTER,
    LOCAL_RATELIMIT_FILTER,
    LOCAL_RATELIMIT_STAT_PREFIX,
    SESSION_FILTER,
    duration,
)

HCM_FILTER = "envoy.filters.network.http_connection_manager"
TCP_PROXY_FILTER = "envoy.filters.network.tcp_proxy"
ROUTER_FILTER = "envoy.filters.http.router"
CORS_FILTER = "envoy.filters.http.cors"
TLS_INSPECTOR = "envoy.filters.listener.tls_inspector"
PROXY_PROTOCOL = "envoy.filters.listener.proxy_protocol"
CONNECTION_LIMIT = "envoy.filters.network.connection_limit"
UDP_PROXY_FILTER = "envoy.filters.udp_listener.udp_proxy"
EARLY_HEADER_MUTATION = "envoy.http.early_header_mutation.header_mutation"
CUSTOM_HEADER_IP = "envoy.http.original_ip_detection.custom_header"
XFF_IP = "envoy.http.original_ip_detection.xff"


def _address(address: str, port: int, udp: bool = False) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(
            address=address,
            port_value=port,
            protocol=address_pb2.SocketAddress.UDP if udp else address_pb2.SocketAddress.TCP,
        )
    )


def _listener(name: str, address: str, port: int, udp: bool = False) -> listener_pb2.Listener:
    """No SO_REUSEPORT for TCP: a second (stale) Envoy must fail to bind, not share the
    port. UDP listeners need it: Envoy refuses UDP without reuse_port when it runs
    more than one worker."""
    return listener_pb2.Listener(
        name=name,
        stat_prefix=stat_name(name),
        address=_address(address, port, udp),
        enable_reuse_port=wrappers_pb2.BoolValue(value=udp),
    )


def http_connection_manager(
    gw: ir.XdsGateway,
    listener: str,
    route_config_name: str,
    ext_auths: Sequence[ir.ExtAuth] = (),
    local_rate_limit: bool = False,
    security_filters: Sequence[hcm_pb2.HttpFilter] = (),
    compressors: Sequence[hcm_pb2.HttpFilter] = (),
    overrides: Sequence[hcm_pb2.HttpFilter] = (),
) -> hcm_pb2.HttpConnectionManager:
    """An HCM fetching its routes over RDS (ADS).

    HTTP/1.1 and h2c (prior knowledge) are both accepted (codec AUTO). Paths reach the
    backend as sent: no normalisation, no slash merging, escaped slashes untouched (unless a
    ClientTrafficPolicy's ``path`` says otherwise, :func:`apply_client_settings`).
    Host matching ignores any port (the route configurations set
    ``ignore_port_in_host_matching``), so ``example.com:8080`` matches the ``example.com``
    virtual host while the Host header reaches the backend unchanged.
    WebSocket upgrades are always allowed: routes to non-WebSocket backends just get
    a plain request. Requests are logged and traced as ``gw``'s telemetry says
    (:mod:`gateweave.xds.telemetry`). ``ext_auths``: the ExternalAuth filters its routes use, after
    CORS (a preflight needs no authorisation), each off but where a route turns it on.
    ``local_rate_limit``: some route has a rate limit (the filter, without a limit of its own,
    then limits the routes that configure one). ``security_filters``: SecurityPolicy's filters its
    routes turn on (:mod:`gateweave.xds.security`), after the ExternalAuth ones. ``compressors``:
    the compressor filters its routes turn on (:mod:`gateweave.xds.compression`), last before the
    router (so they compress the backend's answer, as the client gets it). ``overrides``: the
    custom_response filter its routes turn on (:mod:`gateweave.xds.responseoverride`), after them
    (it sees the upstream's answer first; its own answer then passes the compressors).
    """
    out = hcm_pb2.HttpConnectionManager(
        stat_prefix=stat_name(listener),
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        rds=hcm_pb2.Rds(config_source=ads_source(), route_config_name=route_config_name),
        http_filters=[
            hcm_pb2.HttpFilter(name=CORS_FILTER, typed_config=pack(cors_pb2.Cors())),
            *(extauth.http_filter(ext) for ext in ext_auths),
            *security_filters,
            hcm_pb2.HttpFilter(name=FAULT_FILTER, typed_config=pack(fault_pb2.HTTPFault())),
            hcm_pb2.HttpFilter(
                name=SESSION_FILTER,
                typed_config=pack(stateful_session_pb2.StatefulSession()),
                disabled=True,
            ),
            *compressors,
            *overrides,
            hcm_pb2.HttpFilter(name=ROUTER_FILTER, typed_config=pack(router_pb2.Router())),
        ],
        use_remote_address=wrappers_pb2.BoolValue(value=True),
        normalize_path=wrappers_pb2.BoolValue(value=False),
        merge_slashes=False,
        path_with_escaped_slashes_action=hcm_pb2.HttpConnectionManager.KEEP_UNCHANGED,
        strip_any_host_port=False,
        upgrade_configs=[hcm_pb2.HttpConnectionManager.UpgradeConfig(upgrade_type="websocket")],
        access_log=telemetry.http_access_logs(gw, listener),
    )
    tracing = telemetry.tracing(gw)
    if tracing is not None:
        out.tracing.CopyFrom(tracing)
    if local_rate_limit:
        limiter = local_rate_limit_pb2.LocalRateLimit(stat_prefix=LOCAL_RATELIMIT_STAT_PREFIX)
        out.http_filters.insert(
            len(out.http_filters) - 1,
            hcm_pb2.HttpFilter(name=LOCAL_RATELIMIT_FILTER, typed_config=pack(limiter)),
        )
    return out


# The route fields that put a filter into their listener's HTTP connection manager, each read by
# the ``http_filters`` of its module in _hcm_filter. A feature whose routes need an HCM filter
# names its field here: the filters are chosen from the routes that set one of these.
FILTER_FIELDS = (
    "ext_auth",
    "rate_limit",
    "basic_auth",
    "api_key_auth",
    "jwt",
    "authorization",
    "compression",
    "response_overrides",
)
_filter_fields = operator.attrgetter(*FILTER_FIELDS)
# Each virtual host's routes that set one of them, by the virtual host's identity: incremental
# translation hands over the same instance while it does not change, so a change rebuilding a
# listener of 10,000 routes looks at the new virtual hosts' routes only. The entry holds the
# virtual host, so its id stays its own. Bounded (least recently added go first).
_FILTER_ROUTES_SIZE = 16_384
_filter_routes_memo: OrderedDict[int, tuple[ir.VirtualHost, tuple[ir.Route, ...]]] = OrderedDict()


def filter_routes(config: ir.RouteConfig) -> list[ir.Route]:
    """The routes of ``config`` that set one of :data:`FILTER_FIELDS`, in order."""
    out: list[ir.Route] = []
    for vh in config.virtual_hosts:
        entry = _filter_routes_memo.get(id(vh))
        if entry is None or entry[0] is not vh:
            entry = (vh, tuple(r for r in vh.routes if any(_filter_fields(r))))
            _filter_routes_memo[id(vh)] = entry
            if len(_filter_routes_memo) > _FILTER_ROUTES_SIZE:
                _filter_routes_memo.popitem(last=False)
        out.extend(entry[1])
    return out


_NO_MATCH = ir.RouteMatch()


def hcm_routes(vh: ir.VirtualHost) -> tuple[ir.Route, ...]:
    """What its listener reads of the routes of ``vh``: those that set one of
    :data:`FILTER_FIELDS`, in order, each reduced to these fields (all the filters' ``http_filters``
    read). Of a route configuration a listener reads its name and these (see
    :func:`listener_view`), so a route change that turns no filter on or off leaves the listener
    as it is."""
    return tuple(
        ir.Route(name="", match=_NO_MATCH, **dict(zip(FILTER_FIELDS, fields, strict=True)))
        for fields in map(_filter_fields, vh.routes)
        if any(fields)
    )


def listener_view(name: str, routes: tuple[ir.Route, ...]) -> ir.RouteConfig:
    """A route configuration that gives its listener what ``name``'s does: the same name and
    :func:`hcm_routes` (``routes``, those of every virtual host in order) in one virtual host."""
    return ir.RouteConfig(
        name=name, virtual_hosts=(ir.VirtualHost(name="", domains=(), routes=routes),)
    )


def _hcm_filter(
    gw: ir.XdsGateway, listener: str, config: ir.RouteConfig, client: ir.ClientSettings | None
) -> lc.Filter:
    filtered = filter_routes(config)
    hcm = http_connection_manager(
        gw,
        listener,
        config.name,
        extauth.used(filtered),
        any(r.rate_limit is not None for r in filtered),
        security.http_filters(filtered),
        compression.http_filters(filtered),
        responseoverride.http_filters(filtered),
    )
    if client is not None:
        apply_client_settings(hcm, client)
    return lc.Filter(name=HCM_FILTER, typed_config=pack(hcm))


def apply_client_settings(hcm: hcm_pb2.HttpConnectionManager, client: ir.ClientSettings) -> None:
    """A ClientTrafficPolicy's effect on an HCM: the client address (remote address, which
    authorization and access logs read) is the ``xff_trusted_hops``-th X-Forwarded-For entry from
    the right, or the rightmost one outside ``xff_trusted_cidrs`` (from a peer in them), or the
    address in the ``client_ip_header`` header (a request without a valid one: the peer's, or 403
    when ``client_ip_header_fail_closed``); the peer's address is appended to X-Forwarded-For
    unless ``xff_skip_append``; a request not received whole within
    ``request_received_timeout_s`` gets 408; a connection without requests for
    ``http_idle_timeout_s`` is closed; a request header whose name has an underscore is allowed, the
    request refused (400) or the header dropped; request headers are set, added and removed before
    anything else (routing included) sees them; request paths are normalised (RFC 3986), adjacent
    slashes merged unless kept, escaped slashes handled as the policy says."""
    hcm.xff_num_trusted_hops = client.xff_trusted_hops
    if client.client_ip_header:
        hcm.original_ip_detection_extensions.append(_custom_header_detection(client))
    hcm.skip_xff_append = client.xff_skip_append
    if client.xff_trusted_cidrs:
        hcm.original_ip_detection_extensions.append(_trusted_xff(client))
    if hcm.original_ip_detection_extensions:
        # Envoy takes the extensions' address only without use_remote_address
        hcm.use_remote_address.value = False
    if client.request_received_timeout_s is not None:
        hcm.request_timeout.CopyFrom(duration(client.request_received_timeout_s))
    if client.http_idle_timeout_s is not None:
        hcm.common_http_protocol_options.idle_timeout.CopyFrom(duration(client.http_idle_timeout_s))
    if client.headers_with_underscores:
        hcm.common_http_protocol_options.headers_with_underscores_action = _UNDERSCORES[
            client.headers_with_underscores
        ]
    if client.early_request_headers is not None:
        hcm.early_header_mutation_extensions.append(_early_mutation(client.early_request_headers))
    if client.path is not None:
        hcm.normalize_path.value = True
        hcm.merge_slashes = client.path.merge_slashes
        hcm.path_with_escaped_slashes_action = _ESCAPED_SLASHES[client.path.escaped_slashes]


_ESCAPED_SLASHES = {
    "KeepUnchanged": hcm_pb2.HttpConnectionManager.KEEP_UNCHANGED,
    "RejectRequest": hcm_pb2.HttpConnectionManager.REJECT_REQUEST,
    "UnescapeAndForward": hcm_pb2.HttpConnectionManager.UNESCAPE_AND_FORWARD,
    "UnescapeAndRedirect": hcm_pb2.HttpConnectionManager.UNESCAPE_AND_REDIRECT,
}


def _custom_header_detection(client: ir.ClientSettings) -> extension_pb2.TypedExtensionConfig:
    config = custom_header_pb2.CustomHeaderConfig(header_name=client.client_ip_header)
    if client.client_ip_header_fail_closed:
        config.reject_with_status.code = http_status_pb2.Forbidden
    return extension_pb2.TypedExtensionConfig(name=CUSTOM_HEADER_IP, typed_config=pack(config))


def _trusted_xff(client: ir.ClientSettings) -> extension_pb2.TypedExtensionConfig:
    """The X-Forwarded-For detection trusting the peers in ``xff_trusted_cidrs``
    ("address/length"), the peer's address appended to the header (as use_remote_address does)
    unless ``xff_skip_append``."""
    config = xff_pb2.XffConfig(skip_xff_append=wrappers_pb2.BoolValue(value=client.xff_skip_append))
    for cidr in client.xff_trusted_cidrs:
        address, _, length = cidr.partition("/")
        config.xff_trusted_cidrs.cidrs.append(
            address_pb2.CidrRange(
                address_prefix=address, prefix_len=wrappers_pb2.UInt32Value(value=int(length))
            )
        )
    return extension_pb2.TypedExtensionConfig(name=XFF_IP, typed_config=pack(config))


def _early_mutation(mods: ir.HeaderMods) -> extension_pb2.TypedExtensionConfig:
    """The connection manager's early header mutation: ``mods`` set, added, then removed."""
    Mutation = mutation_rules_pb2.HeaderMutation
    actions = (
        (mods.set, base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD),
        (mods.add, base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD),
    )
    mutations = [
        Mutation(
            append=base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=name, value=value), append_action=action
            )
        )
        for pairs, action in actions
        for name, value in pairs
    ]
    mutations.extend(Mutation(remove=name) for name in mods.remove)
    config = header_mutation_pb2.HeaderMutation(mutations=mutations)
    return extension_pb2.TypedExtensionConfig(name=EARLY_HEADER_MUTATION, typed_config=pack(config))


_UNDERSCORES = {
    "Allow": protocol_pb2.HttpProtocolOptions.ALLOW,
    "RejectRequest": protocol_pb2.HttpProtocolOptions.REJECT_REQUEST,
    "DropHeader": protocol_pb2.HttpProtocolOptions.DROP_HEADER,
}


def _proxy_protocol(out: listener_pb2.Listener, client: ir.ClientSettings | None) -> None:
    """A ClientTrafficPolicy's PROXY protocol: the listener's first filter reads the header (v1
    or v2) and takes its source address as the connection's client address; a connection
    without one is closed unless it is optional."""
    if client is not None and client.proxy_protocol:
        config = proxy_protocol_pb2.ProxyProtocol(
            allow_requests_without_proxy_protocol=client.proxy_protocol_optional
        )
        out.listener_filters.insert(
            0, lc.ListenerFilter(name=PROXY_PROTOCOL, typed_config=pack(config))
        )


def _limited(
    filters: list[lc.Filter], name: str, client: ir.ClientSettings | None
) -> list[lc.Filter]:
    """``filters`` (a filter chain's) behind a ClientTrafficPolicy's connection limit: the chain's
    connection beyond ``max_connections`` at once is closed. A chain without filters closes
    every connection already."""
    if not filters or client is None or client.max_connections is None:
        return filters
    config = connection_limit_pb2.ConnectionLimit(stat_prefix=stat_name(name))
    config.max_connections.value = client.max_connections
    return [lc.Filter(name=CONNECTION_LIMIT, typed_config=pack(config)), *filters]


def _listener_settings(out: listener_pb2.Listener, client: ir.ClientSettings | None) -> None:
    """A ClientTrafficPolicy's effects on the whole Envoy listener: the PROXY protocol, the
    per-connection buffer limit, the connections accepted per socket event and TCP keepalive."""
    _proxy_protocol(out, client)
    if client is None:
        return
    if client.buffer_limit_bytes is not None:
        out.per_connection_buffer_limit_bytes.value = client.buffer_limit_bytes
    if client.max_accept_per_event:
        out.max_connections_to_accept_per_socket_event.value = client.max_accept_per_event
    if client.tcp_keepalive is not None:
        out.socket_options.extend(keepalive_socket_options(client.tcp_keepalive))


# Linux's SOL_SOCKET / SO_KEEPALIVE and IPPROTO_TCP / TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL
_SOL_SOCKET, _SO_KEEPALIVE = 1, 9
_SOL_TCP, _TCP_KEEPCNT, _TCP_KEEPIDLE, _TCP_KEEPINTVL = 6, 6, 4, 5


def keepalive_socket_options(keepalive: ir.TCPKeepalive) -> list[socket_option_pb2.SocketOption]:
    """TCP keepalive on the listening socket, which the clients' connections inherit, as Envoy
    Gateway writes it: SO_KEEPALIVE on, then each value set (unset: the system's), before
    bind."""
    options = [
        socket_option_pb2.SocketOption(
            description="tcp keepalive", level=_SOL_SOCKET, name=_SO_KEEPALIVE, int_value=1
        )
    ]
    for what, name, value in (
        ("probes", _TCP_KEEPCNT, keepalive.probes),
        ("idle time", _TCP_KEEPIDLE, keepalive.idle_s),
        ("interval", _TCP_KEEPINTVL, keepalive.interval_s),
    ):
        if value is not None:
            options.append(
                socket_option_pb2.SocketOption(
                    description=f"tcp keepalive {what}",
                    level=_SOL_TCP,
                    name=name,
                    int_value=value,
                    state=socket_option_pb2.SocketOption.STATE_PREBIND,
                )
            )
    return options


def tcp_proxy_filters(
    gw: ir.XdsGateway, listener: str, proxy: ir.TCPProxy, client: ir.ClientSettings | None = None
) -> list[lc.Filter]:
    """A tcp_proxy to the backends by weight; none able to take traffic: no filter,
    so Envoy closes every connection. ``client``: a ClientTrafficPolicy's effect (its TCP
    idle timeout: a connection without bytes either way for that long is closed)."""
    backends = [b for b in proxy.backends if b.weight > 0]
    if not backends:
        return []
    config = tcp_proxy_pb2.TcpProxy(
        stat_prefix=stat_name(proxy.name),
        access_log=telemetry.session_access_logs(gw, listener, proxy, "TCP"),
    )
    if client is not None and client.tcp_idle_timeout_s is not None:
        config.idle_timeout.CopyFrom(duration(client.tcp_idle_timeout_s))
    if len(backends) == 1:
        config.cluster = backends[0].cluster
    else:
        config.weighted_clusters.clusters.extend(
            tcp_proxy_pb2.TcpProxy.WeightedCluster.ClusterWeight(name=b.cluster, weight=b.weight)
            for b in backends
        )
    return [lc.Filter(name=TCP_PROXY_FILTER, typed_config=pack(config))]


def http_listener(gw: ir.XdsGateway, port: ir.Port) -> listener_pb2.Listener:
    if port.http is None:
        raise ValueError(f"HTTP port {port.name} has no route config")
    out = _listener(port.name, port.address or gw.address, port.port)
    out.filter_chains.append(
        lc.FilterChain(
            name=port.name,
            filters=_limited(
                [_hcm_filter(gw, port.name, port.http, port.client)], port.name, port.client
            ),
        )
    )
    _listener_settings(out, port.client)
    return out


def _tls_filter_chain(gw: ir.XdsGateway, chain: ir.FilterChain) -> lc.FilterChain:
    out = lc.FilterChain(
        name=chain.name,
        filter_chain_match=lc.FilterChainMatch(
            server_names=list(chain.server_names), transport_protocol="tls"
        ),
    )
    if chain.http is not None:
        if chain.tls is None:
            raise ValueError(f"filter chain {chain.name}: HTTP needs TLS termination")
        out.transport_socket.CopyFrom(tls.downstream_socket(chain.tls, tls.HTTP_ALPN, chain.client))
        out.filters.extend(
            _limited(
                [_hcm_filter(gw, chain.name, chain.http, chain.client)], chain.name, chain.client
            )
        )
    elif chain.tcp is not None:
        if chain.tls is not None:
            out.transport_socket.CopyFrom(tls.downstream_socket(chain.tls, (), chain.client))
        out.filters.extend(
            _limited(
                tcp_proxy_filters(gw, chain.name, chain.tcp, chain.client), chain.name, chain.client
            )
        )
    else:
        raise ValueError(f"filter chain {chain.name} has neither http nor tcp")
    return out


def tls_listener(gw: ir.XdsGateway, port: ir.Port) -> listener_pb2.Listener:
    """One listener, a filter chain per SNI set (empty: any SNI)."""
    out = _listener(port.name, port.address or gw.address, port.port)
    out.listener_filters.append(
        lc.ListenerFilter(name=TLS_INSPECTOR, typed_config=pack(tls_inspector_pb2.TlsInspector()))
    )
    out.filter_chains.extend(_tls_filter_chain(gw, chain) for chain in port.filter_chains)
    if not out.filter_chains:
        # No route attached yet: Envoy refuses a listener without filter chains, so the
        # port gets one without filters, which closes every connection.
        out.filter_chains.append(lc.FilterChain(name=port.name))
    _listener_settings(out, port.client)
    return out


def tcp_listener(gw: ir.XdsGateway, port: ir.Port) -> listener_pb2.Listener:
    if port.tcp is None:
        raise ValueError(f"TCP port {port.name} has no proxy")
    out = _listener(port.name, port.address or gw.address, port.port)
    filters = _limited(
        tcp_proxy_filters(gw, port.name, port.tcp, port.client), port.name, port.client
    )
    out.filter_chains.append(lc.FilterChain(name=port.name, filters=filters))
    _listener_settings(out, port.client)
    return out


def udp_listener(gw: ir.XdsGateway, port: ir.Port, cluster: str) -> listener_pb2.Listener:
    """A UDP listener whose udp_proxy sends every datagram session to ``cluster``."""
    if port.udp is None:
        raise ValueError(f"UDP port {port.name} has no proxy")
    out = _listener(port.name, port.address or gw.address, port.port, udp=True)
    out.udp_listener_config.CopyFrom(udp_listener_config_pb2.UdpListenerConfig())
    action = xds_extension_pb2.TypedExtensionConfig(
        name="route", typed_config=pack(udp_route_pb2.Route(cluster=cluster))
    )
    config = udp_proxy_pb2.UdpProxyConfig(
        stat_prefix=stat_name(port.udp.name),
        matcher=matcher_pb2.Matcher(on_no_match=matcher_pb2.Matcher.OnMatch(action=action)),
        access_log=telemetry.session_access_logs(gw, port.name, port.udp, "UDP"),
    )
    out.listener_filters.append(lc.ListenerFilter(name=UDP_PROXY_FILTER, typed_config=pack(config)))
    return out
