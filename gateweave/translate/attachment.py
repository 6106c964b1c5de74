"""What the route side hands to the listeners and to the xDS IR assembly."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from gateweave import ir
from gateweave.translate import conditions as c

# A route's precedence key for one match: compared ascending, so the first sorts first.
# ``(shape, order, rule index, match index, IR route)``: ``shape``, six integers from the match
# (one shared instance per distinct shape in a translation: RuleMemo.shape; its first item tells
# the route kinds apart), and ``order``, the route's four-item sort key, are tuples of fixed
# lengths, so the key compares as their items laid out flat would. The IR route goes last: the
# elements before it are unique per route kind, route, rule and match, so the route is never
# compared and a plain sort orders the keys. The keys live only while a route's rules are
# translated (rules.translate_rules); once sorted (``keep_sorted``), a translation keeps its
# routes and their shapes only, and makes keys again where routes of several translations
# are merged (``precedence_keys``: the position in ``sorted_http`` for the rule and match
# indexes, which it orders alike). Memory at scale: docs/benchmarks.md, fifth and eighth rounds.
PrecedenceKey = tuple[Any, ...]
_FIRST, _LAST = itemgetter(0), itemgetter(-1)  # a key's shape, its IR route
# (namespace, Service name, port name); of any length for mypyc, which would make a new tuple
# per route of a fixed-length one (see context.SortKey)
ServicePortKey = tuple[str, ...]


@dataclass(slots=True)
class RouteTranslation:
    """One route translated once, independent of the listeners it attaches to."""

    kind: str
    route: Any
    order: tuple[Any, ...] = ()  # HTTPRoute/GRPCRoute: its sort_key (context.sort_key)
    # HTTPRoute/GRPCRoute: one IR route per match of each valid rule, in precedence order
    # (names are unique within one route; set by ``keep_sorted``).
    sorted_http: tuple[ir.Route, ...] = ()
    # TLSRoute/TCPRoute/UDPRoute: where connections go (empty: reject them).
    tcp: tuple[ir.WeightedCluster, ...] = ()
    # TLSRoute behind a TLS-terminating listener: the same backends, re-encrypted per
    # BackendTLSPolicy.
    tcp_terminated: tuple[ir.WeightedCluster, ...] = ()
    # The clusters it sends to, each once (a tuple: a dict of a few is three times the memory,
    # and a translation is kept per route); made in BackendResolver.clusters, kept when done.
    clusters: tuple[ir.Cluster, ...] = ()
    # HTTPRoute/GRPCRoute: names of the clusters its IR routes send to (backends and mirrors;
    # a name may repeat), collected as each rule's routes are made (``use_clusters``); a tuple
    # (the empty one shared), as a translation is kept per route.
    http_clusters: tuple[str, ...] = ()
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

    # The match shapes of ``sorted_http``'s precedence keys
    _shapes: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)

    def keep_sorted(self, keys: list[PrecedenceKey]) -> None:
        """Keep the IR routes of ``keys`` (this route's, emptied here) in precedence order
        (``sorted_http``) and their shapes, the keys being made again where needed
        (``precedence_keys``). Called as soon as a route's rules are translated: its keys are
        freed before the next route's are made, which then reuse their memory."""
        keys.sort()
        self.sorted_http = tuple(map(_LAST, keys))
        self._shapes = tuple(map(_FIRST, keys))
        keys.clear()

    def keep_clusters(self, made: dict[str, ir.Cluster]) -> None:
        """Keep the clusters ``made`` while translating this route (emptied here)."""
        if made:
            self.clusters = tuple(made.values())
            made.clear()

    def precedence_keys(self) -> list[PrecedenceKey]:
        """Keys of ``sorted_http`` that order it among the routes of other translations as
        its precedence keys would: ``(shape, order, position, IR route)``."""
        pairs = zip(self._shapes, self.sorted_http, strict=True)
        order = self.order
        return [(shape, order, i, r) for i, (shape, r) in enumerate(pairs)]


def use_clusters(
    used: list[str],
    backends: tuple[ir.WeightedCluster, ...],
    mirrors: tuple[ir.Mirror, ...],
    auth: ir.ExtAuth | None = None,
) -> None:
    """Add to ``used`` the clusters a rule's IR routes send to (``http_clusters`` to be), its
    auth service's too."""
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
