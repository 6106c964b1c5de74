"""RouteConfigurations: virtual hosts, matches and actions of HTTP and gRPC routes."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable
from typing import Generic, NamedTuple, TypeVar

import msgspec
from envoy.config.core.v3 import base_pb2, extension_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2 as ss_pb2
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2 as ss_cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2 as ss_header_pb2
from envoy.type.http.v3 import cookie_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2, token_bucket_pb2
from google.protobuf import any_pb2, wrappers_pb2

from gateweave import ir
from gateweave.translate.regex import origin_regex, re2_escape
from gateweave.xds import compression, extauth, responseoverride, security, telemetry
from gateweave.xds.resources import duration, length_tag, pack, varint_field

# The HTTP fault filter is in every HCM chain, inert unless a weighted cluster configures it:
# it answers 500 for the share of an invalid backendRef.
FAULT_FILTER = "envoy.filters.http.fault"
# In a listener's HCM only while one of its routes has a rate limit (listeners.py); each such
# route configures it (its own token bucket).
LOCAL_RATELIMIT_FILTER = "envoy.filters.http.local_ratelimit"
LOCAL_RATELIMIT_STAT_PREFIX = "http_local_rate_limiter"

CORS_FILTER = "envoy.filters.http.cors"

# The stateful session filter is in every HCM chain, disabled unless a route enables it with
# its own session (sessionPersistence): its per-route config says where the session lives.
SESSION_FILTER = "envoy.filters.http.stateful_session"

_REDIRECT_CODES = {
    301: rc.RedirectAction.MOVED_PERMANENTLY,
    302: rc.RedirectAction.FOUND,
    303: rc.RedirectAction.SEE_OTHER,
    307: rc.RedirectAction.TEMPORARY_REDIRECT,
    308: rc.RedirectAction.PERMANENT_REDIRECT,
}
_WELL_KNOWN_PORTS = {"http": 80, "https": 443}
_DENOMINATORS = {
    100: percent_pb2.FractionalPercent.HUNDRED,
    10_000: percent_pb2.FractionalPercent.TEN_THOUSAND,
    1_000_000: percent_pb2.FractionalPercent.MILLION,
}


def _regex(pattern: str) -> regex_pb2.RegexMatcher:
    return regex_pb2.RegexMatcher(regex=pattern)


def _string_match(match: ir.StringMatch) -> string_pb2.StringMatcher:
    if match.type == "Exact":
        return string_pb2.StringMatcher(exact=match.value)
    if match.type == "RegularExpression":
        return string_pb2.StringMatcher(safe_regex=_regex(match.value))
    raise ValueError(f"unsupported match type {match.type!r} for {match.name!r}")


# ---------------------------------------------------------------- matches


def route_match(out: rc.RouteMatch, match: ir.RouteMatch) -> None:
    """Gateway API match -> Envoy match, set in ``out`` (a route's own: no copy made).

    PathPrefix matches whole path elements and ignores a trailing ``/`` (``/abc``,
    ``/abc/`` and ``/abc/def`` all match ``/abc`` and ``/abc/``; ``/abcd`` does not):
    exactly ``path_separated_prefix`` of the prefix without its trailing ``/``, except
    ``/`` itself, a plain ``prefix`` that matches everything.
    """
    if match.path_type == "Exact":
        out.path = match.path
    elif match.path_type == "PathPrefix":
        trimmed = match.path.rstrip("/")
        if trimmed:
            out.path_separated_prefix = trimmed
        else:
            out.prefix = "/"
    elif match.path_type == "RegularExpression":
        out.safe_regex.CopyFrom(_regex(match.path))
    else:
        raise ValueError(f"unsupported path match type {match.path_type!r}")
    for header in match.headers:
        out.headers.append(
            rc.HeaderMatcher(name=header.name.lower(), string_match=_string_match(header))
        )
    if match.method is not None:
        out.headers.append(
            rc.HeaderMatcher(
                name=":method", string_match=string_pb2.StringMatcher(exact=match.method)
            )
        )
    for param in match.query_params:
        out.query_parameters.append(
            rc.QueryParameterMatcher(name=param.name, string_match=_string_match(param))
        )
    if match.grpc:
        out.grpc.SetInParent()


# ---------------------------------------------------------------- headers


def _modifiable(name: str, request: bool) -> bool:
    """Envoy NACKs a whole RouteConfiguration that touches ``:``-pseudo-headers or
    (on requests) ``host``; those are left out (a Host value becomes a host rewrite)."""
    lowered = name.lower()
    return not lowered.startswith(":") and not (request and lowered == "host")


def host_override(mods: ir.HeaderMods | None) -> str | None:
    """The Host a request header modifier sets (``set`` wins over ``add``), if any."""
    if mods is None:
        return None
    for pairs in (mods.set, mods.add):
        values = [value for name, value in pairs if name.lower() in ("host", ":authority")]
        if values:
            return values[-1]
    return None


def _header_options(mods: ir.HeaderMods, request: bool) -> list[base_pb2.HeaderValueOption]:
    actions = (
        (mods.set, base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD),
        (mods.add, base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD),
    )
    return [
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=name, value=value), append_action=action
        )
        for pairs, action in actions
        for name, value in pairs
        if _modifiable(name, request)
    ]


def _apply_header_mods(
    target: rc.Route | rc.WeightedCluster.ClusterWeight,
    request: ir.HeaderMods | None,
    response: ir.HeaderMods | None,
) -> None:
    if request is not None:
        target.request_headers_to_add.extend(_header_options(request, True))
        target.request_headers_to_remove.extend(n for n in request.remove if _modifiable(n, True))
    if response is not None:
        target.response_headers_to_add.extend(_header_options(response, False))
        target.response_headers_to_remove.extend(
            n for n in response.remove if _modifiable(n, False)
        )


# ---------------------------------------------------------------- paths


def _rewrite_substitution(path: str) -> str:
    # RE2 rewrite strings treat "\" as the escape character (\1 is a group).
    return path.replace("\\", "\\\\")


def _full_path(path: str) -> regex_pb2.RegexMatchAndSubstitute:
    """Replace the whole path; Envoy's regex rewrite leaves the query string alone."""
    return regex_pb2.RegexMatchAndSubstitute(
        pattern=_regex("^/.*$"), substitution=_rewrite_substitution(path)
    )


def prefix_replacement(
    match: ir.RouteMatch, replacement: str
) -> tuple[str | None, regex_pb2.RegexMatchAndSubstitute | None]:
    """Gateway API ReplacePrefixMatch as ``(prefix_rewrite, regex_rewrite)``, at most one set.

    Prefixes work on whole path elements and ignore a trailing ``/``: replacing
    ``/foo`` by ``/xyz`` maps ``/foo/bar`` to ``/xyz/bar``; by ``/`` (or ``""``) it maps
    ``/foo/bar`` to ``/bar`` and ``/foo`` to ``/`` (never ``//bar``).
    """
    matched = match.path if match.path_type in ("PathPrefix", "Exact") else "/"
    prefix = matched.rstrip("/")  # what route_match matches on
    new = replacement.rstrip("/")
    if not prefix and not new:
        return None, None  # "/" -> "/": nothing changes
    if new and prefix:
        # Envoy swaps exactly the matched prefix, which ends at an element boundary.
        return new, None
    if not new:
        pattern = "^" + re2_escape(prefix) + "/*"
        return None, regex_pb2.RegexMatchAndSubstitute(pattern=_regex(pattern), substitution="/")
    # Prefix "/": put the replacement in front of the whole path.
    return None, regex_pb2.RegexMatchAndSubstitute(
        pattern=_regex("^/"), substitution=_rewrite_substitution(new + "/")
    )


# ---------------------------------------------------------------- actions


def _redirect(
    redirect: ir.Redirect,
    match: ir.RouteMatch,
    listener_port: int,
    https: bool,
    exact_host: str | None = None,
) -> rc.RedirectAction:
    """A redirect; ports follow the Gateway API rules.

    The port is the explicit one, else the scheme's well-known port when the scheme
    changes, else the listener port; the Location leaves it out when it is the
    well-known port of the resulting scheme. Envoy keeps the request's Host (port
    included) unless told otherwise, so when the port must be left out and the
    virtual host serves one exact hostname, that hostname is set explicitly, which
    drops any port the client sent. (On wildcard hosts a client-sent port stays.)
    """
    code = _REDIRECT_CODES.get(redirect.status_code)
    if code is None:
        raise ValueError(f"unsupported redirect status code {redirect.status_code}")
    out = rc.RedirectAction(response_code=code)
    listener_scheme = "https" if https else "http"
    scheme = redirect.scheme or listener_scheme
    if redirect.scheme is not None:
        out.scheme_redirect = redirect.scheme
    if redirect.hostname is not None:
        out.host_redirect = redirect.hostname
    if redirect.port is not None:
        port = redirect.port
    elif redirect.scheme is not None:
        port = _WELL_KNOWN_PORTS.get(scheme, listener_port)
    else:
        port = listener_port
    if port != _WELL_KNOWN_PORTS.get(scheme):
        out.port_redirect = port
    elif redirect.hostname is None and exact_host is not None:
        out.host_redirect = exact_host
    if redirect.path_type == "ReplaceFullPath" and redirect.path is not None:
        out.path_redirect = redirect.path
    elif redirect.path_type == "ReplacePrefixMatch" and redirect.path is not None:
        prefix, regex = prefix_replacement(match, redirect.path)
        if prefix is not None:
            out.prefix_rewrite = prefix
        elif regex is not None:
            out.regex_rewrite.CopyFrom(regex)
    return out


def _fraction(numerator: int, denominator: int) -> percent_pb2.FractionalPercent:
    if denominator in _DENOMINATORS:
        return percent_pb2.FractionalPercent(
            numerator=numerator, denominator=_DENOMINATORS[denominator]
        )
    return percent_pb2.FractionalPercent(
        numerator=round(numerator * 1_000_000 / denominator),
        denominator=percent_pb2.FractionalPercent.MILLION,
    )


def _mirror(mirror: ir.Mirror) -> rc.RouteAction.RequestMirrorPolicy:
    # Mirrored requests keep their Host (Envoy appends "-shadow" by default).
    out = rc.RouteAction.RequestMirrorPolicy(
        cluster=mirror.cluster, disable_shadow_host_suffix_append=True
    )
    if mirror.denominator > 0 and mirror.numerator < mirror.denominator:
        out.runtime_fraction.default_value.CopyFrom(
            _fraction(max(mirror.numerator, 0), mirror.denominator)
        )
    return out


def retry_on(codes: tuple[int, ...]) -> str:
    """The ``retry_on`` conditions implied by the retriable status codes.

    Envoy itself answers 503 when it cannot connect or the stream is refused, and
    502/503/504 when the upstream resets or times out; those failures are retried
    when the matching code is listed. No codes: retry connection failures only.
    """
    conditions: list[str] = []
    if codes:
        conditions.append("retriable-status-codes")
    if not codes or 503 in codes:
        conditions += ["connect-failure", "refused-stream"]
    if not codes or {502, 503, 504} & set(codes):
        conditions.append("reset")
    return ",".join(conditions)


def _retry_policy(route: ir.Route) -> rc.RetryPolicy | None:
    retry = route.retry
    per_try = route.backend_timeout_s if route.timeout_s is not None or retry is not None else None
    if retry is None and per_try is None:
        return None
    out = rc.RetryPolicy()
    if retry is not None:
        out.retry_on = retry_on(retry.codes) if retry.triggers is None else ",".join(retry.triggers)
        out.retriable_status_codes.extend(sorted(set(retry.codes)))
        if retry.attempts is not None:
            out.num_retries.CopyFrom(wrappers_pb2.UInt32Value(value=retry.attempts))
        if retry.backoff_s is not None and retry.backoff_s > 0:
            out.retry_back_off.base_interval.CopyFrom(duration(retry.backoff_s))
            if retry.max_backoff_s is not None:
                out.retry_back_off.max_interval.CopyFrom(duration(retry.max_backoff_s))
        if retry.per_try_s is not None:
            per_try = retry.per_try_s
    if per_try is not None and per_try > 0:
        out.per_try_timeout.CopyFrom(duration(per_try))
    return out


def _timeout(route: ir.Route) -> float | None:
    """Route timeout: ``timeouts.request`` (0 disables it); with only ``backendRequest``
    set it bounds the single attempt, or, with retries, each attempt bounds itself
    (``per_try_timeout``) and the route timeout is off."""
    if route.timeout_s is not None:
        return route.timeout_s
    if route.backend_timeout_s is not None:
        return 0.0 if route.retry is not None else route.backend_timeout_s
    return None


def _abort_500() -> any_pb2.Any:
    """Per-filter config for the fault filter that answers every request with 500."""
    fault = fault_pb2.HTTPFault()
    fault.abort.http_status = 500
    fault.abort.percentage.numerator = 100
    fault.abort.percentage.denominator = percent_pb2.FractionalPercent.HUNDRED
    return pack(fault)


def _route_action(
    action: rc.RouteAction, route: ir.Route, clusters: tuple[ir.WeightedCluster, ...]
) -> None:
    """The forwarding action, set in ``action`` (a route's own: no copy made).

    The share of an invalid backendRef (IR cluster :data:`ir.INVALID_BACKEND_CLUSTER`) is a
    weighted cluster whose fault-filter override answers 500, as the Gateway API requires
    for requests that would have gone to an invalid backend.
    """
    action.SetInParent()
    single = clusters[0] if len(clusters) == 1 else None
    if (
        single is not None
        and single.request_headers is None
        and single.response_headers is None
        and single.cluster != ir.INVALID_BACKEND_CLUSTER
    ):
        action.cluster = _target(route, single.cluster)
    else:
        for backend in clusters:
            weight = rc.WeightedCluster.ClusterWeight(
                name=_target(route, backend.cluster),
                weight=wrappers_pb2.UInt32Value(value=backend.weight),
            )
            _apply_header_mods(weight, backend.request_headers, backend.response_headers)
            if backend.cluster == ir.INVALID_BACKEND_CLUSTER:
                weight.typed_per_filter_config[FAULT_FILTER].CopyFrom(_abort_500())
            backend_host = host_override(backend.request_headers)
            if backend_host is not None:
                weight.host_rewrite_literal = backend_host
            action.weighted_clusters.clusters.append(weight)
    host = host_override(route.request_headers)
    if host is not None:
        action.host_rewrite_literal = host
    rewrite = route.url_rewrite
    if rewrite is not None:
        if rewrite.hostname is not None:  # wins over a Host header modifier
            action.host_rewrite_literal = rewrite.hostname
        if rewrite.path is not None and rewrite.path_type == "ReplaceFullPath":
            action.regex_rewrite.CopyFrom(_full_path(rewrite.path))
        elif rewrite.path is not None and rewrite.path_type == "ReplacePrefixMatch":
            prefix, regex = prefix_replacement(route.match, rewrite.path)
            if prefix is not None:
                action.prefix_rewrite = prefix
            elif regex is not None:
                action.regex_rewrite.CopyFrom(regex)
    action.request_mirror_policies.extend(_mirror(m) for m in route.mirrors)
    timeout = _timeout(route)
    if timeout is not None:
        action.timeout.CopyFrom(duration(timeout))
    policy = _retry_policy(route)
    if policy is not None:
        action.retry_policy.CopyFrom(policy)
    if route.cluster_policy is not None and route.cluster_policy.lb == "ConsistentHash":
        action.hash_policy.append(_hash_policy(route.cluster_policy))
    # WebSocket upgrades are enabled on the HCM for every route.


def _target(route: ir.Route, cluster: str) -> str:
    """The cluster ``route`` sends a backend's share to: the copy with its policy's settings."""
    if route.cluster_policy is None or cluster == ir.INVALID_BACKEND_CLUSTER:
        return cluster
    return ir.policy_cluster(cluster, route.cluster_policy)


def _hash_policy(policy: ir.ClusterPolicy) -> rc.RouteAction.HashPolicy:
    """What a consistent hash keys on: the client's address, a header, or a cookie (which Envoy
    sets, with its TTL, for a client that has none)."""
    if policy.hash_on == "Header":
        return rc.RouteAction.HashPolicy(
            header=rc.RouteAction.HashPolicy.Header(header_name=policy.hash_name)
        )
    if policy.hash_on == "Cookie":
        cookie = rc.RouteAction.HashPolicy.Cookie(name=policy.hash_name)
        if policy.hash_cookie_ttl_s is not None:
            cookie.ttl.CopyFrom(duration(policy.hash_cookie_ttl_s))
        cookie.attributes.extend(
            rc.RouteAction.HashPolicy.CookieAttribute(name=name, value=value)
            for name, value in policy.hash_cookie_attributes
        )
        return rc.RouteAction.HashPolicy(cookie=cookie)
    return rc.RouteAction.HashPolicy(
        connection_properties=rc.RouteAction.HashPolicy.ConnectionProperties(source_ip=True)
    )


def _origin_matcher(origin: str) -> string_pb2.StringMatcher:
    """``*`` matches every origin; ``https://*.example.com`` matches any subdomain."""
    if origin == "*":
        return string_pb2.StringMatcher(safe_regex=_regex(".*"))
    pattern = origin_regex(origin)
    if pattern is not None:
        return string_pb2.StringMatcher(safe_regex=_regex(pattern))
    return string_pb2.StringMatcher(exact=origin)


def cors_policy(cors: ir.CORS) -> cors_pb2.CorsPolicy:
    """The route's CORS policy. A preflight from an origin that is not allowed is answered by
    Envoy (without CORS headers) instead of reaching the backend."""
    out = cors_pb2.CorsPolicy(
        allow_origin_string_match=[_origin_matcher(o) for o in cors.allow_origins],
        allow_methods=", ".join(cors.allow_methods),
        allow_headers=", ".join(cors.allow_headers),
        expose_headers=", ".join(cors.expose_headers),
        max_age="" if cors.max_age_s is None else str(cors.max_age_s),
        forward_not_matching_preflights=wrappers_pb2.BoolValue(value=False),
    )
    if cors.allow_credentials:
        out.allow_credentials.CopyFrom(wrappers_pb2.BoolValue(value=True))
    return out


def session_config(session: ir.Session) -> ss_pb2.StatefulSessionPerRoute:
    """A rule's session for the stateful session filter: Envoy keeps the address of the endpoint
    that answered in the cookie (or header), and sends the next requests that carry it there
    while that endpoint is in the cluster (not strict: otherwise it picks another, and says so
    in a new cookie or header). A cookie with a TTL carries it as Max-Age and in its value,
    where Envoy checks it."""
    state: ss_cookie_pb2.CookieBasedSessionState | ss_header_pb2.HeaderBasedSessionState
    if session.type == "Header":
        state = ss_header_pb2.HeaderBasedSessionState(name=session.name)
        extension = "envoy.http.stateful_session.header"
    else:
        cookie = cookie_pb2.Cookie(name=session.name, path=session.path)
        if session.ttl_s:
            cookie.ttl.CopyFrom(duration(session.ttl_s))
        state = ss_cookie_pb2.CookieBasedSessionState(cookie=cookie)
        extension = "envoy.http.stateful_session.cookie"
    packed = pack(state)
    return ss_pb2.StatefulSessionPerRoute(
        stateful_session=ss_pb2.StatefulSession(
            session_state=extension_pb2.TypedExtensionConfig(name=extension, typed_config=packed)
        )
    )


def route(r: ir.Route, listener_port: int, https: bool, exact_host: str | None = None) -> rc.Route:
    """One Envoy route; ``exact_host`` is the virtual host's hostname when it serves exactly one."""
    out = rc.Route(name=r.name)
    route_match(out.match, r.match)
    # A Gateway API route's identity: logged, counted and timed per route.
    telemetry.route_metadata(out.metadata, r.name)
    backends = tuple(b for b in r.backends if b.weight > 0)
    if r.redirect is not None:
        out.redirect.CopyFrom(_redirect(r.redirect, r.match, listener_port, https, exact_host))
    elif r.direct_status is not None:
        out.direct_response.status = r.direct_status
    elif backends:
        _route_action(out.route, r, backends)
    else:
        # No backend can take traffic (none given, all invalid, or all weight 0).
        out.direct_response.status = 500
    _apply_header_mods(out, r.request_headers, r.response_headers)
    if r.cors is not None:
        out.typed_per_filter_config[CORS_FILTER].CopyFrom(pack(cors_policy(r.cors)))
    if r.ext_auth is not None:
        out.typed_per_filter_config[extauth.filter_name(r.ext_auth)].CopyFrom(
            extauth.enable(r.ext_auth)
        )
    if r.session is not None and out.HasField("route"):
        out.typed_per_filter_config[SESSION_FILTER].CopyFrom(pack(session_config(r.session)))
    if r.rate_limit is not None:
        out.typed_per_filter_config[LOCAL_RATELIMIT_FILTER].CopyFrom(
            pack(local_rate_limit(r.rate_limit))
        )
    for name, config in (
        *security.per_route(r).items(),
        *compression.per_route(r).items(),
        *responseoverride.per_route(r).items(),
    ):
        out.typed_per_filter_config[name].CopyFrom(config)
    compression.remove_accept_encoding(r, out)
    return out


def local_rate_limit(limit: ir.LocalRateLimit) -> local_rate_limit_pb2.LocalRateLimit:
    """A route's token buckets: its own (``requests`` tokens, all refilled every ``unit_s``
    seconds; none: as good as unlimited), taken from by the requests no rule picks, and one
    descriptor per rule with selectors (a wildcard entry, of a ``Distinct`` header or address,
    makes a bucket per value; in shadow mode when the rule is; a request taking its ``cost``);
    enabled and enforced for every request (429 when a bucket it takes a token from is empty).
    The answers carry the draft-03 x-ratelimit-* headers of that bucket as the route's
    ``x_ratelimit_headers`` and the rule's ``headers_option`` say."""
    always = base_pb2.RuntimeFractionalPercent(
        default_value=percent_pb2.FractionalPercent(
            numerator=100, denominator=percent_pb2.FractionalPercent.HUNDRED
        ),
    )
    out = local_rate_limit_pb2.LocalRateLimit(
        stat_prefix=LOCAL_RATELIMIT_STAT_PREFIX,
        token_bucket=_token_bucket(
            limit.requests if limit.requests is not None else _UNLIMITED, limit.unit_s
        ),
        filter_enabled=always,
        filter_enforced=always,
        enable_x_ratelimit_headers=ratelimit_pb2.DRAFT_VERSION_03
        if limit.x_ratelimit_headers
        else ratelimit_pb2.OFF,
        always_consume_default_token_bucket=wrappers_pb2.BoolValue(value=False),
    )
    for i, rule in enumerate(limit.rules):
        entries, actions = _rule_descriptor(i, rule)
        policy = rc.RateLimit(actions=actions)
        if rule.cost is not None:
            policy.hits_addend.number.value = rule.cost
        if rule.headers_option is not None:
            policy.MergeFromString(
                varint_field(_X_RATELIMIT_OPTION, _DRAFT_03 if rule.headers_option else _OFF)
            )
        out.rate_limits.append(policy)
        descriptor = ratelimit_pb2.LocalRateLimitDescriptor(
            entries=entries, token_bucket=_token_bucket(rule.requests, rule.unit_s)
        )
        if rule.shadow:
            descriptor.MergeFromString(varint_field(_SHADOW_MODE, 1))
        out.descriptors.append(descriptor)
        if any(not entry.value for entry in entries):  # a wildcard
            out.max_dynamic_descriptors.value = MAX_DISTINCT_CLIENTS
    return out


# Fields of Envoy 1.40's API that xds-protos does not have yet, written by number (Envoy reads
# them; the message keeps them as unknown fields): RateLimit.x_ratelimit_option (its enum:
# OFF, DRAFT_VERSION_03) and LocalRateLimitDescriptor.shadow_mode.
_X_RATELIMIT_OPTION, _OFF, _DRAFT_03 = 7, 1, 2
_SHADOW_MODE = 3


# The most buckets Envoy keeps per wildcard descriptor (the least recently used goes).
MAX_DISTINCT_CLIENTS = 10_000
# The largest bucket Envoy takes: a route whose limits all have client selectors.
_UNLIMITED = (1 << 32) - 1


def _token_bucket(requests: int, unit_s: int) -> token_bucket_pb2.TokenBucket:
    return token_bucket_pb2.TokenBucket(
        max_tokens=requests,
        tokens_per_fill=wrappers_pb2.UInt32Value(value=requests),
        fill_interval=duration(unit_s),
    )


def _rule_descriptor(
    i: int,
    rule: ir.RateLimitRule,
) -> tuple[list[ratelimit_pb2.RateLimitDescriptor.Entry], list[rc.RateLimit.Action]]:
    """The descriptor a request meeting rule ``i`` makes (entries without a value match any
    value: a bucket per value), and the actions making it."""
    entries: list[ratelimit_pb2.RateLimitDescriptor.Entry] = []
    actions: list[rc.RateLimit.Action] = []
    for j, (match, invert) in enumerate(rule.headers):
        key = f"rule-{i}-header-{j}"
        if match.type == "Distinct":
            actions.append(
                rc.RateLimit.Action(
                    request_headers=rc.RateLimit.Action.RequestHeaders(
                        header_name=match.name, descriptor_key=key
                    )
                )
            )
            entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key=key))
            continue
        matcher = rc.HeaderMatcher(
            name=match.name, string_match=_string_match(match), invert_match=invert
        )
        actions.append(
            rc.RateLimit.Action(
                header_value_match=rc.RateLimit.Action.HeaderValueMatch(
                    descriptor_key=key,
                    descriptor_value="1",
                    expect_match=wrappers_pb2.BoolValue(value=True),
                    headers=[matcher],
                )
            )
        )
        entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key=key, value="1"))
    for j, (match, invert) in enumerate(rule.query_params):
        key = f"rule-{i}-query-{j}"
        if match.type == "Distinct":
            actions.append(
                rc.RateLimit.Action(
                    query_parameters=rc.RateLimit.Action.QueryParameters(
                        query_parameter_name=match.name, descriptor_key=key
                    )
                )
            )
            entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key=key))
            continue
        actions.append(
            rc.RateLimit.Action(
                query_parameter_value_match=rc.RateLimit.Action.QueryParameterValueMatch(
                    descriptor_key=key,
                    descriptor_value="1",
                    expect_match=wrappers_pb2.BoolValue(value=not invert),
                    query_parameters=[
                        rc.QueryParameterMatcher(name=match.name, string_match=_string_match(match))
                    ],
                )
            )
        )
        entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key=key, value="1"))
    if rule.source is not None:
        length = int(rule.source.cidr.rsplit("/", 1)[1])
        masked = rc.RateLimit.Action.MaskedRemoteAddress()
        # The other family is masked to the full address: it never equals the range.
        if ":" in rule.source.cidr:
            masked.v6_prefix_mask_len.value = length
        else:
            masked.v4_prefix_mask_len.value = length
        actions.append(rc.RateLimit.Action(masked_remote_address=masked))
        entries.append(
            ratelimit_pb2.RateLimitDescriptor.Entry(
                key="masked_remote_address", value=rule.source.cidr
            )
        )
        if rule.source.distinct:
            actions.append(rc.RateLimit.Action(remote_address=rc.RateLimit.Action.RemoteAddress()))
            entries.append(ratelimit_pb2.RateLimitDescriptor.Entry(key="remote_address"))
    return entries, actions


