"""Clusters and their ClusterLoadAssignments.

A cluster whose endpoints are all addresses (IPs, unix sockets) is an EDS cluster: its
endpoints come over ADS as a ClusterLoadAssignment, so they change without touching the
cluster. A cluster with host names among its endpoints (an ExternalName Service, an FQDN
EndpointSlice, a Backend's fqdn endpoints) is a STRICT_DNS cluster with its endpoints
inline and no ClusterLoadAssignment: Envoy resolves every name itself and keeps one host
per address it gets. (STRICT_DNS rather than LOGICAL_DNS: a cluster may hold several names,
each address is load-balanced and its connections drained when DNS stops returning it;
LOGICAL_DNS keeps one logical host per cluster, for huge external address sets.) Names are
resolved with the machine's resolver (``getaddrinfo``: /etc/hosts, nsswitch, resolv.conf),
not Envoy's c-ares default, and re-resolved as the answer's TTL says.
"""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import (
    address_pb2,
    base_pb2,
    config_source_pb2,
    extension_pb2,
    health_check_pb2,
    protocol_pb2,
)
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.maglev.v3 import maglev_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from envoy.extensions.load_balancing_policies.random.v3 import random_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.network.dns_resolver.getaddrinfo.v3 import getaddrinfo_dns_resolver_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.type.v3 import range_pb2
from google.protobuf import duration_pb2, wrappers_pb2
from google.protobuf.message import Message

from gateweave import ir
from gateweave.xds import tls
from gateweave.xds.resources import duration, pack, stat_name

CONNECT_TIMEOUT_S = 10
HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
HTTP2_PROTOCOLS = frozenset({"HTTP2", "H2C"})
HTTP_PROTOCOLS = frozenset({"HTTP1", "HTTP2", "H2C", "WEBSOCKET"})
GETADDRINFO_RESOLVER = "envoy.network.dns_resolver.getaddrinfo"
# DNS clusters re-resolve as the answer's TTL says (getaddrinfo reports none: Envoy then
# uses its fixed 60 s); DNS_REFRESH_S where an answer has no TTL at all; a failed
# resolution is retried after 1 s, backing off to 10 s (a name that is not up yet).
DNS_REFRESH_S = 5
DNS_FAILURE_REFRESH_S = (1, 10)


def ads_source() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )


def _eds_cluster(name: str) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=name,
        alt_stat_name=stat_name(name),
        type=cluster_pb2.Cluster.EDS,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_source()),
        connect_timeout=duration_pb2.Duration(seconds=CONNECT_TIMEOUT_S),
    )


def _dns_cluster(name: str, assignment: endpoint_pb2.ClusterLoadAssignment) -> cluster_pb2.Cluster:
    resolver = pack(getaddrinfo_dns_resolver_pb2.GetAddrInfoDnsResolverConfig())
    base, most = DNS_FAILURE_REFRESH_S
    return cluster_pb2.Cluster(
        name=name,
        alt_stat_name=stat_name(name),
        type=cluster_pb2.Cluster.STRICT_DNS,
        connect_timeout=duration_pb2.Duration(seconds=CONNECT_TIMEOUT_S),
        load_assignment=assignment,
        typed_dns_resolver_config=extension_pb2.TypedExtensionConfig(
            name=GETADDRINFO_RESOLVER, typed_config=resolver
        ),
        respect_dns_ttl=True,
        dns_refresh_rate=duration_pb2.Duration(seconds=DNS_REFRESH_S),
        dns_failure_refresh_rate=cluster_pb2.Cluster.RefreshRate(
            base_interval=duration_pb2.Duration(seconds=base),
            max_interval=duration_pb2.Duration(seconds=most),
        ),
        dns_lookup_family=cluster_pb2.Cluster.V4_PREFERRED,
    )


def _http_options(c: ir.Cluster) -> http_protocol_options_pb2.HttpProtocolOptions | None:
    """HTTP/2 upstream, and SNI (and certificate check) from each request's Host for a TLS
    cluster without a fixed SNI; None when Envoy's defaults do."""
    auto_sni = c.tls is not None and not c.tls.sni and c.protocol in HTTP_PROTOCOLS
    if c.protocol not in HTTP2_PROTOCOLS and not auto_sni:
        return None
    explicit = http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig
    options = http_protocol_options_pb2.HttpProtocolOptions(
        explicit_http_config=(
            explicit(http2_protocol_options=protocol_pb2.Http2ProtocolOptions())
            if c.protocol in HTTP2_PROTOCOLS
            else explicit(http_protocol_options=protocol_pb2.Http1ProtocolOptions())
        )
    )
    if auto_sni:
        assert c.tls is not None
        options.upstream_http_protocol_options.CopyFrom(
            protocol_pb2.UpstreamHttpProtocolOptions(
                auto_sni=True, auto_san_validation=not c.tls.insecure_skip_verify
            )
        )
    return options


