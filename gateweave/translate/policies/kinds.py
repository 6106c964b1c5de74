"""What differs between Envoy Gateway's policy kinds, for the attachment stage: what each may
target, how its status words name it, and which spec fields gateweave implements for it.

The feature modules (btp.py, ctp.py, security.py) own their kind's ``implemented`` paths (see
fields.py for their form): implementing a feature is adding its paths there and its effect
where the IR takes it, nothing in the attachment stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateweave.translate.policies import btp, ctp, security


@dataclass(frozen=True)
class PolicyKind:
    kind: str
    plural: str  # as Envoy Gateway's Overridden messages name them ("backendTrafficPolicies")
    targets: frozenset[str]  # target kinds of gateway.networking.k8s.io it may attach to
    implemented: frozenset[str]  # spec field paths gateweave implements (fields.py)
    problems: Callable[[dict[str, Any]], list[str]]  # what in those fields cannot be applied
    client_side: bool = (
        False  # ClientTrafficPolicy: Gateways, listeners and ListenerSets only, its own words
    )
    # (translation context, policy) -> (its effect, what cannot be applied): a kind whose features
    # read referenced objects (Secrets, ConfigMaps); the effect is kept on its PolicyReport.
    resolve: Callable[[Any, Any], tuple[Any, list[str]]] | None = None


_ROUTES = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"})

POLICY_KINDS: tuple[PolicyKind, ...] = (
    PolicyKind(
        "BackendTrafficPolicy",
        "backendTrafficPolicies",
        _ROUTES | {"Gateway", "ListenerSet"},
        btp.IMPLEMENTED,
        btp.problems,
        resolve=btp.resolve,
    ),
    PolicyKind(
        "ClientTrafficPolicy",
        "clientTrafficPolicies",
        frozenset({"Gateway", "ListenerSet"}),
        ctp.IMPLEMENTED,
        ctp.problems,
        client_side=True,
        resolve=ctp.resolve,
    ),
    PolicyKind(
        "SecurityPolicy",
        "securityPolicies",
        frozenset({"Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "TCPRoute"}),
        security.IMPLEMENTED,
        security.problems,
        resolve=security.resolve,
    ),
)