# ---------------------------------------------------------------- backendRef redirects and rewrites


def _merge_rewrite(rule: ir.URLRewrite | None, own: ir.URLRewrite | None) -> ir.URLRewrite | None:
    """The rule's URLRewrite, then the backendRef's: what the latter sets wins, field by field."""
    if rule is None or own is None:
        return own if rule is None else rule
    keep_path = own.path_type is None
    return ir.URLRewrite(
        hostname=own.hostname if own.hostname is not None else rule.hostname,
        path_type=rule.path_type if keep_path else own.path_type,
        path=rule.path if keep_path else own.path,
    )


def backend_variants(r: ir.Route) -> list[tuple[ir.Route, int]] | None:
    """Split ``r`` when its backendRefs carry their own RequestRedirect or URLRewrite filters.

    Envoy's weighted clusters can rewrite only the Host, and cannot redirect, so the backends
    are grouped by those filters, in order: each group becomes a route of its own (a redirect,
    or forwarding to the group's clusters with the merged rewrite), paired with the group's
    total weight. ``None`` when no backendRef has such a filter (one route, as usual).
    """
    if r.redirect is not None or r.direct_status is not None:
        return None
    backends = [b for b in r.backends if b.weight > 0]
    if all(b.redirect is None and b.url_rewrite is None for b in backends):
        return None
    groups: dict[tuple[ir.Redirect | None, ir.URLRewrite | None], list[ir.WeightedCluster]] = {}
    for b in backends:
        plain = msgspec.structs.replace(b, redirect=None, url_rewrite=None)
        groups.setdefault((b.redirect, b.url_rewrite), []).append(plain)
    out: list[tuple[ir.Route, int]] = []
    for k, ((redirect, rewrite), members) in enumerate(groups.items()):
        name = r.name if len(groups) == 1 else f"{r.name}/backends/{k}"
        if redirect is not None:
            variant = msgspec.structs.replace(
                r, name=name, backends=(), redirect=redirect, mirrors=()
            )
        else:
            merged = _merge_rewrite(r.url_rewrite, rewrite)
            variant = msgspec.structs.replace(
                r, name=name, backends=tuple(members), url_rewrite=merged
            )
        out.append((variant, sum(b.weight for b in members)))
    return out


