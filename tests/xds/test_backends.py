"""Clusters of backends by name and by socket: DNS clusters (host names, resolved by Envoy with
getaddrinfo), unix-socket and IP endpoints, and upstream TLS without a fixed SNI or without
verification - in the full build, the incremental build and ``envoy --mode validate``."""

from __future__ import annotations

import msgspec
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.network.dns_resolver.getaddrinfo.v3 import getaddrinfo_dns_resolver_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2

from gateweave import ir
from gateweave.xds import clusters
from gateweave.xds.build import build
from gateweave.xds.incremental import GatewaySnapshots
from gateweave.xds.snapshot_cache import CLUSTER, ENDPOINT, make_snapshot
from gateweave.xds.validate import validate_with_envoy

replace = msgspec.structs.replace

DNS = ir.Cluster(
    name="default/ext/80/http1",
    endpoints=(
        ir.Endpoint(address="a.example.internal", port=8080, type=ir.ENDPOINT_FQDN),
        ir.Endpoint(address="b.example.internal", port=8081, type=ir.ENDPOINT_FQDN),
    ),
)
MIXED_SLICES = (
    ir.Cluster(  # an FQDN slice beside an IP one: Envoy resolves the IP literal to itself
        name="default/mixed/80/http1",
        endpoints=(
            ir.Endpoint(address="10.0.0.7", port=80),
            ir.Endpoint(address="c.example.internal", port=80, type=ir.ENDPOINT_FQDN),
        ),
    )
)
SOCKETS = ir.Cluster(
    name="default/sock/Backend/http1",
    endpoints=(
        ir.Endpoint(address="10.0.0.1", port=3000, hostname="one.internal"),
        ir.Endpoint(address="/run/app/app.sock", port=0, type=ir.ENDPOINT_UNIX),
    ),
)


def gateway(*cls: ir.Cluster, udp: tuple[ir.WeightedCluster, ...] = ()) -> ir.XdsGateway:
    wanted = cls if not udp else tuple(c for c in cls if c.protocol == "UDP")
    routes = tuple(
        ir.Route(
            name=f"r{i}",
            match=ir.RouteMatch(path=f"/{i}"),
            backends=(ir.WeightedCluster(cluster=c.name, weight=1),),
        )
        for i, c in enumerate(cls)
        if c.protocol != "UDP"
    )
    ports = [
        ir.Port(
            name="default/gw/80",
            port=80,
            protocol="HTTP",
            http=ir.RouteConfig(
                name="default/gw/80",
                virtual_hosts=(ir.VirtualHost(name="any", domains=("*",), routes=routes),),
            ),
        )
    ]
    if udp:
        ports.append(
            ir.Port(
                name="default/gw/53",
                port=53,
                protocol="UDP",
                udp=ir.TCPProxy(name="default/gw/53", backends=udp),
            )
        )
    return ir.XdsGateway(
        name="default/gw",
        address="127.0.0.1",
        ports=tuple(ports),
        clusters=tuple(sorted(set(cls) | set(wanted), key=lambda c: c.name)),
    )


def test_a_cluster_with_host_names_is_strict_dns_resolved_by_getaddrinfo_without_a_cla() -> None:
    assert DNS.dns and MIXED_SLICES.dns and not SOCKETS.dns
    built = build(gateway(DNS, SOCKETS))
    c = built.clusters[DNS.name]
    assert c.type == cluster_pb2.Cluster.STRICT_DNS
    assert c.typed_dns_resolver_config.name == "envoy.network.dns_resolver.getaddrinfo"
    assert c.typed_dns_resolver_config.typed_config.Is(
        getaddrinfo_dns_resolver_pb2.GetAddrInfoDnsResolverConfig.DESCRIPTOR
    )
    assert c.respect_dns_ttl and c.dns_refresh_rate.seconds == clusters.DNS_REFRESH_S
    assert c.dns_failure_refresh_rate.base_interval.seconds == 1
    hosts = [
        (e.endpoint.address.socket_address.address, e.endpoint.address.socket_address.port_value)
        for e in c.load_assignment.endpoints[0].lb_endpoints
    ]
    assert hosts == [("a.example.internal", 8080), ("b.example.internal", 8081)]
    assert DNS.name not in built.endpoints  # nothing to send over EDS
    # the socket cluster is EDS: a socket address with its hostname, and a pipe
    assert built.clusters[SOCKETS.name].type == cluster_pb2.Cluster.EDS
    eps = [e.endpoint for e in built.endpoints[SOCKETS.name].endpoints[0].lb_endpoints]
    assert eps[0].address.socket_address.address == "10.0.0.1" and eps[0].hostname == "one.internal"
    assert eps[1].address.pipe.path == "/run/app/app.sock" and not eps[1].address.HasField(
        "socket_address"
    )


def test_envoy_accepts_dns_socket_and_tls_clusters() -> None:
    tls_auto = replace(
        DNS, name="default/tls-auto/Backend/http1", tls=ir.UpstreamTLS(sni="", ca_pem="")
    )
    tls_insecure = replace(
        SOCKETS,
        name="default/tls-insecure/Backend/h2c",
        protocol="HTTP2",
        tls=ir.UpstreamTLS(sni="x.internal", insecure_skip_verify=True),
    )
    udp_a = ir.Cluster(name="default/dns-a/53/udp", protocol="UDP", endpoints=DNS.endpoints[:1])
    udp_b = ir.Cluster(
        name="default/ip-b/53/udp",
        protocol="UDP",
        endpoints=(ir.Endpoint(address="10.0.0.9", port=53),),
    )
    weighted = (
        ir.WeightedCluster(cluster=udp_a.name, weight=3),
        ir.WeightedCluster(cluster=udp_b.name, weight=1),
    )
    gw = gateway(DNS, MIXED_SLICES, SOCKETS, tls_auto, tls_insecure, udp_a, udp_b, udp=weighted)
    ok, message = validate_with_envoy(build(gw))
    assert ok, message


