"""TLSRoute, TCPRoute and UDPRoute: every rule's backendRefs become one weighted set of clusters."""

from __future__ import annotations

from typing import Any

from gateweave.translate.attachment import RouteTranslation
from gateweave.translate.backends import BackendResolver
from gateweave.translate.filters import weighted_backends


def translate_l4_route(kind: str, route: Any, resolver: BackendResolver) -> RouteTranslation:
    """Connections go to the backends of all rules by weight; with no valid backend they are
    rejected.

    An invalid backendRef keeps its weight on the invalid-backend cluster, so that share of
    connections is refused (Gateway API: the proportion routed to an invalid backend is rejected).
    """
    tr = RouteTranslation(kind=kind, route=route)
    resolver.clusters.clear()
    tr.rule_count = len(route.spec.rules)
    refs = [ref for rule in route.spec.rules for ref in rule.backend_refs]
    tr.tcp = weighted_backends(tr, resolver, refs)
    if kind == "TLSRoute":
        # Behind a terminating listener, a BackendTLSPolicy makes Envoy re-encrypt to the backend.
        before = tr.refs_problem
        tr.tcp_terminated = weighted_backends(tr, resolver, refs, terminated=True)
        if (
            tr.refs_problem is not before
        ):  # only a policy differs: a problem of terminating listeners alone
            tr.terminated_refs_problem, tr.refs_problem = tr.refs_problem, before
    tr.keep_clusters(resolver.clusters)
    return tr