def pin_cookie(session: ir.Session) -> str:
    """The cookie that pins a cookie session to one of its rule's backendRefs: ``backend-`` and 12
    hex digits of the session cookie's name. Of one length whatever that name (up to 256 bytes), so
    the regex that finds it stays within Envoy's RE2 program size limit
    (gateweave.translate.regex)."""
    return "backend-" + hashlib.sha256(session.name.encode()).hexdigest()[:12]


def _pin_value(cluster: str) -> str:
    return hashlib.sha256(cluster.encode()).hexdigest()[:12]


def pinned_variants(r: ir.Route) -> list[ir.Route] | None:
    """A cookie session over several backendRefs: the routes that keep each client on its
    backendRef.

    Envoy's stateful session finds the endpoint only in the cluster the weights picked, so a
    second cookie names the backendRef: the route that picks by weight sets it (beside the
    session cookie), and, before it, one route per backendRef sends the requests that carry it
    to that backendRef alone, whatever the weights. A backendRef that goes takes its route
    with it: its clients are picked again by weight. ``None`` when nothing needs pinning.
    """
    session = r.session
    if (
        session is None
        or session.type != "Cookie"
        or r.redirect is not None
        or r.direct_status is not None
    ):
        return None
    backends = [b for b in r.backends if b.weight > 0 and b.cluster != ir.INVALID_BACKEND_CLUSTER]
    if len({b.cluster for b in backends}) < 2:
        return None
    cookie = pin_cookie(session)
    attributes = (
        f"; Path={session.path}"
        + (f"; Max-Age={int(session.ttl_s)}" if session.ttl_s else "")
        + "; HttpOnly"
    )
    pinned: list[ir.Route] = []
    picking: list[ir.WeightedCluster] = []
    for b in r.backends:
        if b not in backends:
            picking.append(b)
            continue
        value = _pin_value(b.cluster)
        pattern = f"(.*[;,] ?)?{re2_escape(cookie)}={value}([;,].*)?"
        match = msgspec.structs.replace(
            r.match,
            headers=(
                *r.match.headers,
                ir.StringMatch(name="cookie", type="RegularExpression", value=pattern),
            ),
        )
        pinned.append(
            msgspec.structs.replace(r, name=f"{r.name}/pin/{value}", match=match, backends=(b,))
        )
        mods = b.response_headers or ir.HeaderMods()
        set_cookie = ("set-cookie", f"{cookie}={value}{attributes}")
        picking.append(
            msgspec.structs.replace(
                b, response_headers=msgspec.structs.replace(mods, add=(*mods.add, set_cookie))
            )
        )
    return [*pinned, msgspec.structs.replace(r, backends=tuple(picking))]


