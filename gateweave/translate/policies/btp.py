"""BackendTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and its effect on a route to
:func:`route_effect` (effects.py calls it for every route the policy governs, on each
listener, through :meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).

Implemented:

* ``rateLimit`` of type ``Local``, as Envoy Gateway does with Envoy's local_ratelimit filter:
  a rule without ``clientSelectors`` (at most one) limits each route the policy governs to
  ``limit.requests`` per ``limit.unit`` (one token bucket per route on each Envoy, 429 beyond
  it); a rule with ``clientSelectors`` limits the requests one of its selectors picks, by
  headers (``Exact``, ``RegularExpression``, ``invert``; ``Distinct``: a bucket per value) and
  by the client's address (``sourceCIDR`` ``Exact``; ``Distinct``: a bucket per address in
  the range). A request over any limit it meets gets 429.
* ``retry``: ``numRetries``, ``retryOn`` (``triggers`` as Envoy's ``retry_on`` conditions,
  ``httpStatusCodes`` adding ``retriable-status-codes``; unset: Envoy Gateway's default,
  connection failures and 503), ``perRetry`` (``timeout`` of each attempt, ``backOff``
  ``baseInterval`` / ``maxInterval``), over the route's own retry.
* ``timeout.http.requestTimeout``: the route's request timeout, over the route's own.
* ``loadBalancer`` (``RoundRobin``, ``LeastRequest``, ``Random``, ``ConsistentHash`` on the
  client's address, a header or a cookie), ``circuitBreaker`` (``maxConnections``,
  ``maxPendingRequests``, ``maxParallelRequests``, ``maxParallelRetries``) and
  ``timeout.tcp.connectTimeout``: settings of the upstream clusters; each route the policy
  governs sends to copies of its clusters carrying them (:func:`ir.policy_cluster`).
* ``healthCheck.active`` (``HTTP``: ``path``, ``hostname``, ``expectedStatuses``; ``TCP``
  without payloads; ``interval``, ``timeout``, thresholds) and ``healthCheck.passive``
  (Envoy's outlier detection), on those cluster copies too.
"""

from __future__ import annotations

import ipaddress
from typing import Any, TypeVar

import msgspec

from gateweave import ir
from gateweave.translate.filters import RuleError, parse_duration
from gateweave.translate.regex import re2_error

IMPLEMENTED: frozenset[str] = frozenset({
    "rateLimit", "rateLimit.type", "rateLimit.local", "rateLimit.local.rules",
    "rateLimit.local.rules.limit", "rateLimit.local.rules.limit.requests", "rateLimit.local.rules.limit.unit",
    "rateLimit.local.rules.clientSelectors",
    "rateLimit.local.rules.clientSelectors.headers", "rateLimit.local.rules.clientSelectors.headers.name",
    "rateLimit.local.rules.clientSelectors.headers.type", "rateLimit.local.rules.clientSelectors.headers.value",
    "rateLimit.local.rules.clientSelectors.headers.invert",
    "rateLimit.local.rules.clientSelectors.sourceCIDR", "rateLimit.local.rules.clientSelectors.sourceCIDR.value",
    "rateLimit.local.rules.clientSelectors.sourceCIDR.type", "rateLimit.local.rules.clientSelectors.sourceCIDR.invert",
    "retry", "retry.numRetries", "retry.retryOn", "retry.retryOn.triggers", "retry.retryOn.httpStatusCodes",
    "retry.perRetry", "retry.perRetry.timeout", "retry.perRetry.backOff", "retry.perRetry.backOff.baseInterval",
    "retry.perRetry.backOff.maxInterval",
    "timeout", "timeout.http", "timeout.http.requestTimeout", "timeout.tcp", "timeout.tcp.connectTimeout",
    "loadBalancer", "loadBalancer.type", "loadBalancer.consistentHash", "loadBalancer.consistentHash.type",
    "loadBalancer.consistentHash.header", "loadBalancer.consistentHash.header.name",
    "loadBalancer.consistentHash.cookie", "loadBalancer.consistentHash.cookie.name",
    "loadBalancer.consistentHash.cookie.ttl", "loadBalancer.consistentHash.tableSize",
    "circuitBreaker", "circuitBreaker.maxConnections", "circuitBreaker.maxPendingRequests",
    "circuitBreaker.maxParallelRequests", "circuitBreaker.maxParallelRetries",
    "healthCheck", "healthCheck.active", "healthCheck.active.type", "healthCheck.active.interval",
    "healthCheck.active.timeout", "healthCheck.active.healthyThreshold", "healthCheck.active.unhealthyThreshold",
    "healthCheck.active.http", "healthCheck.active.http.path", "healthCheck.active.http.hostname",
    "healthCheck.active.http.expectedStatuses", "healthCheck.active.tcp",
    "healthCheck.passive", "healthCheck.passive.consecutive5XxErrors", "healthCheck.passive.consecutiveGatewayErrors",
    "healthCheck.passive.consecutiveLocalOriginFailures", "healthCheck.passive.splitExternalLocalOriginErrors",
    "healthCheck.passive.interval", "healthCheck.passive.baseEjectionTime", "healthCheck.passive.maxEjectionPercent",
    "healthCheck.passive.alwaysEjectOneEndpoint",
})

