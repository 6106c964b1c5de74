"""parentRef resolution: which of our listeners a route attaches to, or why it does not.

A parentRef of kind Gateway selects the Gateway's own listeners; one of kind ListenerSet
selects that ListenerSet's listeners (GEP-1713). Candidates are narrowed by ``sectionName``
and ``port``; a listener takes the route when its ``allowedRoutes`` admit the route's
namespace and kind, and (HTTP/GRPC/TLS routes) their hostnames intersect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx, label_selector_matches
from gateweave.translate.hostnames import intersect_lowered, only_name

HOSTNAME_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute")

# Where a listener's verdict on a parentRef was decided, in the order the checks run.
SECTION, PORT, KIND, NAMESPACE, HOSTNAME, OK = (
    "sectionName",
    "port",
    "kind",
    "namespace",
    "hostname",
    "ok",
)


@dataclass(slots=True)
class Verdict:
    listener: ListenerCtx
    stage: str  # OK when the listener takes the route, else the check that refused it
    # The sentence that explains it, or (hostname checks, one per route and listener) what it
    # is made of: only `gateweave explain` reads it, so it is written when read.
    reason: str | tuple[str, _Listener, _RouteHosts]
    hosts: tuple[str, ...] | None = None  # OK only: hostnames served (None: no hostname semantics)

    @property
    def why(self) -> str:
        if isinstance(self.reason, str):
            return self.reason
        policy, li, route_hosts = self.reason
        if self.stage == HOSTNAME:
            return (
                f"{policy}, but listener hostname {li.hostname} does not intersect route hostnames "
                f"{route_hosts.shown}"
            )
        served = ", ".join(self.hosts) if self.hosts else "(any)"
        return (
            f"{policy}; listener hostname {li.shown_hostname} with route hostnames "
            f"{route_hosts.shown} serves {served}"
        )


@dataclass(slots=True)
class ParentOutcome:
    """One parentRef that targets one of our parents."""

    pref: m.ParentReference
    namespace: str  # the parent's namespace (the parentRef's, else the route's)
    gateway: GatewayCtx
    attached: list[tuple[ListenerCtx, tuple[str, ...] | None]] = field(default_factory=list)
    not_accepted: c.Condition | None = None  # when nothing attached: why (Accepted=False)
    # Every listener considered, with the check that decided it: only an index made for
    # `gateweave explain` records them (see ParentIndex).
    verdicts: tuple[Verdict, ...] = ()

    @property
    def ref(self) -> dict[str, Any]:
        """The parentRef as the route status shows it: group, kind and namespace filled in."""
        return status_ref(self.pref, self.namespace)


def status_ref(pref: m.ParentReference, namespace: str) -> dict[str, Any]:
    """A parentRef as the route status shows it, ``namespace`` being its parent's."""
    ref: dict[str, Any] = {
        "group": pref.group,
        "kind": pref.kind,
        "namespace": namespace,
        "name": pref.name,
    }
    if pref.section_name is not None:
        ref["sectionName"] = pref.section_name
    if pref.port is not None:
        ref["port"] = pref.port
    return ref


class _Listener:
    """What the checks read of one listener, read once per ParentIndex."""

    __slots__ = (
        "hostname",
        "kinds",
        "kinds_text",
        "lc",
        "name",
        "namespaces",
        "port",
        "shown_hostname",
        "wild_suffix",
    )

    def __init__(self, lc: ListenerCtx) -> None:
        self.lc = lc
        self.name = lc.name
        self.port = lc.port
        self.kinds = frozenset(k for g, k in lc.supported_kinds if g == m.GATEWAY_GROUP)
        self.kinds_text = ", ".join(k for _, k in lc.supported_kinds) or "none"
        self.hostname = lc.hostname
        self.shown_hostname = lc.hostname or "(any)"
        # "*.example.com" -> ".example.com" (the names it covers end with it); None when not a
        # wildcard
        self.wild_suffix = (
            lc.hostname[1:] if lc.hostname is not None and lc.hostname.startswith("*.") else None
        )
        self.namespaces = lc.listener.allowed_routes.namespaces


# A listener's judgement before the route's hostnames are looked at: final (a Verdict), or
# admitted so far, the hostnames to decide (None, the listener, the policy sentence that admits it).
_Plan = tuple[Verdict | None, _Listener, str]


@dataclass(slots=True)
class _Plans:
    """The judgements of one list of listeners for one (kind, namespace, sectionName, port)."""

    listeners: list[ListenerCtx]  # kept alive: the plans are found by its id
    plans: list[_Plan]
    # Per listener in order, what resolve needs: the listener's facts when the route's
    # hostnames decide, the listener when it takes the route whatever they are, None when it
    # refused it.
    steps: list[_Listener | ListenerCtx | None]
    pending: bool  # some listener's verdict waits on the route's hostnames
    stages: frozenset[str]  # the stages of the final verdicts