def cluster(c: ir.Cluster) -> cluster_pb2.Cluster:
    """An EDS-over-ADS cluster (its endpoints come in :func:`load_assignment`), or a DNS
    cluster with its endpoints inline."""
    out = _dns_cluster(c.name, _assignment(c)) if c.dns else _eds_cluster(c.name)
    options = _http_options(c)
    if options is not None:
        out.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(pack(options))
    if c.tls is not None:
        alpn: tuple[str, ...] = ()
        if c.protocol in HTTP2_PROTOCOLS:
            alpn = ("h2",)
        elif c.protocol in ("HTTP1", "WEBSOCKET"):
            alpn = ("http/1.1",)
        out.transport_socket.CopyFrom(tls.upstream_socket(c.tls, alpn))
    if c.policy is not None:
        _apply_policy(out, c.policy)
    return out


_LB_POLICIES = {
    "RoundRobin": cluster_pb2.Cluster.ROUND_ROBIN,
    "LeastRequest": cluster_pb2.Cluster.LEAST_REQUEST,
    "Random": cluster_pb2.Cluster.RANDOM,
    "ConsistentHash": cluster_pb2.Cluster.MAGLEV,
}


def _apply_policy(out: cluster_pb2.Cluster, policy: ir.ClusterPolicy) -> None:
    """A BackendTrafficPolicy's settings: load balancing (a consistent hash is Maglev, keyed
    by the route's hash policy), connect timeout, circuit breaker thresholds, health checks and
    TCP keepalive."""
    if policy.endpoint_override_headers:
        out.load_balancing_policy.CopyFrom(_endpoint_override(policy))
    elif policy.lb:
        out.lb_policy = _LB_POLICIES[policy.lb]
    if policy.lb == "ConsistentHash" and not policy.endpoint_override_headers:
        out.maglev_lb_config.table_size.value = policy.hash_table_size
    if policy.connect_timeout_s is not None:
        out.connect_timeout.CopyFrom(duration(policy.connect_timeout_s))
    threshold = circuit_breaker_pb2.CircuitBreakers.Thresholds()
    if policy.max_connections is not None:
        threshold.max_connections.value = policy.max_connections
    if policy.max_pending_requests is not None:
        threshold.max_pending_requests.value = policy.max_pending_requests
    if policy.max_parallel_requests is not None:
        threshold.max_requests.value = policy.max_parallel_requests
    if policy.max_parallel_retries is not None:
        threshold.max_retries.value = policy.max_parallel_retries
    if threshold.ListFields():
        out.circuit_breakers.thresholds.append(threshold)
    if policy.health_check is not None:
        out.health_checks.append(_health_check(policy.health_check))
    if policy.outlier is not None:
        out.outlier_detection.CopyFrom(_outlier(policy.outlier))
    if policy.tcp_keepalive is not None:
        _tcp_keepalive(out.upstream_connection_options.tcp_keepalive, policy.tcp_keepalive)


def _lb_extension(policy: ir.ClusterPolicy) -> cluster_pb2.LoadBalancingPolicy:
    """The load balancer of ``policy`` as a load balancing policy extension."""
    config: Message
    if policy.lb == "ConsistentHash":
        config = maglev_pb2.Maglev()
        config.table_size.value = policy.hash_table_size
        name = "maglev"
    elif policy.lb == "Random":
        config, name = random_pb2.Random(), "random"
    elif policy.lb == "LeastRequest":
        config, name = least_request_pb2.LeastRequest(), "least_request"
    else:
        config, name = round_robin_pb2.RoundRobin(), "round_robin"
    return _one_policy(f"envoy.load_balancing_policies.{name}", config)


def _one_policy(name: str, config: Message) -> cluster_pb2.LoadBalancingPolicy:
    out = cluster_pb2.LoadBalancingPolicy()
    out.policies.add().typed_extension_config.CopyFrom(
        extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(config))
    )
    return out


def _endpoint_override(policy: ir.ClusterPolicy) -> cluster_pb2.LoadBalancingPolicy:
    """Envoy's override_host load balancer, as Envoy Gateway writes it: a request's endpoints
    from the first listed header it has, else the policy's own load balancer."""
    config = override_host_pb2.OverrideHost(fallback_policy=_lb_extension(policy))
    for header in policy.endpoint_override_headers:
        config.override_host_sources.add().header = header
    return _one_policy("envoy.load_balancing_policies.override_host", config)


