"""BackendTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths, its value checks (``problems``) and its effect on a route (``route_effect``) in its
own module, listed in ``_FEATURES`` here; effects.py calls :func:`route_effect` for every
route the policy governs, on each listener, through
:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`.

Implemented: local rate limits with client selectors (ratelimit.py); retry and the request
timeout (retry.py); load balancing, circuit breakers, the connect timeout and health checks of
the upstream clusters (upstream.py); compression of the answers (compression.py); custom answers
for upstream statuses (responseoverride.py, whose ConfigMap bodies :func:`resolve` reads: its
result is the policy's ``PolicyReport.effect``).
"""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.translate.policies import (
    compression,
    ratelimit,
    responseoverride,
    retry,
    upstream,
)

_FEATURES = (ratelimit, retry, upstream, compression)

IMPLEMENTED: frozenset[str] = frozenset().union(
    *(feature.FIELDS for feature in _FEATURES), responseoverride.FIELDS
)

# What resolve makes of a policy: its response overrides (they read ConfigMaps).
Effect = tuple[ir.ResponseOverride, ...]


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (beyond the CRD's own rules)."""
    return [problem for feature in _FEATURES for problem in feature.problems(spec)]


def resolve(ctx: Any, policy: Any) -> tuple[Effect, list[str]]:
    """What the policy's features that read other objects make of it, and their problems."""
    spec = policy.spec if isinstance(policy.spec, dict) else {}
    return responseoverride.resolve(ctx, policy.metadata.namespace, spec)


def route_effect(spec: dict[str, Any], effect: Effect, route: ir.Route) -> ir.Route:
    """``route`` as a policy with ``spec`` (accepted, without problems) and its resolved
    ``effect`` makes it."""
    for feature in _FEATURES:
        route = feature.route_effect(spec, route)
    return responseoverride.route_effect(effect, route)