class Shortcut:
    """One parentRef of kind Gateway to an accepted Gateway of ours, judged once per (route kind,
    route namespace, parentRef) as far as it goes without the route's hostnames: the commonest
    shape of a route, one parentRef, then attaches with :meth:`attached` alone
    (routes.judge_route). It gives exactly what :meth:`ParentIndex.resolve` gives."""

    __slots__ = ("fixed", "gateway", "namespace", "not_accepted", "pending")

    def __init__(self, gateway: GatewayCtx, namespace: str, plans: _Plans, why: c.Condition):
        self.gateway = gateway
        self.namespace = namespace  # the Gateway's (the parentRef's, else the route's)
        # Listeners whose verdict waits on the route's hostnames, in order; or (no hostname
        # semantics) the listeners that take the route whatever they are.
        self.pending = [s for s in plans.steps if isinstance(s, _Listener)]
        self.fixed = [(s, None) for s in plans.steps if isinstance(s, ListenerCtx)]
        self.not_accepted = why  # when no listener takes the route

    def attached(self, route: Any) -> list[tuple[ListenerCtx, tuple[str, ...] | None]]:
        """The listeners that take ``route`` (each once, in order), with the hostnames it serves
        on each: :meth:`ParentIndex.resolve`'s ``attached``."""
        if not self.pending:
            return list(self.fixed)  # (a plan's steps are all pending or all fixed: its kind)
        hosts: tuple[str, ...] = route.spec.hostnames
        out: list[tuple[ListenerCtx, tuple[str, ...] | None]] = []
        host = hosts[0] if len(hosts) == 1 else "*"
        if host[:1] != "*" and host.lower() == host:
            # One lowercase hostname, not a wildcard (_RouteHosts.on's commonest case inline):
            # a listener serves it when it has no hostname, the same one, or a wildcard covering
            # it; it is served as the route's own tuple.
            for li in self.pending:
                name = li.hostname
                suffix = li.wild_suffix
                if (
                    name is None
                    or name == host
                    or (suffix is not None and host.endswith(suffix) and len(host) > len(suffix))
                ):
                    out.append((li.lc, hosts))
            return out
        on = _RouteHosts(route).on
        for li in self.pending:
            got = on(li.hostname, li.wild_suffix)
            if got != ():
                out.append((li.lc, got))
        return out