def routes(
    r: ir.Route, listener_port: int, https: bool, exact_host: str | None = None
) -> list[rc.Route]:
    """The Envoy routes of one IR route: one, or one per group of :func:`backend_variants`
    (or, for a cookie session over several backendRefs, those of :func:`pinned_variants`).

    Groups share the match; all but the last also match on a ``runtime_fraction`` with the
    cumulative share of the weights so far. Envoy draws one random value per request and
    tests every route's fraction against it (``value % 1e6 < numerator``), so with
    cumulative numerators the k-th group gets exactly its share of the requests.
    """
    variants = backend_variants(r)
    if variants is None:
        pinned = pinned_variants(r)
        if pinned is not None:
            return [route(v, listener_port, https, exact_host) for v in pinned]
        return [route(r, listener_port, https, exact_host)]
    total = sum(weight for _, weight in variants)
    out: list[rc.Route] = []
    cumulative = 0
    for k, (variant, weight) in enumerate(variants):
        built = route(variant, listener_port, https, exact_host)
        cumulative += weight
        if k < len(variants) - 1:
            built.match.runtime_fraction.default_value.CopyFrom(
                percent_pb2.FractionalPercent(
                    numerator=round(cumulative * 1_000_000 / total),
                    denominator=percent_pb2.FractionalPercent.MILLION,
                )
            )
        out.append(built)
    return out


