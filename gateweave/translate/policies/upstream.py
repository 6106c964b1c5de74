"""BackendTrafficPolicy settings of the upstream clusters: ``loadBalancer`` (``RoundRobin``,
``LeastRequest``, ``Random``, ``ConsistentHash`` on the client's address, a header or a cookie),
``circuitBreaker`` thresholds, ``timeout.tcp.connectTimeout``, ``healthCheck.active`` (HTTP,
TCP), ``healthCheck.passive`` (outlier detection) and ``tcpKeepalive`` (keepalive.py).

A cluster serves every route that sends to its backend, so each route the policy governs sends
to a copy of its clusters carrying these settings (:func:`gateweave.ir.policy_cluster`, made in
:func:`gateweave.translate.xdsir.policy_clusters`); the other routes keep the plain cluster.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import keepalive, specvalue

FIELDS: frozenset[str] = keepalive.FIELDS | frozenset(
    {
        "timeout",
        "timeout.tcp",
        "timeout.tcp.connectTimeout",
        "loadBalancer",
        "loadBalancer.type",
        "loadBalancer.consistentHash",
        "loadBalancer.consistentHash.type",
        "loadBalancer.consistentHash.header",
        "loadBalancer.consistentHash.header.name",
        "loadBalancer.consistentHash.cookie",
        "loadBalancer.consistentHash.cookie.name",
        "loadBalancer.consistentHash.cookie.ttl",
        "loadBalancer.consistentHash.cookie.attributes.*",
        "loadBalancer.consistentHash.tableSize",
        "loadBalancer.endpointOverride",
        "loadBalancer.endpointOverride.extractFrom",
        "loadBalancer.endpointOverride.extractFrom.header",
        "circuitBreaker",
        "circuitBreaker.maxConnections",
        "circuitBreaker.maxPendingRequests",
        "circuitBreaker.maxParallelRequests",
        "circuitBreaker.maxParallelRetries",
        "healthCheck",
        "healthCheck.active",
        "healthCheck.active.type",
        "healthCheck.active.interval",
        "healthCheck.active.timeout",
        "healthCheck.active.healthyThreshold",
        "healthCheck.active.unhealthyThreshold",
        "healthCheck.active.http",
        "healthCheck.active.http.path",
        "healthCheck.active.http.hostname",
        "healthCheck.active.http.expectedStatuses",
        "healthCheck.active.tcp",
        "healthCheck.passive",
        "healthCheck.passive.consecutive5XxErrors",
        "healthCheck.passive.consecutiveGatewayErrors",
        "healthCheck.passive.consecutiveLocalOriginFailures",
        "healthCheck.passive.splitExternalLocalOriginErrors",
        "healthCheck.passive.interval",
        "healthCheck.passive.baseEjectionTime",
        "healthCheck.passive.maxEjectionPercent",
        "healthCheck.passive.alwaysEjectOneEndpoint",
    }
)


class _TCPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    connect_timeout: str | None = None


class _Timeout(msgspec.Struct, frozen=True):
    tcp: _TCPTimeout | None = None


class _HashHeader(msgspec.Struct, frozen=True):
    name: str


class _HashCookie(msgspec.Struct, frozen=True):
    name: str
    ttl: str | None = None
    attributes: dict[str, str] | None = None


class _ConsistentHash(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    header: _HashHeader | None = None
    cookie: _HashCookie | None = None
    table_size: int = 65537


class _OverrideSource(msgspec.Struct, frozen=True):
    header: str | None = None


class _EndpointOverride(msgspec.Struct, frozen=True, rename="camel"):
    extract_from: tuple[_OverrideSource, ...] = ()


class _LoadBalancer(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    consistent_hash: _ConsistentHash | None = None
    endpoint_override: _EndpointOverride | None = None


class _CircuitBreaker(msgspec.Struct, frozen=True, rename="camel"):
    max_connections: int | None = None
    max_pending_requests: int | None = None
    max_parallel_requests: int | None = None
    max_parallel_retries: int | None = None


class _ActiveHTTP(msgspec.Struct, frozen=True, rename="camel"):
    path: str
    hostname: str = ""
    expected_statuses: tuple[int, ...] = (200,)


class _Active(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    interval: str = "3s"
    timeout: str = "1s"
    healthy_threshold: int = 1
    unhealthy_threshold: int = 3
    http: _ActiveHTTP | None = None
    tcp: dict[str, Any] | None = None


class _Passive(msgspec.Struct, frozen=True, rename="camel"):
    consecutive_5xx_errors: int | None = msgspec.field(default=None, name="consecutive5XxErrors")
    consecutive_gateway_errors: int | None = None
    consecutive_local_origin_failures: int | None = None
    split_external_local_origin_errors: bool = False
    interval: str | None = None
    base_ejection_time: str | None = None
    max_ejection_percent: int | None = None
    always_eject_one_endpoint: bool = False


class _HealthCheck(msgspec.Struct, frozen=True):
    active: _Active | None = None
    passive: _Passive | None = None


_LB_TYPES = ("RoundRobin", "LeastRequest", "Random", "ConsistentHash")
_MAX_TABLE_SIZE = 5000011  # Envoy's Maglev limit


def _prime(n: int) -> bool:
    return n > 1 and all(n % k for k in range(2, int(n**0.5) + 1))


def cluster_policy(
    spec: dict[str, Any], out: list[str], at: str = "spec"
) -> ir.ClusterPolicy | None:
    """The settings of the upstream clusters of ``spec`` (a policy's spec, or a SecurityPolicy's
    ``backendSettings``, at ``at``); problems go to ``out``; None: none set."""
    lb = specvalue.field(spec, "loadBalancer", _LoadBalancer, at)
    cb = specvalue.field(spec, "circuitBreaker", _CircuitBreaker, at)
    hc = specvalue.field(spec, "healthCheck", _HealthCheck, at)
    timeout = specvalue.field(spec, "timeout", _Timeout, at)
    out.extend(f for f in (lb, cb, hc) if isinstance(f, str))
    lb = lb if isinstance(lb, _LoadBalancer) else None
    cb = cb if isinstance(cb, _CircuitBreaker) else None
    hc = hc if isinstance(hc, _HealthCheck) else None
    tcp = timeout.tcp if isinstance(timeout, _Timeout) else None
    connect = (
        specvalue.seconds(tcp.connect_timeout, f"{at}.timeout.tcp.connectTimeout", out)
        if tcp is not None
        else None
    )
    tcp_keepalive = keepalive.tcp_keepalive(spec, at, out)
    if lb is None and cb is None and hc is None and connect is None and tcp_keepalive is None:
        return None
    policy = ir.ClusterPolicy(connect_timeout_s=connect, tcp_keepalive=tcp_keepalive)
    if hc is not None:
        active = _active(hc.active, out, at) if hc.active is not None else None
        passive = _passive(hc.passive, out, at) if hc.passive is not None else None
        policy = msgspec.structs.replace(policy, health_check=active, outlier=passive)
    if connect is not None and connect <= 0:
        out.append(f"{at}.timeout.tcp.connectTimeout must be more than 0")
    if cb is not None:
        limits = (
            cb.max_connections,
            cb.max_pending_requests,
            cb.max_parallel_requests,
            cb.max_parallel_retries,
        )
        if any(v is not None and not 0 <= v < 1 << 32 for v in limits):
            out.append(f"{at}.circuitBreaker: a threshold is out of range")
        policy = msgspec.structs.replace(
            policy,
            max_connections=cb.max_connections,
            max_pending_requests=cb.max_pending_requests,
            max_parallel_requests=cb.max_parallel_requests,
            max_parallel_retries=cb.max_parallel_retries,
        )
    if lb is not None:
        policy = _load_balancer(lb, policy, out, at)
    return policy


def _active(active: _Active, out: list[str], at: str) -> ir.HealthCheck | None:
    at = f"{at}.healthCheck.active"
    interval = specvalue.seconds(active.interval, f"{at}.interval", out)
    timeout = specvalue.seconds(active.timeout, f"{at}.timeout", out)
    if active.type not in ("HTTP", "TCP"):
        out.append(f"{at}.type {active.type}: gateweave supports HTTP and TCP")
    elif (active.type == "HTTP") != (active.http is not None):
        out.append(f"{at}.http goes with type HTTP")
    if not interval or not timeout:
        out.append(f"{at}: interval and timeout must be more than 0")
    for name, value in (
        ("healthyThreshold", active.healthy_threshold),
        ("unhealthyThreshold", active.unhealthy_threshold),
    ):
        if not 0 < value < 1 << 32:
            out.append(f"{at}.{name} {value} is out of range")
    http = active.http or _ActiveHTTP(path="/")
    if not http.path.startswith("/"):
        out.append(f"{at}.http.path {http.path!r} must start with /")
    for code in http.expected_statuses:
        if not 100 <= code <= 599:
            out.append(f"{at}.http.expectedStatuses: {code} is not an HTTP status code")
    if not (interval and timeout):
        return None
    return ir.HealthCheck(
        type=active.type,
        interval_s=interval,
        timeout_s=timeout,
        healthy=active.healthy_threshold,
        unhealthy=active.unhealthy_threshold,
        path=http.path,
        host=http.hostname,
        expected=http.expected_statuses or (200,),
    )


def _passive(passive: _Passive, out: list[str], at: str) -> ir.OutlierDetection:
    at = f"{at}.healthCheck.passive"
    counts = (
        passive.consecutive_5xx_errors,
        passive.consecutive_gateway_errors,
        passive.consecutive_local_origin_failures,
    )
    if any(v is not None and not 0 <= v < 1 << 32 for v in counts):
        out.append(f"{at}: a count of errors is out of range")
    percent = passive.max_ejection_percent
    if percent is not None and not 0 <= percent <= 100:
        out.append(f"{at}.maxEjectionPercent {percent} is not a percentage")
    return ir.OutlierDetection(
        consecutive_5xx=passive.consecutive_5xx_errors,
        consecutive_gateway_errors=passive.consecutive_gateway_errors,
        consecutive_local_failures=passive.consecutive_local_origin_failures,
        split_local_errors=passive.split_external_local_origin_errors,
        interval_s=specvalue.seconds(passive.interval, f"{at}.interval", out),
        base_ejection_s=specvalue.seconds(
            passive.base_ejection_time, f"{at}.baseEjectionTime", out
        ),
        max_ejection_percent=percent,
        always_eject_one=passive.always_eject_one_endpoint,
    )


def _load_balancer(
    lb: _LoadBalancer, policy: ir.ClusterPolicy, out: list[str], at: str
) -> ir.ClusterPolicy:
    if lb.endpoint_override is not None:
        headers = _override_headers(
            lb.endpoint_override, f"{at}.loadBalancer.endpointOverride", out
        )
        policy = msgspec.structs.replace(policy, endpoint_override_headers=headers)
    if lb.type not in _LB_TYPES:
        out.append(f"{at}.loadBalancer.type {lb.type} is not supported by gateweave")
        return policy
    ch = lb.consistent_hash
    if lb.type != "ConsistentHash":
        if ch is not None:
            out.append(
                f"{at}.loadBalancer.consistentHash is only for type ConsistentHash, not {lb.type}"
            )
        return msgspec.structs.replace(policy, lb=lb.type)
    if ch is None:
        out.append(f"{at}.loadBalancer.consistentHash is required for type ConsistentHash")
        return policy
    name, ttl = "", None
    attributes: tuple[tuple[str, str], ...] = ()
    if ch.type == "Header" and ch.header is not None:
        name = ch.header.name.lower()
    elif ch.type == "Cookie" and ch.cookie is not None:
        name = ch.cookie.name
        ttl = specvalue.seconds(ch.cookie.ttl, f"{at}.loadBalancer.consistentHash.cookie.ttl", out)
        attributes = _cookie_attributes(
            ch.cookie.attributes or {}, f"{at}.loadBalancer.consistentHash.cookie.attributes", out
        )
    elif ch.type != "SourceIP":
        out.append(
            f"{at}.loadBalancer.consistentHash.type {ch.type}: gateweave supports SourceIP, Header "
            "(with"
            " header) and Cookie (with cookie)"
        )
    if (ch.type == "Header") != (ch.header is not None) or (ch.type == "Cookie") != (
        ch.cookie is not None
    ):
        out.append(
            f"{at}.loadBalancer.consistentHash: header goes with type Header, cookie with type "
            "Cookie"
        )
    if not (_prime(ch.table_size) and ch.table_size <= _MAX_TABLE_SIZE):
        out.append(
            f"{at}.loadBalancer.consistentHash.tableSize {ch.table_size} must be a prime up to "
            f"{_MAX_TABLE_SIZE}"
        )
    return msgspec.structs.replace(
        policy,
        lb="ConsistentHash",
        hash_on=ch.type,
        hash_name=name,
        hash_cookie_ttl_s=ttl,
        hash_cookie_attributes=attributes,
        hash_table_size=ch.table_size,
    )


_MOST_OVERRIDE_SOURCES = 10  # the CRD's


def _override_headers(override: _EndpointOverride, at: str, out: list[str]) -> tuple[str, ...]:
    """The headers an endpoint override reads (lowercased, as Envoy keeps them), in order."""
    sources = override.extract_from
    if not 0 < len(sources) <= _MOST_OVERRIDE_SOURCES:
        out.append(f"{at}.extractFrom: 1 to {_MOST_OVERRIDE_SOURCES} sources are needed")
    headers = []
    for i, source in enumerate(sources):
        if source.header is None or not specvalue.HEADER_NAME.fullmatch(source.header):
            out.append(f"{at}.extractFrom[{i}].header: {source.header!r} is not a header name")
            continue
        headers.append(source.header.lower())
    return tuple(headers)


def _cookie_attributes(
    attributes: dict[str, str], at: str, out: list[str]
) -> tuple[tuple[str, str], ...]:
    """The attributes of the cookie Envoy sets (``name=value`` after the cookie's own, each
    after a ``;``), sorted by name (Envoy Gateway writes them in its map's random order). A name
    that is not a token, a value with a ``;``, a line break or NUL (which would end the
    attribute or the header) are problems."""
    for key, value in attributes.items():
        if not specvalue.HEADER_NAME.fullmatch(key):
            out.append(f"{at}: {key!r} is not an attribute name (a token)")
        if any(c in value for c in ";\r\n\0"):
            out.append(f"{at}.{key}: {value!r} has a ';', a line break or NUL")
    return tuple(sorted(attributes.items()))


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the upstream settings cannot be applied (beyond the CRD's own rules)."""
    out: list[str] = []
    cluster_policy(spec, out)
    return out


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    policy = cluster_policy(spec, [])
    if policy is not None and route.backends:
        route = msgspec.structs.replace(route, cluster_policy=policy)
    return route