class ParentIndex:
    """Resolves parentRefs against the listeners of one set of resolved Gateways.

    What does not depend on a route's hostnames (sectionName, port, kind, namespace) is judged
    once per (listeners, kind, namespace, sectionName, port) and shared; so an index must be
    rebuilt whenever the listeners or the namespaces' labels change.
    """

    def __init__(self, ctx: Ctx, gateways: list[GatewayCtx], *, explain: bool = False) -> None:
        self.ctx = ctx
        # Record every listener's verdict in the outcomes (`gateweave explain` shows them; a
        # translation needs only what attached, so it builds none).
        self.explain = explain
        self.gateways = {gw.key: gw for gw in gateways}
        self.accepted_sets: dict[tuple[str, str], list[ListenerCtx]] = {}
        for gw in gateways:
            for ls, listeners in gw.listener_sets:
                self.accepted_sets[(ls.metadata.namespace, ls.metadata.name)] = listeners
        # Per listener (by identity; the entry keeps the listener alive), built on first use.
        self._listeners: dict[int, _Listener] = {}
        # (id of a listener list, kind, route namespace, sectionName, port) ->
        # (that list, kept alive, and each listener's judgement before hostnames)
        self._plans: dict[tuple[int, str, str, str | None, int | None], _Plans] = {}
        # (route kind, route namespace, parentRef) -> its Shortcut, or None when the parentRef
        # is not of that shape (resolve then judges it).
        self.shortcuts: dict[tuple[str, str, m.ParentReference], Shortcut | None] = {}
        # Route statuses by what they are made of (routes.judge_route): routes with the same
        # parentRefs, outcomes and generation share one status value (never mutated).
        self.statuses: dict[Any, dict[str, Any]] = {}

    def forget_namespaces(self, namespaces: set[str]) -> None:
        """Drop the judgements of routes in ``namespaces`` (their labels changed: a listener's
        allowedRoutes selector may read them)."""
        self._plans = {k: v for k, v in self._plans.items() if k[2] not in namespaces}
        self.shortcuts = {k: v for k, v in self.shortcuts.items() if k[1] not in namespaces}

    def _listener(self, lc: ListenerCtx) -> _Listener:
        facts = self._listeners.get(id(lc))
        if facts is None:
            facts = self._listeners[id(lc)] = _Listener(lc)
        return facts

    def shortcut(self, kind: str, route_ns: str, pref: m.ParentReference) -> Shortcut | None:
        """The :class:`Shortcut` of a parentRef of a route of ``kind`` in ``route_ns``, when it
        has that shape (a Gateway of ours, accepted); remembered in ``shortcuts``."""
        key = (kind, route_ns, pref)
        if key in self.shortcuts:
            return self.shortcuts[key]
        found: Shortcut | None = None
        ns = pref.namespace or route_ns
        gw = self.gateways.get((ns, pref.name))
        if (
            pref.group == m.GATEWAY_GROUP
            and pref.kind == "Gateway"
            and gw is not None
            and gw.accepted
        ):
            plans = self._plans_of(gw.listeners, kind, route_ns, pref)
            found = Shortcut(gw, ns, plans, self._none_attached(plans, kind, route_ns, pref))
        self.shortcuts[key] = found
        return found

    def _plans_of(
        self, listeners: list[ListenerCtx], kind: str, route_ns: str, pref: m.ParentReference
    ) -> _Plans:
        key = (id(listeners), kind, route_ns, pref.section_name, pref.port)
        plans = self._plans.get(key)
        if plans is None:
            plans = self._plans[key] = self._plan(listeners, kind, route_ns, pref)
        return plans

    def resolve(self, kind: str, route: Any, pref: m.ParentReference) -> ParentOutcome | None:
        """The outcome for one parentRef, or None when the parent is not ours."""
        route_ns = route.metadata.namespace
        ns = pref.namespace or route_ns
        if pref.group != m.GATEWAY_GROUP:
            return None
        if pref.kind == "Gateway":
            gw = self.gateways.get((ns, pref.name))
            if gw is None:
                return None
            listeners = gw.listeners
        elif pref.kind == "ListenerSet":
            ls = self.ctx.snapshot.listener_sets.get((ns, pref.name))
            if ls is None:
                return None
            lp = ls.spec.parent_ref
            if lp.group != m.GATEWAY_GROUP or lp.kind != "Gateway":
                return None
            gw = self.gateways.get((lp.namespace or ns, lp.name))
            if gw is None:
                return None
            accepted = self.accepted_sets.get((ns, pref.name))
            if accepted is None or not gw.accepted:
                why = f"ListenerSet {ns}/{pref.name} is not accepted"
                return ParentOutcome(pref, ns, gw, not_accepted=c.route_no_matching_parent(why))
            listeners = accepted
        else:
            return None
        out = ParentOutcome(pref, ns, gw)
        if not gw.accepted:
            out.not_accepted = c.route_no_matching_parent(f"Gateway {gw.name} is not accepted")
            return out
        plans = self._plans_of(listeners, kind, route_ns, pref)
        attached = out.attached
        if plans.pending:
            on = _RouteHosts(route).on
            for step in plans.steps:
                if isinstance(step, _Listener):
                    got = on(step.hostname, step.wild_suffix)
                    if got != ():
                        attached.append((step.lc, got))
                elif step is not None:
                    attached.append((step, None))
        else:
            attached.extend([(lc, None) for lc in plans.steps if isinstance(lc, ListenerCtx)])
        if self.explain:
            route_hosts = _RouteHosts(route)
            out.verdicts = tuple(
                [
                    v0 if v0 is not None else _hostname_verdict(li, policy, route_hosts)
                    for v0, li, policy in plans.plans
                ]
            )
        if not attached:
            out.not_accepted = self._none_attached(plans, kind, route_ns, pref)
        return out

    @staticmethod
    def _none_attached(
        plans: _Plans, kind: str, route_ns: str, pref: m.ParentReference
    ) -> c.Condition:
        """Why no listener of ``plans`` takes a route (Accepted=False)."""
        stages = plans.stages | {HOSTNAME} if plans.pending else plans.stages
        if stages <= {SECTION, PORT}:
            what = []
            if pref.section_name is not None:
                what.append(f"sectionName {pref.section_name}")
            if pref.port is not None:
                what.append(f"port {pref.port}")
            return c.route_no_matching_parent(
                f"no listener matches {' and '.join(what) or 'the parentRef'}"
            )
        if HOSTNAME in stages:
            return c.route_no_matching_listener_hostname()
        return c.route_not_allowed_by_listeners(
            f"no listener allows a {kind} from namespace {route_ns}"
        )

    def _plan(
        self, listeners: list[ListenerCtx], kind: str, route_ns: str, pref: m.ParentReference
    ) -> _Plans:
        plans = [self._prejudge(self._listener(lc), kind, route_ns, pref) for lc in listeners]
        steps: list[_Listener | ListenerCtx | None] = []
        for v0, li, _ in plans:
            if v0 is None:
                steps.append(li)  # its hostnames decide
            elif v0.stage == OK:
                steps.append(v0.listener)  # a kind without hostname semantics: serves any host
            else:
                steps.append(None)  # refused
        return _Plans(
            listeners=listeners,
            plans=plans,
            steps=steps,
            pending=any(v0 is None for v0, _, _ in plans),
            stages=frozenset(v0.stage for v0, _, _ in plans if v0 is not None),
        )

    def judge(self, lc: ListenerCtx, kind: str, route: Any, pref: m.ParentReference) -> Verdict:
        """Whether one listener takes the route for this parentRef, and the rule that decided it."""
        v, li, policy = self._prejudge(self._listener(lc), kind, route.metadata.namespace, pref)
        return v if v is not None else _hostname_verdict(li, policy, _RouteHosts(route))

    def _prejudge(self, li: _Listener, kind: str, route_ns: str, pref: m.ParentReference) -> _Plan:
        """The checks that do not read the route's hostnames, in order: a refusal, the verdict of a
        kind without hostname semantics, or the listener and its policy sentence, pending
        hostnames."""
        lc = li.lc
        if pref.section_name is not None and li.name != pref.section_name:
            return (
                Verdict(
                    lc, SECTION, f"sectionName {pref.section_name!r} does not name this listener"
                ),
                li,
                "",
            )
        if pref.port is not None and li.port != pref.port:
            return (
                Verdict(
                    lc, PORT, f"parentRef port {pref.port} is not the listener's port {li.port}"
                ),
                li,
                "",
            )
        if kind not in li.kinds:
            return Verdict(lc, KIND, f"the listener takes {li.kinds_text}, not {kind}"), li, ""
        spec = li.namespaces
        if not self._allows_namespace(lc, route_ns):
            why = f"allowedRoutes.namespaces.from={spec.from_} does not admit namespace {route_ns}"
            return Verdict(lc, NAMESPACE, why), li, ""
        policy = f"allowedRoutes.namespaces.from={spec.from_} admits namespace {route_ns}"
        if kind not in HOSTNAME_KINDS:
            return Verdict(lc, OK, policy), li, policy
        return None, li, policy

    def _allows_namespace(self, lc: ListenerCtx, route_ns: str) -> bool:
        spec = lc.listener.allowed_routes.namespaces
        if spec.from_ == "All":
            return True
        if spec.from_ == "Same":
            return route_ns == lc.namespace
        if spec.from_ == "Selector":
            return spec.selector is not None and label_selector_matches(
                spec.selector, self.ctx.labels_of_namespace(route_ns)
            )
        return False