# Built virtual hosts and routes, memoised by their IR value (frozen IR Structs hash and
# compare by value), so rebuilding a Gateway after a one-route change builds one route.
# What is kept is wire bytes (compact, immutable), each route's once: a route as the
# repeated field it is in its virtual host, a virtual host as its field's tag, length and
# head followed by its routes' very bytes, a RouteConfiguration as its head, its virtual
# hosts' parts and a tail - concatenated only when sent (parsed once, by Envoy). Parsing is
# exact: the configuration serialises to the same bytes as one built message by message.
# Bounded (first in, first out: see _Memo).
VHOST_CACHE_SIZE = 16_384
ROUTE_CACHE_SIZE = 65_536

_V = TypeVar("_V")


class MemoInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class _Memo(Generic[_V]):
    """Values by key in a plain dict, at most ``maxsize``: past it the oldest entry goes
    (first in, first out; an entry still in use is built again when next asked for). An
    entry is one slot of the dict, where ``functools.lru_cache`` adds a link object and a
    tuple of the arguments to each (about 150 bytes: 4.7 MB at 10,000 routes)."""

    __slots__ = ("_entries", "hits", "maxsize", "misses")

    def __init__(self, maxsize: int) -> None:
        self._entries: dict[Hashable, _V] = {}
        self.maxsize = maxsize
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> _V | None:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: Hashable, value: _V) -> _V:
        entries = self._entries
        entries[key] = value
        if len(entries) > self.maxsize:  # (pop: safe should another thread drop it first)
            entries.pop(next(iter(entries)), None)
        return value

    def cache_info(self) -> MemoInfo:
        return MemoInfo(self.hits, self.misses, self.maxsize, len(self._entries))

    def cache_clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0