def test_tls_without_sni_takes_the_host_header_and_insecure_verifies_nothing() -> None:
    auto = replace(DNS, tls=ir.UpstreamTLS(sni="", ca_pem=""))
    c = clusters.cluster(auto)
    opts = http_protocol_options_pb2.HttpProtocolOptions()
    c.typed_extension_protocol_options[clusters.HTTP_PROTOCOL_OPTIONS].Unpack(opts)
    assert (
        opts.upstream_http_protocol_options.auto_sni
        and opts.upstream_http_protocol_options.auto_san_validation
    )
    assert opts.explicit_http_config.HasField("http_protocol_options")  # still HTTP/1.1
    ctx = tls_pb2.UpstreamTlsContext()
    c.transport_socket.typed_config.Unpack(ctx)
    assert (
        ctx.sni == ""
        and not ctx.common_tls_context.validation_context.match_typed_subject_alt_names
    )
    assert ctx.common_tls_context.validation_context.HasField("trusted_ca")

    insecure = clusters.cluster(replace(DNS, tls=ir.UpstreamTLS(sni="", insecure_skip_verify=True)))
    insecure.typed_extension_protocol_options[clusters.HTTP_PROTOCOL_OPTIONS].Unpack(opts)
    assert (
        opts.upstream_http_protocol_options.auto_sni
        and not opts.upstream_http_protocol_options.auto_san_validation
    )
    insecure.transport_socket.typed_config.Unpack(ctx)
    assert not ctx.common_tls_context.HasField("validation_context")

    fixed = clusters.cluster(replace(DNS, tls=ir.UpstreamTLS(sni="api.internal")))
    assert clusters.HTTP_PROTOCOL_OPTIONS not in fixed.typed_extension_protocol_options
    fixed.transport_socket.typed_config.Unpack(ctx)
    assert ctx.sni == "api.internal"
    assert [
        m.matcher.exact
        for m in ctx.common_tls_context.validation_context.match_typed_subject_alt_names
    ] == ["api.internal"]


def test_a_udp_weighted_cluster_over_a_dns_backend_resolves_too() -> None:
    udp_a = ir.Cluster(name="default/dns-a/53/udp", protocol="UDP", endpoints=DNS.endpoints[:1])
    udp_b = ir.Cluster(
        name="default/ip-b/53/udp",
        protocol="UDP",
        endpoints=(ir.Endpoint(address="10.0.0.9", port=53),),
    )
    weighted = (
        ir.WeightedCluster(cluster=udp_a.name, weight=3),
        ir.WeightedCluster(cluster=udp_b.name, weight=1),
    )
    built = build(gateway(udp_a, udp_b, udp=weighted))
    target = "default/gw/53#weighted"
    c = built.clusters[target]
    assert c.type == cluster_pb2.Cluster.STRICT_DNS and target not in built.endpoints
    weights = [
        (
            loc.load_balancing_weight.value,
            loc.lb_endpoints[0].endpoint.address.socket_address.address,
        )
        for loc in c.load_assignment.endpoints
    ]
    assert weights == [(3, "a.example.internal"), (1, "10.0.0.9")]
    # only IP backends: an EDS weighted cluster with its CLA, as before
    ip_only = build(
        gateway(
            udp_b,
            replace(udp_b, name="default/ip-c/53/udp"),
            udp=(
                ir.WeightedCluster(cluster=udp_b.name, weight=1),
                ir.WeightedCluster(cluster="default/ip-c/53/udp", weight=1),
            ),
        )
    )
    assert ip_only.clusters[target].type == cluster_pb2.Cluster.EDS and target in ip_only.endpoints


def test_incremental_snapshots_equal_full_builds_across_eds_and_dns_switches() -> None:
    """The same cluster name switching between EDS (IP, unix) and DNS, and back: the
    incremental snapshot equals a cold one each time, and a DNS cluster has no CLA in it."""
    eds = replace(DNS, endpoints=(ir.Endpoint(address="10.0.0.1", port=8080),))
    unix = replace(
        DNS, endpoints=(ir.Endpoint(address="/run/s.sock", port=0, type=ir.ENDPOINT_UNIX),)
    )
    udp_a = ir.Cluster(name="default/dns-a/53/udp", protocol="UDP", endpoints=DNS.endpoints[:1])
    udp_b = ir.Cluster(
        name="default/ip-b/53/udp",
        protocol="UDP",
        endpoints=(ir.Endpoint(address="10.0.0.9", port=53),),
    )
    weighted = (
        ir.WeightedCluster(cluster=udp_a.name, weight=3),
        ir.WeightedCluster(cluster=udp_b.name, weight=1),
    )
    udp_ip = replace(udp_a, endpoints=(ir.Endpoint(address="10.0.0.8", port=53),))
    sequence = [
        gateway(eds, SOCKETS),
        gateway(DNS, SOCKETS),
        gateway(unix, SOCKETS),
        gateway(DNS, MIXED_SLICES),
        gateway(eds, MIXED_SLICES, udp_a, udp_b, udp=weighted),
        gateway(eds, MIXED_SLICES, udp_ip, udp_b, udp=weighted),
        gateway(DNS, MIXED_SLICES, udp_a, udp_b, udp=weighted),
    ]
    snaps = GatewaySnapshots()
    for gw in sequence:
        got = snaps.snapshot(gw)
        want = make_snapshot(build(gw).by_type())
        assert got == want
        dns_names = {c.name for c in gw.clusters if c.dns}
        assert dns_names <= set(got.of(CLUSTER))
        assert not dns_names & set(got.of(ENDPOINT))