_T = TypeVar("_T")

_UNIT_S = {"Second": 1, "Minute": 60, "Hour": 3600, "Day": 86400, "Week": 7 * 86400, "Month": 30 * 86400,
           "Year": 365 * 86400}


class _Limit(msgspec.Struct, frozen=True):
    requests: int
    unit: str


class _Header(msgspec.Struct, frozen=True):
    name: str
    type: str = "Exact"
    value: str | None = None
    invert: bool = False


class _Source(msgspec.Struct, frozen=True):
    value: str
    type: str = "Exact"
    invert: bool = False


class _Selector(msgspec.Struct, frozen=True, rename="camel"):
    headers: tuple[_Header, ...] = ()
    source_cidr: _Source | None = msgspec.field(default=None, name="sourceCIDR")


class _Rule(msgspec.Struct, frozen=True, rename="camel"):
    limit: _Limit
    client_selectors: tuple[_Selector, ...] = ()


class _Local(msgspec.Struct, frozen=True):
    rules: tuple[_Rule, ...] = ()


class _RateLimit(msgspec.Struct, frozen=True):
    type: str = ""
    local: _Local | None = None


def _rate_limit(spec: dict[str, Any]) -> _RateLimit | None:
    raw = spec.get("rateLimit")
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, _RateLimit, strict=False)
    except msgspec.ValidationError:
        return _RateLimit(type="?")


class _BackOff(msgspec.Struct, frozen=True, rename="camel"):
    base_interval: str | None = None
    max_interval: str | None = None


class _PerRetry(msgspec.Struct, frozen=True, rename="camel"):
    timeout: str | None = None
    back_off: _BackOff | None = None


class _RetryOn(msgspec.Struct, frozen=True, rename="camel"):
    triggers: tuple[str, ...] = ()
    http_status_codes: tuple[int, ...] = ()


class _Retry(msgspec.Struct, frozen=True, rename="camel"):
    num_retries: int = 2
    retry_on: _RetryOn | None = None
    per_retry: _PerRetry | None = None


class _HTTPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    request_timeout: str | None = None


class _TCPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    connect_timeout: str | None = None


class _Timeout(msgspec.Struct, frozen=True):
    http: _HTTPTimeout | None = None
    tcp: _TCPTimeout | None = None


class _HashHeader(msgspec.Struct, frozen=True):
    name: str


class _HashCookie(msgspec.Struct, frozen=True):
    name: str
    ttl: str | None = None