def _hostname_verdict(li: _Listener, policy: str, route_hosts: _RouteHosts) -> Verdict:
    """The last check: the hostnames the route serves on a listener that admits it otherwise."""
    hosts = route_hosts.on(li.hostname, li.wild_suffix)
    if hosts == ():
        return Verdict(li.lc, HOSTNAME, (policy, li, route_hosts))
    return Verdict(li.lc, OK, (policy, li, route_hosts), hosts)


class _RouteHosts:
    """A route's hostnames, read once for all the listeners one parentRef selects."""

    __slots__ = ("hosts", "lowered", "one", "wild_suffix")

    def __init__(self, route: Any) -> None:
        self.hosts: tuple[str, ...] = tuple(route.spec.hostnames)
        lowered = tuple([h.lower() for h in self.hosts])
        # Already lowercase (the usual case): the route's own tuple, which the results then share.
        self.lowered = self.hosts if lowered == self.hosts else lowered
        # The one hostname, lowercase, when there is exactly one (see only_name)
        self.one = only_name(self.lowered)
        # One wildcard hostname "*.example.com": ".example.com"
        one = self.one or ""
        self.wild_suffix = one[1:] if one.startswith("*.") else None

    @property
    def shown(self) -> str:
        return ", ".join(self.hosts) or "(any)"

    def on(self, listener: str | None, listener_suffix: str | None) -> tuple[str, ...] | None:
        """:func:`effective_hostnames` of these hostnames on a listener hostname
        (``listener_suffix``:
        its suffix when it is a wildcard); the single-hostname case of :func:`intersect` inline."""
        low = self.lowered
        if not low:
            return None if listener is None else (listener,)
        host = self.one
        if host is None:
            return intersect_lowered(listener, low)
        if listener is None or listener == host:
            return low
        if (
            listener_suffix is not None
            and host.endswith(listener_suffix)
            and len(host) > len(listener_suffix)
        ):
            return low
        suffix = self.wild_suffix
        if suffix is not None and listener.endswith(suffix) and len(listener) > len(suffix):
            return (listener,)
        return ()