def _tcp_keepalive(out: address_pb2.TcpKeepalive, keepalive: ir.TCPKeepalive) -> None:
    """TCP keepalive on the connections to the endpoints (Envoy's ``upstream_connection_options``,
    as Envoy Gateway writes it: an unset value is the system's)."""
    out.SetInParent()
    if keepalive.probes is not None:
        out.keepalive_probes.value = keepalive.probes
    if keepalive.idle_s is not None:
        out.keepalive_time.value = keepalive.idle_s
    if keepalive.interval_s is not None:
        out.keepalive_interval.value = keepalive.interval_s


def _health_check(hc: ir.HealthCheck) -> health_check_pb2.HealthCheck:
    out = health_check_pb2.HealthCheck(
        timeout=duration(hc.timeout_s),
        interval=duration(hc.interval_s),
        # Envoy checks a cluster that has had no traffic yet only every 60 s by default.
        no_traffic_interval=duration(hc.interval_s),
        healthy_threshold=wrappers_pb2.UInt32Value(value=hc.healthy),
        unhealthy_threshold=wrappers_pb2.UInt32Value(value=hc.unhealthy),
    )
    if hc.type == "HTTP":
        http = out.http_health_check
        http.path = hc.path
        http.host = hc.host
        # Envoy's ranges are half-open: [code, code + 1)
        http.expected_statuses.extend(
            range_pb2.Int64Range(start=code, end=code + 1) for code in hc.expected
        )
    else:
        out.tcp_health_check.SetInParent()  # a connection is enough
    return out


def _outlier(od: ir.OutlierDetection) -> outlier_detection_pb2.OutlierDetection:
    out = outlier_detection_pb2.OutlierDetection(
        split_external_local_origin_errors=od.split_local_errors,
        always_eject_one_host=wrappers_pb2.BoolValue(value=od.always_eject_one),
    )
    if od.consecutive_5xx is not None:
        out.consecutive_5xx.value = od.consecutive_5xx
    if od.consecutive_gateway_errors is not None:
        out.consecutive_gateway_failure.value = od.consecutive_gateway_errors
        out.enforcing_consecutive_gateway_failure.value = 100
    if od.consecutive_local_failures is not None:
        out.consecutive_local_origin_failure.value = od.consecutive_local_failures
    if od.interval_s is not None:
        out.interval.CopyFrom(duration(od.interval_s))
    if od.base_ejection_s is not None:
        out.base_ejection_time.CopyFrom(duration(od.base_ejection_s))
    if od.max_ejection_percent is not None:
        out.max_ejection_percent.value = od.max_ejection_percent
    return out


def _address(ep: ir.Endpoint) -> address_pb2.Address:
    if ep.type == ir.ENDPOINT_UNIX:
        return address_pb2.Address(pipe=address_pb2.Pipe(path=ep.address))
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=ep.address, port_value=ep.port)
    )


def _lb_endpoint(ep: ir.Endpoint) -> endpoint_components_pb2.LbEndpoint:
    return endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(address=_address(ep), hostname=ep.hostname)
    )


def _assignment(c: ir.Cluster) -> endpoint_pb2.ClusterLoadAssignment:
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=c.name)
    if c.endpoints:
        cla.endpoints.append(
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[_lb_endpoint(ep) for ep in c.endpoints]
            )
        )
    return cla


def load_assignment(c: ir.Cluster) -> endpoint_pb2.ClusterLoadAssignment | None:
    """The endpoints of an EDS cluster ``c`` (possibly none: every EDS cluster gets its CLA);
    None for a DNS cluster, whose endpoints are inline."""
    return None if c.dns else _assignment(c)


def weighted_cluster(
    name: str, backends: tuple[ir.WeightedCluster, ...], clusters: Mapping[str, ir.Cluster]
) -> tuple[cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment | None]:
    """One cluster that spreads load over several backends by weight, and its CLA (None
    when it is a DNS cluster: one of the backends has host names).

    For proxies without weighted clusters (UDP): each backend's endpoints become one
    locality whose ``load_balancing_weight`` is the backend weight, and the cluster
    balances between localities by weight.
    """
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    dns = False
    for index, backend in enumerate(backends):
        target = clusters.get(backend.cluster)
        if target is None or backend.weight <= 0 or not target.endpoints:
            continue
        dns = dns or target.dns
        cla.endpoints.append(
            endpoint_components_pb2.LocalityLbEndpoints(
                # Envoy rejects duplicate localities: one per backend position.
                locality=base_pb2.Locality(sub_zone=f"backend-{index}"),
                lb_endpoints=[_lb_endpoint(ep) for ep in target.endpoints],
                load_balancing_weight=wrappers_pb2.UInt32Value(value=backend.weight),
            )
        )
    out = _dns_cluster(name, cla) if dns else _eds_cluster(name)
    out.common_lb_config.locality_weighted_lb_config.SetInParent()
    return out, None if dns else cla