_ROUTES: _Memo[bytes] = _Memo(ROUTE_CACHE_SIZE)
_VHOSTS: _Memo[tuple[bytes, ...]] = _Memo(VHOST_CACHE_SIZE)

_VHOST_ROUTES = rc.VirtualHost.DESCRIPTOR.fields_by_name["routes"].number
_CONFIG_VHOSTS = route_pb2.RouteConfiguration.DESCRIPTOR.fields_by_name["virtual_hosts"].number


def _reads_listener(r: ir.Route) -> bool:
    """Whether the Envoy routes of ``r`` depend on its listener's port and scheme and its
    virtual host's exact hostname: only a redirect's defaults read them (:func:`_redirect`)."""
    return r.redirect is not None or any(b.redirect is not None for b in r.backends)


def _built_routes(r: ir.Route, listener_port: int, https: bool, exact_host: str | None) -> bytes:
    """The Envoy routes of ``r``, as ``VirtualHost.routes`` fields (memoised). Called with the
    listener's figures only for a route that reads them (:func:`_reads_listener`), else with
    none: a route served on several listeners (HTTP and HTTPS) is built and held once, keyed
    by the route alone."""
    key: Hashable = (
        r
        if listener_port == 0 and not https and exact_host is None
        else (r, listener_port, https, exact_host)
    )
    built = _ROUTES.get(key)
    if built is not None:
        return built
    out: list[bytes] = []
    for built in routes(r, listener_port, https, exact_host):
        payload = built.SerializeToString(deterministic=True)
        out += (length_tag(_VHOST_ROUTES, len(payload)), payload)
    return _ROUTES.put(key, b"".join(out))


