"""BackendTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths, its value checks (``problems``) and its effect on a route (``route_effect``) in its
own module, listed in ``_FEATURES`` here; effects.py calls :func:`route_effect` for every
route the policy governs, on each listener, through
:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`.

Implemented: local rate limits with client selectors (ratelimit.py); retry and the request
timeout (retry.py); load balancing, circuit breakers, the connect timeout and health checks of
the upstream clusters (upstream.py); compression of the answers (compression.py).
"""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.translate.policies import compression, ratelimit, retry, upstream

_FEATURES = (ratelimit, retry, upstream, compression)

IMPLEMENTED: frozenset[str] = frozenset().union(*(feature.FIELDS for feature in _FEATURES))


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (beyond the CRD's own rules)."""
    return [problem for feature in _FEATURES for problem in feature.problems(spec)]


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    """``route`` as a policy with ``spec`` (accepted, without problems) makes it."""
    for feature in _FEATURES:
        route = feature.route_effect(spec, route)
    return route
