"""BackendTrafficPolicy ``rateLimit`` of type ``Local``, as Envoy Gateway does it with Envoy's
local_ratelimit filter.

A rule without ``clientSelectors`` (at most one) limits each route the policy governs to
``limit.requests`` per ``limit.unit`` (one token bucket per route on each Envoy, 429 beyond
it); a rule with ``clientSelectors`` limits the requests all of its selectors pick, by
headers and query parameters (``Exact``, ``RegularExpression``, ``invert``; ``Distinct``: a
bucket per value), by method (one of ``methods``), by path (``Exact``, ``PathPrefix``,
``RegularExpression``) and by the client's address (``sourceCIDR`` ``Exact``; ``Distinct``: a
bucket per address in the range). A request over any limit it meets gets 429; a request a rule with
selectors picks takes from that rule's buckets only, not from the rule without selectors (Envoy
Gateway's ``always_consume_default_token_bucket: false``).

Answers carry Envoy's draft-03 ``x-ratelimit-limit``, ``-remaining`` and ``-reset`` headers (of the
bucket the request took from), as Envoy Gateway sends them: ``xRateLimitHeaders: "Off"`` on a rule
turns them off for it (on the rule without selectors: for the route's bucket), ``DraftVersion03``
on for it; a ClientTrafficPolicy's ``headers.disableRateLimitHeaders`` turns them off on its
listeners, but for the rules with selectors that say ``DraftVersion03`` (effects.py applies it).
A rule with selectors may run in ``shadowMode`` (its bucket counts, but never answers 429) and
take ``cost.request.number`` tokens from its bucket per request (0: it only checks the bucket).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import specvalue
from gateweave.translate.regex import re2_error

FIELDS: frozenset[str] = frozenset(
    {
        "rateLimit",
        "rateLimit.type",
        "rateLimit.local",
        "rateLimit.local.rules",
        "rateLimit.local.rules.limit",
        "rateLimit.local.rules.limit.requests",
        "rateLimit.local.rules.limit.unit",
        "rateLimit.local.rules.clientSelectors",
        "rateLimit.local.rules.clientSelectors.headers",
        "rateLimit.local.rules.clientSelectors.headers.name",
        "rateLimit.local.rules.clientSelectors.headers.type",
        "rateLimit.local.rules.clientSelectors.headers.value",
        "rateLimit.local.rules.clientSelectors.headers.invert",
        "rateLimit.local.rules.clientSelectors.sourceCIDR",
        "rateLimit.local.rules.clientSelectors.sourceCIDR.value",
        "rateLimit.local.rules.clientSelectors.sourceCIDR.type",
        "rateLimit.local.rules.clientSelectors.sourceCIDR.invert",
        "rateLimit.local.rules.clientSelectors.methods",
        "rateLimit.local.rules.clientSelectors.methods.value",
        "rateLimit.local.rules.clientSelectors.methods.invert",
        "rateLimit.local.rules.clientSelectors.path",
        "rateLimit.local.rules.clientSelectors.path.type",
        "rateLimit.local.rules.clientSelectors.path.value",
        "rateLimit.local.rules.clientSelectors.path.invert",
        "rateLimit.local.rules.clientSelectors.queryParams",
        "rateLimit.local.rules.clientSelectors.queryParams.name",
        "rateLimit.local.rules.clientSelectors.queryParams.type",
        "rateLimit.local.rules.clientSelectors.queryParams.value",
        "rateLimit.local.rules.clientSelectors.queryParams.invert",
        "rateLimit.local.rules.shadowMode",
        "rateLimit.local.rules.xRateLimitHeaders",
        "rateLimit.local.rules.cost",
        "rateLimit.local.rules.cost.request",
        "rateLimit.local.rules.cost.request.from",
        "rateLimit.local.rules.cost.request.number",
    }
)

_UNIT_S = {
    "Second": 1,
    "Minute": 60,
    "Hour": 3600,
    "Day": 86400,
    "Week": 7 * 86400,
    "Month": 30 * 86400,
    "Year": 365 * 86400,
}


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


class _Method(msgspec.Struct, frozen=True):
    value: str
    invert: bool = False


class _Path(msgspec.Struct, frozen=True):
    value: str = "/"
    type: str = "PathPrefix"
    invert: bool = False


class _Selector(msgspec.Struct, frozen=True, rename="camel"):
    headers: tuple[_Header, ...] = ()
    source_cidr: _Source | None = msgspec.field(default=None, name="sourceCIDR")
    methods: tuple[_Method, ...] = ()
    path: _Path | None = None
    query_params: tuple[_Header, ...] = ()


class _CostOf(msgspec.Struct, frozen=True):
    from_: str = msgspec.field(default="Number", name="from")
    number: int | None = None


class _Cost(msgspec.Struct, frozen=True):
    request: _CostOf | None = None


class _Rule(msgspec.Struct, frozen=True, rename="camel"):
    limit: _Limit
    client_selectors: tuple[_Selector, ...] = ()
    shadow_mode: bool = False
    x_rate_limit_headers: str | None = None
    cost: _Cost | None = None


class _Local(msgspec.Struct, frozen=True):
    rules: tuple[_Rule, ...] = ()


class _RateLimit(msgspec.Struct, frozen=True):
    type: str = ""
    local: _Local | None = None


def problems(spec: dict[str, Any]) -> list[str]:
    """What in ``rateLimit`` cannot be applied (beyond the CRD's own rules)."""
    rl = specvalue.field(spec, "rateLimit", _RateLimit)
    if rl is None:
        return []
    if isinstance(rl, str):
        return [rl]
    # ``type`` is deprecated in Envoy Gateway v1.9 (``local`` says it): unset is Local too
    if rl.type not in ("", "Local") or rl.local is None:
        return [
            f"spec.rateLimit.type {rl.type or '(unset)'}: only Local rate limits are supported by "
            "gateweave"
        ]
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
            out.append(
                f"{at}.limit.unit {rule.limit.unit} must be a multiple of the unit of the rule "
                "without"
                " clientSelectors"
            )
        if not 0 < rule.limit.requests < 1 << 32:
            out.append(f"{at}.limit.requests {rule.limit.requests} is out of range")
        for j, selector in enumerate(rule.client_selectors):
            out.extend(_selector_problems(selector, f"{at}.clientSelectors[{j}]"))
        if sum(s.source_cidr is not None for s in rule.client_selectors) > 1:
            out.append(f"{at}.clientSelectors: gateweave supports one sourceCIDR per rule")
        out.extend(_rule_problems(rule, at))
    return out


_HEADER_OPTIONS = {"Off": False, "DraftVersion03": True}
# Envoy's largest hits_addend
_MAX_COST = 1_000_000_000


def _rule_problems(rule: _Rule, at: str) -> list[str]:
    """What is wrong with a rule's shadowMode, xRateLimitHeaders and cost."""
    out = []
    option = rule.x_rate_limit_headers
    if option is not None and option not in _HEADER_OPTIONS:
        out.append(f"{at}.xRateLimitHeaders {option!r} is not Off or DraftVersion03")
    if rule.shadow_mode and not rule.client_selectors:
        out.append(
            f"{at}.shadowMode: gateweave supports shadowMode on rules with clientSelectors only"
        )
    request = rule.cost.request if rule.cost is not None else None
    if request is not None:
        if not rule.client_selectors:
            out.append(f"{at}.cost: gateweave supports a cost on rules with clientSelectors only")
        if request.from_ != "Number" or request.number is None:
            out.append(f"{at}.cost.request: gateweave supports from: Number with a number only")
        elif not 0 <= request.number <= _MAX_COST:
            out.append(f"{at}.cost.request.number {request.number} is out of range (0-{_MAX_COST})")
    return out


_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


def _selector_problems(selector: _Selector, at: str) -> list[str]:
    out = []
    if not (
        selector.headers
        or selector.methods
        or selector.path
        or selector.source_cidr
        or selector.query_params
    ):
        out.append(f"{at}: a selector needs headers, methods, path, sourceCIDR or queryParams")
    for key, matches in (("headers", selector.headers), ("queryParams", selector.query_params)):
        for k, header in enumerate(matches):
            out.extend(_match_problems(header, f"{at}.{key}[{k}]"))
    for k, method in enumerate(selector.methods):
        if method.value not in _METHODS:
            out.append(
                f"{at}.methods[{k}].value {method.value!r} is not one of {', '.join(_METHODS)}"
            )
    if len({method.invert for method in selector.methods}) > 1:
        out.append(
            f"{at}.methods: gateweave supports methods all inverted or none (a request meets one "
            "of them)"
        )
    path = selector.path
    if path is not None:
        if path.type not in ("Exact", "PathPrefix", "RegularExpression"):
            out.append(f"{at}.path.type {path.type} is not Exact, PathPrefix or RegularExpression")
        elif path.type == "RegularExpression" and (err := re2_error(path.value)):
            out.append(f"{at}.path.value {path.value!r} is not a valid regular expression: {err}")
        elif path.type != "RegularExpression" and not path.value.startswith("/"):
            out.append(f"{at}.path.value {path.value!r} is not a path (starting with /)")
    source = selector.source_cidr
    if source is not None:
        if _network(source.value) is None:
            out.append(f"{at}.sourceCIDR.value {source.value!r} is not an IP range (CIDR)")
        if source.invert:
            out.append(f"{at}.sourceCIDR.invert true is not supported by gateweave")
        if source.type not in ("Exact", "Distinct"):
            out.append(f"{at}.sourceCIDR.type {source.type} is not Exact or Distinct")
    return out


def _match_problems(header: _Header, where: str) -> list[str]:
    """What is wrong with a header or query parameter selector."""
    out = []
    if header.type == "Distinct":
        if header.value is not None or header.invert:
            out.append(f"{where}: a Distinct match takes neither value nor invert")
    elif header.type in ("Exact", "RegularExpression"):
        if header.value is None:
            out.append(f"{where}.value is required for type {header.type}")
        elif header.type == "RegularExpression" and (err := re2_error(header.value)):
            out.append(f"{where}.value {header.value!r} is not a valid regular expression: {err}")
    else:
        out.append(f"{where}.type {header.type} is not a match type")
    return out


def _request_matches(selector: _Selector) -> list[tuple[ir.StringMatch, bool]]:
    """A selector's headers, methods and path as (match, invert) conditions on request headers
    (the pseudo-headers ``:method`` and ``:path``)."""
    out = [
        (ir.StringMatch(name=h.name.lower(), type=h.type, value=h.value or ""), h.invert)
        for h in selector.headers
    ]
    if selector.methods:
        methods = "|".join(method.value for method in selector.methods)
        out.append(
            (
                ir.StringMatch(name=":method", type="RegularExpression", value=methods),
                selector.methods[0].invert,
            )
        )
    path = selector.path
    if path is not None:
        out.append(
            (
                ir.StringMatch(
                    name=":path", type="RegularExpression", value=path_regex(path.type, path.value)
                ),
                path.invert,
            )
        )
    return out


def path_regex(path_type: str, value: str) -> str:
    """The (RE2, whole ``:path``) expression of a path selector: ``Exact`` and ``PathPrefix`` (whole
    path segments, a trailing ``/`` ignored) match the path before any query, as route matches
    do; a ``RegularExpression`` is the ``:path`` as sent, query included (Envoy Gateway's)."""
    if path_type == "RegularExpression":
        return value
    query = r"(\?.*)?"
    if path_type == "Exact":
        return re.escape(value) + query
    prefix = value.rstrip("/")
    return re.escape(prefix) + r"(/[^?]*)?" + query


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The range ``text`` names (host bits ignored, as Envoy masks the client's address)."""
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _local_rate_limit(local: _Local) -> ir.LocalRateLimit:
    default: _Rule | None = None
    rules: list[ir.RateLimitRule] = []
    for rule in local.rules:
        if not rule.client_selectors:
            default = rule
            continue
        # A rule's selectors are ANDed: one set of conditions (problems allows one sourceCIDR).
        headers = tuple(
            match for selector in rule.client_selectors for match in _request_matches(selector)
        )
        params = tuple(
            (ir.StringMatch(name=q.name, type=q.type, value=q.value or ""), q.invert)
            for selector in rule.client_selectors
            for q in selector.query_params
        )
        source = None
        for selector in rule.client_selectors:
            if selector.source_cidr is not None:
                source = ir.RateLimitSource(
                    cidr=str(_network(selector.source_cidr.value)),
                    distinct=selector.source_cidr.type == "Distinct",
                )
        rules.append(
            ir.RateLimitRule(
                requests=rule.limit.requests,
                unit_s=_UNIT_S[rule.limit.unit],
                headers=headers,
                query_params=params,
                source=source,
                headers_option=_HEADER_OPTIONS.get(rule.x_rate_limit_headers or ""),
                shadow=rule.shadow_mode,
                cost=rule.cost.request.number
                if rule.cost is not None and rule.cost.request is not None
                else None,
            )
        )
    return ir.LocalRateLimit(
        requests=default.limit.requests if default is not None else None,
        unit_s=_UNIT_S[default.limit.unit] if default is not None else 1,
        rules=tuple(rules),
        x_ratelimit_headers=default is None or default.x_rate_limit_headers != "Off",
    )


def without_headers(limit: ir.LocalRateLimit) -> ir.LocalRateLimit:
    """``limit`` on a listener whose ClientTrafficPolicy sets ``headers.disableRateLimitHeaders``:
    no x-ratelimit-* headers but for the rules saying ``DraftVersion03`` (Envoy Gateway's)."""
    if not limit.x_ratelimit_headers:
        return limit
    return msgspec.structs.replace(limit, x_ratelimit_headers=False)


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    rl = specvalue.field(spec, "rateLimit", _RateLimit)
    if isinstance(rl, _RateLimit) and rl.local is not None and rl.local.rules:
        route = msgspec.structs.replace(route, rate_limit=_local_rate_limit(rl.local))
    return route