def _virtual_host(vh: ir.VirtualHost, listener_port: int, https: bool) -> tuple[bytes, ...]:
    """``vh`` as a ``RouteConfiguration.virtual_hosts`` field, in parts: the field's tag,
    length and the host's head, then the bytes of each route (those the route cache holds).
    Memoised by value: keyed by ``vh`` alone when none of its routes reads the listener
    (:func:`_reads_listener`: its parts are then the same on every listener), as routes are
    (a key tuple less per entry)."""
    reads = [_reads_listener(r) for r in vh.routes]
    key: Hashable = (vh, listener_port, https) if any(reads) else vh
    parts = _VHOSTS.get(key)
    if parts is not None:
        return parts
    exact_host = _exact_host(vh)
    head = rc.VirtualHost(name=vh.name, domains=list(vh.domains)).SerializeToString(
        deterministic=True
    )
    body = [
        _built_routes(r, listener_port, https, exact_host)
        if read
        else _built_routes(r, 0, False, None)
        for r, read in zip(vh.routes, reads, strict=True)
    ]
    size = len(head) + sum(map(len, body))
    return _VHOSTS.put(key, (length_tag(_CONFIG_VHOSTS, size) + head, *body))


def virtual_host_field(vh: ir.VirtualHost, listener_port: int, https: bool) -> tuple[bytes, ...]:
    """``vh`` built as a ``RouteConfiguration.virtual_hosts`` field, in parts (memoised by
    value)."""
    return _virtual_host(vh, listener_port, https)


