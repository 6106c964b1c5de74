"""BackendTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and its effect on a route to
:func:`route_effect` (effects.py calls it for every route the policy governs, on each
listener, through :meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).

Implemented:

* ``rateLimit`` of type ``Local``: a rule without ``clientSelectors`` limits each route the
  policy governs to ``limit.requests`` per ``limit.unit`` (one token bucket per route on
  each Envoy, 429 beyond it), as Envoy Gateway does with Envoy's local_ratelimit filter.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir

IMPLEMENTED: frozenset[str] = frozenset({
    "rateLimit", "rateLimit.type", "rateLimit.local", "rateLimit.local.rules",
    "rateLimit.local.rules.limit", "rateLimit.local.rules.limit.requests", "rateLimit.local.rules.limit.unit",
})

_UNIT_S = {"Second": 1, "Minute": 60, "Hour": 3600, "Day": 86400, "Month": 30 * 86400, "Year": 365 * 86400}


class _Limit(msgspec.Struct, frozen=True):
    requests: int
    unit: str


class _Rule(msgspec.Struct, frozen=True, rename="camel"):
    limit: _Limit


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


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (beyond the CRD's own rules)."""
    rl = _rate_limit(spec)
    if rl is None:
        return []
    if rl.type != "Local" or rl.local is None:
        return [f"spec.rateLimit.type {rl.type or '(unset)'}: only Local rate limits are supported by gateweave"]
    out = []
    if len(rl.local.rules) > 1:
        out.append("spec.rateLimit.local.rules: gateweave supports one rule (without clientSelectors)")
    for i, rule in enumerate(rl.local.rules):
        if rule.limit.unit not in _UNIT_S:
            out.append(f"spec.rateLimit.local.rules[{i}].limit.unit {rule.limit.unit} is not a unit")
        if not 0 < rule.limit.requests < 1 << 32:
            out.append(f"spec.rateLimit.local.rules[{i}].limit.requests {rule.limit.requests} is out of range")
    return out


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    """``route`` as a policy with ``spec`` (accepted, without problems) makes it."""
    rl = _rate_limit(spec)
    if rl is not None and rl.local is not None and rl.local.rules:
        limit = rl.local.rules[0].limit
        route = msgspec.structs.replace(route, rate_limit=ir.LocalRateLimit(requests=limit.requests, unit_s=_UNIT_S[limit.unit]))
    return route
