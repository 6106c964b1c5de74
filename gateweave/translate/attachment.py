"""What the route side hands to the listeners and to the xDS IR assembly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateweave import ir
from gateweave.translate import conditions as c

# A route's precedence key for one match: compared ascending, so the first sorts first. Its last
# element is the IR route itself: the elements before it are unique per route kind, route,
# rule and match, so the route is never compared and a plain sort orders the entries.
PrecedenceKey = tuple[Any, ...]
ServicePortKey = tuple[str, str, str]  # (namespace, Service name, port name)


@dataclass(slots=True)
class RouteTranslation:
    """One route translated once, independent of the listeners it attaches to."""

    kind: str
    route: Any
    # HTTPRoute/GRPCRoute: one IR route per match of each valid rule, with its precedence key.
    http: list[PrecedenceKey] = field(default_factory=list)
    # TLSRoute/TCPRoute/UDPRoute: where connections go (empty: reject them).
    tcp: tuple[ir.WeightedCluster, ...] = ()
    # TLSRoute behind a TLS-terminating listener: the same backends, re-encrypted per
    # BackendTLSPolicy.
    tcp_terminated: tuple[ir.WeightedCluster, ...] = ()
    clusters: dict[str, ir.Cluster] = field(default_factory=dict)
    # HTTPRoute/GRPCRoute: names of the clusters its IR routes send to (backends and mirrors;
    # a name may repeat), added as each rule's routes are made.
    http_clusters: list[str] = field(default_factory=list)
    # Service ports it sends to (BackendTLSPolicy ancestors) and Envoy Gateway Backends it
    # refers to (their status), each once: tuples, as an incremental translation keeps one
    # translation per route (use_service, use_backend add to them).
    services: tuple[ServicePortKey, ...] = ()
    backends: tuple[tuple[str, str], ...] = ()
    refs_problem: c.Condition | None = None  # the first ResolvedRefs=False found
    # TLSRoute: a ResolvedRefs problem only behind a listener that terminates TLS (a backend's
    # BackendTLSPolicy cannot be met; behind passthrough no policy applies).
    terminated_refs_problem: c.Condition | None = None
    rule_count: int = 0
    invalid_rules: tuple[str, ...] = ()  # why each dropped rule was dropped
    # A rule was dropped for combining filters that cannot be: should every rule be dropped,
    # the route is not Accepted for IncompatibleFilters (else UnsupportedValue).
    incompatible_filters: bool = False
    rejected: str = ""  # left out whole: the data plane rejects it (TranslateOptions.rejected)

    def drop_rule(self, label: str, message: str, incompatible_filters: bool) -> None:
        """Record a rule that cannot be implemented (the route becomes PartiallyInvalid)."""
        self.invalid_rules += (f"{label}: {message}",)
        self.incompatible_filters = self.incompatible_filters or incompatible_filters

    def use_service(self, port: ServicePortKey) -> None:
        if port not in self.services:
            self.services += (port,)

    def use_backend(self, backend: tuple[str, str]) -> None:
        if backend not in self.backends:
            self.backends += (backend,)

    def note_refs(self, problem: c.Condition) -> None:
        if self.refs_problem is None:
            self.refs_problem = problem

    @property
    def all_rules_invalid(self) -> bool:
        return bool(self.rejected) or (
            self.rule_count > 0 and len(self.invalid_rules) == self.rule_count
        )

    # Computed on first use by the xDS IR assembly, once the translation is complete.
    _sorted_http: tuple[ir.Route, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def sorted_http(self) -> tuple[ir.Route, ...]:
        """The IR routes in precedence order (names are unique within one route)."""
        if self._sorted_http is None:
            keys = self.http
            keys.sort()  # in place: nothing reads the order the rules made them in
            self._sorted_http = tuple([key[-1] for key in keys])
        return self._sorted_http

    def use_clusters(
        self,
        backends: tuple[ir.WeightedCluster, ...],
        mirrors: tuple[ir.Mirror, ...],
        auth: ir.ExtAuth | None = None,
    ) -> None:
        """Record the clusters a rule's IR routes send to (see ``http_clusters``), its auth
        service's too.
        """
        used = self.http_clusters
        for w in backends:
            used.append(w.cluster)
        for mi in mirrors:
            used.append(mi.cluster)
        if auth is not None:
            used.append(auth.cluster)


@dataclass(slots=True)
class Attachment:
    """A route attached to one listener (appended to ``ListenerCtx.routes``)."""

    translation: RouteTranslation
    hostnames: tuple[str, ...] | None  # the hostnames it serves on this listener; None: any
    # IR routes (by name) as the Envoy Gateway policies governing them on this listener
    # change them (translate/policies/effects.py); None: no policy applies.
    effects: dict[str, ir.Route] | None = None
    # the clusters those changed routes send to beyond the route's own (a SecurityPolicy's auth
    # service)
    effect_clusters: dict[str, ir.Cluster] | None = None

    @property
    def kind(self) -> str:
        return self.translation.kind

    @property
    def route(self) -> Any:
        return self.translation.route