# Deterministic serialisation writes fields in field-number order: the name (1), then the
# virtual hosts (2), then ignore_port_in_host_matching (14) - so a RouteConfiguration's wire
# bytes are a head, its virtual host fields and a fixed tail.
assert (
    route_pb2.RouteConfiguration.DESCRIPTOR.fields_by_name["name"].number
    < _CONFIG_VHOSTS
    < route_pb2.RouteConfiguration.DESCRIPTOR.fields_by_name["ignore_port_in_host_matching"].number
)
_CONFIG_TAIL = route_pb2.RouteConfiguration(ignore_port_in_host_matching=True).SerializeToString(
    deterministic=True
)


def route_configuration_wire(
    name: str, virtual_hosts: Iterable[tuple[bytes, ...]]
) -> tuple[bytes, ...]:
    """The deterministic wire bytes of :func:`route_configuration`, in parts, from its
    virtual host fields (:func:`virtual_host_field`), without building the message or
    copying a byte: their concatenation is the RouteConfiguration."""
    head = route_pb2.RouteConfiguration(name=name).SerializeToString(deterministic=True)
    out = [head]
    for parts in virtual_hosts:
        out += parts
    out.append(_CONFIG_TAIL)
    return tuple(out)


def clear_caches() -> None:
    """Forget every memoised virtual host and route."""
    _VHOSTS.cache_clear()
    _ROUTES.cache_clear()


def route_configuration(
    config: ir.RouteConfig, listener_port: int, https: bool
) -> route_pb2.RouteConfiguration:
    """``listener_port``/``https`` describe the listener, for redirect defaults.

    Hosts match whatever port the client put in Host (``ignore_port_in_host_matching``),
    and the Host header reaches the backend unchanged, port included.
    """
    out = route_pb2.RouteConfiguration(name=config.name, ignore_port_in_host_matching=True)
    out.MergeFromString(
        b"".join(
            part for vh in config.virtual_hosts for part in _virtual_host(vh, listener_port, https)
        )
    )
    return out


def _exact_host(vh: ir.VirtualHost) -> str | None:
    return vh.domains[0] if len(vh.domains) == 1 and "*" not in vh.domains[0] else None