class _ConsistentHash(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    header: _HashHeader | None = None
    cookie: _HashCookie | None = None
    table_size: int = 65537


class _LoadBalancer(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    consistent_hash: _ConsistentHash | None = None


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


# Envoy Gateway's retry without retryOn: connection failures, and 503.
_DEFAULT_TRIGGERS: tuple[str, ...] = ("connect-failure", "refused-stream", "unavailable", "cancelled", "retriable-status-codes")
_DEFAULT_CODES: tuple[int, ...] = (503,)
# Envoy's own default base interval, when only maxInterval is given.
_DEFAULT_BASE_S = 0.025


def _field(spec: dict[str, Any], name: str, kind: type[_T]) -> _T | str | None:
    """``spec[name]`` as ``kind``; the reason when it is not one (a stored object is not
    validated again); None when unset."""
    raw = spec.get(name)
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, kind, strict=False)
    except msgspec.ValidationError as exc:
        return f"spec.{name}: {exc}"


def _seconds(text: str | None, at: str, out: list[str]) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except RuleError:
        out.append(f"{at} {text!r} is not a duration")
        return None


def _ir_retry(retry: _Retry, out: list[str]) -> ir.Retry:
    """The route's retry (problems go to ``out``)."""
    on = retry.retry_on
    if on is None or not (on.triggers or on.http_status_codes):
        triggers, codes = _DEFAULT_TRIGGERS, _DEFAULT_CODES
    else:
        triggers, codes = on.triggers, on.http_status_codes
        if codes and "retriable-status-codes" not in triggers:
            triggers = (*triggers, "retriable-status-codes")
    for code in codes:
        if not 100 <= code <= 599:
            out.append(f"spec.retry.retryOn.httpStatusCodes: {code} is not an HTTP status code")
    if not 0 <= retry.num_retries < 1 << 32:
        out.append(f"spec.retry.numRetries {retry.num_retries} is out of range")
    per = retry.per_retry or _PerRetry()
    back = per.back_off or _BackOff()
    base = _seconds(back.base_interval, "spec.retry.perRetry.backOff.baseInterval", out)
    ceiling = _seconds(back.max_interval, "spec.retry.perRetry.backOff.maxInterval", out)
    if ceiling is not None and base is None:
        base = _DEFAULT_BASE_S
    if base is not None and base <= 0:
        out.append("spec.retry.perRetry.backOff.baseInterval must be more than 0")
    if base is not None and ceiling is not None and ceiling < base:
        out.append("spec.retry.perRetry.backOff.maxInterval must not be less than baseInterval")
    per_try = _seconds(per.timeout, "spec.retry.perRetry.timeout", out)
    return ir.Retry(codes=tuple(codes), attempts=retry.num_retries, backoff_s=base, triggers=tuple(triggers),
                    max_backoff_s=ceiling, per_try_s=per_try)


def _request_timeout(timeout: _Timeout, out: list[str]) -> float | None:
    http = timeout.http or _HTTPTimeout()
    return _seconds(http.request_timeout, "spec.timeout.http.requestTimeout", out)


def _prime(n: int) -> bool:
    return n > 1 and all(n % k for k in range(2, int(n ** 0.5) + 1))


def _cluster_policy(spec: dict[str, Any], out: list[str]) -> ir.ClusterPolicy | None:
    """The settings of the upstream clusters (problems go to ``out``); None: none set."""
    lb = _field(spec, "loadBalancer", _LoadBalancer)
    cb = _field(spec, "circuitBreaker", _CircuitBreaker)
    hc = _field(spec, "healthCheck", _HealthCheck)
    timeout = _field(spec, "timeout", _Timeout)
    out.extend(f for f in (lb, cb, hc) if isinstance(f, str))
    lb = lb if isinstance(lb, _LoadBalancer) else None
    cb = cb if isinstance(cb, _CircuitBreaker) else None
    hc = hc if isinstance(hc, _HealthCheck) else None
    tcp = timeout.tcp if isinstance(timeout, _Timeout) else None
    connect = _seconds(tcp.connect_timeout, "spec.timeout.tcp.connectTimeout", out) if tcp is not None else None
    if lb is None and cb is None and hc is None and connect is None:
        return None
    policy = ir.ClusterPolicy(connect_timeout_s=connect)
    if hc is not None:
        active = _active(hc.active, out) if hc.active is not None else None
        passive = _passive(hc.passive, out) if hc.passive is not None else None
        policy = msgspec.structs.replace(policy, health_check=active, outlier=passive)
    if connect is not None and connect <= 0:
        out.append("spec.timeout.tcp.connectTimeout must be more than 0")
    if cb is not None:
        limits = (cb.max_connections, cb.max_pending_requests, cb.max_parallel_requests, cb.max_parallel_retries)
        if any(v is not None and not 0 <= v < 1 << 32 for v in limits):
            out.append("spec.circuitBreaker: a threshold is out of range")
        policy = msgspec.structs.replace(
            policy, max_connections=cb.max_connections, max_pending_requests=cb.max_pending_requests,
            max_parallel_requests=cb.max_parallel_requests, max_parallel_retries=cb.max_parallel_retries)
    if lb is not None:
        policy = _load_balancer(lb, policy, out)
    return policy


def _active(active: _Active, out: list[str]) -> ir.HealthCheck | None:
    at = "spec.healthCheck.active"
    interval = _seconds(active.interval, f"{at}.interval", out)
    timeout = _seconds(active.timeout, f"{at}.timeout", out)
    if active.type not in ("HTTP", "TCP"):
        out.append(f"{at}.type {active.type}: gateweave supports HTTP and TCP")
    elif (active.type == "HTTP") != (active.http is not None):
        out.append(f"{at}.http goes with type HTTP")
    if not interval or not timeout:
        out.append(f"{at}: interval and timeout must be more than 0")
    for name, value in (("healthyThreshold", active.healthy_threshold), ("unhealthyThreshold", active.unhealthy_threshold)):
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
    return ir.HealthCheck(type=active.type, interval_s=interval, timeout_s=timeout, healthy=active.healthy_threshold,
                          unhealthy=active.unhealthy_threshold, path=http.path, host=http.hostname,
                          expected=http.expected_statuses or (200,))


def _passive(passive: _Passive, out: list[str]) -> ir.OutlierDetection:
    at = "spec.healthCheck.passive"
    counts = (passive.consecutive_5xx_errors, passive.consecutive_gateway_errors,
              passive.consecutive_local_origin_failures)
    if any(v is not None and not 0 <= v < 1 << 32 for v in counts):
        out.append(f"{at}: a count of errors is out of range")
    percent = passive.max_ejection_percent
    if percent is not None and not 0 <= percent <= 100:
        out.append(f"{at}.maxEjectionPercent {percent} is not a percentage")
    return ir.OutlierDetection(
        consecutive_5xx=passive.consecutive_5xx_errors, consecutive_gateway_errors=passive.consecutive_gateway_errors,
        consecutive_local_failures=passive.consecutive_local_origin_failures,
        split_local_errors=passive.split_external_local_origin_errors,
        interval_s=_seconds(passive.interval, f"{at}.interval", out),
        base_ejection_s=_seconds(passive.base_ejection_time, f"{at}.baseEjectionTime", out),
        max_ejection_percent=percent, always_eject_one=passive.always_eject_one_endpoint,
    )


def _load_balancer(lb: _LoadBalancer, policy: ir.ClusterPolicy, out: list[str]) -> ir.ClusterPolicy:
    if lb.type not in _LB_TYPES:
        out.append(f"spec.loadBalancer.type {lb.type} is not supported by gateweave")
        return policy
    ch = lb.consistent_hash
    if lb.type != "ConsistentHash":
        if ch is not None:
            out.append(f"spec.loadBalancer.consistentHash is only for type ConsistentHash, not {lb.type}")
        return msgspec.structs.replace(policy, lb=lb.type)
    if ch is None:
        out.append("spec.loadBalancer.consistentHash is required for type ConsistentHash")
        return policy
    name, ttl = "", None
    if ch.type == "Header" and ch.header is not None:
        name = ch.header.name.lower()
    elif ch.type == "Cookie" and ch.cookie is not None:
        name = ch.cookie.name
        ttl = _seconds(ch.cookie.ttl, "spec.loadBalancer.consistentHash.cookie.ttl", out)
    elif ch.type != "SourceIP":
        out.append(f"spec.loadBalancer.consistentHash.type {ch.type}: gateweave supports SourceIP, Header (with"
                   " header) and Cookie (with cookie)")
    if (ch.type == "Header") != (ch.header is not None) or (ch.type == "Cookie") != (ch.cookie is not None):
        out.append("spec.loadBalancer.consistentHash: header goes with type Header, cookie with type Cookie")
    if not (_prime(ch.table_size) and ch.table_size <= _MAX_TABLE_SIZE):
        out.append(f"spec.loadBalancer.consistentHash.tableSize {ch.table_size} must be a prime up to {_MAX_TABLE_SIZE}")
    return msgspec.structs.replace(policy, lb="ConsistentHash", hash_on=ch.type, hash_name=name,
                                   hash_cookie_ttl_s=ttl, hash_table_size=ch.table_size)


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (beyond the CRD's own rules)."""
    out: list[str] = []
    _cluster_policy(spec, out)
    retry = _field(spec, "retry", _Retry)
    if isinstance(retry, str):
        out.append(retry)
    elif retry is not None:
        _ir_retry(retry, out)
    timeout = _field(spec, "timeout", _Timeout)
    if isinstance(timeout, str):
        out.append(timeout)
    elif timeout is not None:
        _request_timeout(timeout, out)
    return out + _rate_limit_problems(spec)


def _rate_limit_problems(spec: dict[str, Any]) -> list[str]:
    rl = _rate_limit(spec)
    if rl is None:
        return []
    if rl.type != "Local" or rl.local is None:
        return [f"spec.rateLimit.type {rl.type or '(unset)'}: only Local rate limits are supported by gateweave"]
    out = []
    defaults = [rule.limit.unit for rule in rl.local.rules if not rule.client_selectors]
    if len(defaults) > 1:
        out.append("spec.rateLimit.local.rules: at most one rule may be without clientSelectors")
    # Envoy refuses a descriptor whose fill interval is not a multiple of the route bucket's.
    default_s = _UNIT_S.get(defaults[0], 1) if defaults else 1
    for i, rule in enumerate(rl.local.rules):
        at = f"spec.rateLimit.local.rules[{i}]"
        if rule.limit.unit not in _UNIT_S:
            out.append(f"{at}.limit.unit {rule.limit.unit} is not a unit")
        elif rule.client_selectors and _UNIT_S[rule.limit.unit] % default_s:
            out.append(f"{at}.limit.unit {rule.limit.unit} must be a multiple of the unit of the rule without"
                       " clientSelectors")
        if not 0 < rule.limit.requests < 1 << 32:
            out.append(f"{at}.limit.requests {rule.limit.requests} is out of range")
        for j, selector in enumerate(rule.client_selectors):
            out.extend(_selector_problems(selector, f"{at}.clientSelectors[{j}]"))
        if sum(s.source_cidr is not None for s in rule.client_selectors) > 1:
            out.append(f"{at}.clientSelectors: gateweave supports one sourceCIDR per rule")
    return out


def _selector_problems(selector: _Selector, at: str) -> list[str]:
    out = []
    if not selector.headers and selector.source_cidr is None:
        out.append(f"{at}: a selector needs headers or sourceCIDR")
    for k, header in enumerate(selector.headers):
        where = f"{at}.headers[{k}]"
        if header.type == "Distinct":
            if header.value is not None or header.invert:
                out.append(f"{where}: a Distinct header takes neither value nor invert")
        elif header.type in ("Exact", "RegularExpression"):
            if header.value is None:
                out.append(f"{where}.value is required for type {header.type}")
            elif header.type == "RegularExpression" and (err := re2_error(header.value)):
                out.append(f"{where}.value {header.value!r} is not a valid regular expression: {err}")
        else:
            out.append(f"{where}.type {header.type} is not a header match type")
    source = selector.source_cidr
    if source is not None:
        if _network(source.value) is None:
            out.append(f"{at}.sourceCIDR.value {source.value!r} is not an IP range (CIDR)")
        if source.invert:
            out.append(f"{at}.sourceCIDR.invert true is not supported by gateweave")
        if source.type not in ("Exact", "Distinct"):
            out.append(f"{at}.sourceCIDR.type {source.type} is not Exact or Distinct")
    return out


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The range ``text`` names (host bits ignored, as Envoy masks the client's address)."""
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _local_rate_limit(local: _Local) -> ir.LocalRateLimit:
    default: _Limit | None = None
    rules: list[ir.RateLimitRule] = []
    for rule in local.rules:
        if not rule.client_selectors:
            default = rule.limit
            continue
        # A rule's selectors are ANDed: one set of conditions (problems allows one sourceCIDR).
        headers = tuple(
            (ir.StringMatch(name=h.name.lower(), type=h.type, value=h.value or ""), h.invert)
            for selector in rule.client_selectors for h in selector.headers
        )
        source = None
        for selector in rule.client_selectors:
            if selector.source_cidr is not None:
                source = ir.RateLimitSource(cidr=str(_network(selector.source_cidr.value)),
                                            distinct=selector.source_cidr.type == "Distinct")
        rules.append(ir.RateLimitRule(requests=rule.limit.requests, unit_s=_UNIT_S[rule.limit.unit],
                                      headers=headers, source=source))
    return ir.LocalRateLimit(
        requests=default.requests if default is not None else None,
        unit_s=_UNIT_S[default.unit] if default is not None else 1,
        rules=tuple(rules),
    )


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    """``route`` as a policy with ``spec`` (accepted, without problems) makes it."""
    rl = _rate_limit(spec)
    if rl is not None and rl.local is not None and rl.local.rules:
        route = msgspec.structs.replace(route, rate_limit=_local_rate_limit(rl.local))
    ignored: list[str] = []  # none: problems found them first
    retry = _field(spec, "retry", _Retry)
    if isinstance(retry, _Retry):
        route = msgspec.structs.replace(route, retry=_ir_retry(retry, ignored))
    timeout = _field(spec, "timeout", _Timeout)
    if isinstance(timeout, _Timeout) and (request := _request_timeout(timeout, ignored)) is not None:
        route = msgspec.structs.replace(route, timeout_s=request)
    cluster_policy = _cluster_policy(spec, ignored)
    if cluster_policy is not None and route.backends:
        route = msgspec.structs.replace(route, cluster_policy=cluster_policy)
    return route
