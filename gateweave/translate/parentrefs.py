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
from gateweave.translate.hostnames import effective_hostnames

HOSTNAME_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute")

# Where a listener's verdict on a parentRef was decided, in the order the checks run.
SECTION, PORT, KIND, NAMESPACE, HOSTNAME, OK = "sectionName", "port", "kind", "namespace", "hostname", "ok"


@dataclass
class Verdict:
    listener: ListenerCtx
    stage: str  # OK when the listener takes the route, else the check that refused it
    why: str
    hosts: tuple[str, ...] | None = None  # OK only: hostnames served (None: no hostname semantics)


@dataclass
class ParentOutcome:
    """One parentRef that targets one of our parents."""

    ref: dict[str, Any]  # the parentRef as given, group/kind/namespace filled in
    gateway: GatewayCtx
    attached: list[tuple[ListenerCtx, tuple[str, ...] | None]] = field(default_factory=list)
    reason: str = c.R_ACCEPTED  # when nothing attached: the Accepted=False reason
    message: str = ""
    verdicts: list[Verdict] = field(default_factory=list)  # every listener considered (for explain)


class ParentIndex:
    def __init__(self, ctx: Ctx, gateways: list[GatewayCtx]) -> None:
        self.ctx = ctx
        self.gateways = {gw.key: gw for gw in gateways}
        self.accepted_sets: dict[tuple[str, str], list[ListenerCtx]] = {}
        for gw in gateways:
            for ls, listeners in gw.listener_sets:
                self.accepted_sets[(ls.metadata.namespace, ls.metadata.name)] = listeners

    def resolve(self, kind: str, route: Any, pref: m.ParentReference) -> ParentOutcome | None:
        """The outcome for one parentRef, or None when the parent is not ours."""
        route_ns = route.metadata.namespace
        ns = pref.namespace or route_ns
        if pref.group != m.GATEWAY_GROUP:
            return None
        ref: dict[str, Any] = {"group": pref.group, "kind": pref.kind, "namespace": ns, "name": pref.name}
        if pref.section_name is not None:
            ref["sectionName"] = pref.section_name
        if pref.port is not None:
            ref["port"] = pref.port
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
                return ParentOutcome(ref, gw, reason=c.R_NO_MATCHING_PARENT, message=f"ListenerSet {ns}/{pref.name} is not accepted")
            listeners = accepted
        else:
            return None
        out = ParentOutcome(ref, gw)
        if not gw.accepted:
            out.reason, out.message = c.R_NO_MATCHING_PARENT, f"Gateway {gw.name} is not accepted"
            return out
        verdicts = [self.judge(lc, kind, route, pref) for lc in listeners]
        out.verdicts = verdicts
        out.attached = [(v.listener, v.hosts) for v in verdicts if v.stage == OK]
        if out.attached:
            return out
        stages = {v.stage for v in verdicts}
        if stages <= {SECTION, PORT}:
            what = []
            if pref.section_name is not None:
                what.append(f"sectionName {pref.section_name}")
            if pref.port is not None:
                what.append(f"port {pref.port}")
            out.reason, out.message = c.R_NO_MATCHING_PARENT, f"no listener matches {' and '.join(what) or 'the parentRef'}"
        elif HOSTNAME in stages:
            out.reason, out.message = c.R_NO_MATCHING_LISTENER_HOSTNAME, "no listener hostname intersects the route's hostnames"
        else:
            out.reason, out.message = c.R_NOT_ALLOWED_BY_LISTENERS, f"no listener allows a {kind} from namespace {route.metadata.namespace}"
        return out

    def judge(self, lc: ListenerCtx, kind: str, route: Any, pref: m.ParentReference) -> Verdict:
        """Whether one listener takes the route for this parentRef, and the rule that decided it."""
        if pref.section_name is not None and lc.name != pref.section_name:
            return Verdict(lc, SECTION, f"sectionName {pref.section_name!r} does not name this listener")
        if pref.port is not None and lc.port != pref.port:
            return Verdict(lc, PORT, f"parentRef port {pref.port} is not the listener's port {lc.port}")
        if (m.GATEWAY_GROUP, kind) not in lc.supported_kinds:
            kinds = ", ".join(k for _, k in lc.supported_kinds) or "none"
            return Verdict(lc, KIND, f"the listener takes {kinds}, not {kind}")
        route_ns = route.metadata.namespace
        spec = lc.listener.allowed_routes.namespaces
        if not self._allows_namespace(lc, route_ns):
            return Verdict(lc, NAMESPACE, f"allowedRoutes.namespaces.from={spec.from_} does not admit namespace {route_ns}")
        policy = f"allowedRoutes.namespaces.from={spec.from_} admits namespace {route_ns}"
        if kind not in HOSTNAME_KINDS:
            return Verdict(lc, OK, policy)
        route_hosts = tuple(route.spec.hostnames)
        hosts = effective_hostnames(lc.hostname, route_hosts)
        shown = ", ".join(route_hosts) or "(any)"
        if hosts == ():
            return Verdict(lc, HOSTNAME, f"{policy}, but listener hostname {lc.hostname} does not intersect route hostnames {shown}")
        served = ", ".join(hosts) if hosts else "(any)"
        return Verdict(lc, OK, f"{policy}; listener hostname {lc.hostname or '(any)'} with route hostnames {shown} serves {served}", hosts)

    def _allows_namespace(self, lc: ListenerCtx, route_ns: str) -> bool:
        spec = lc.listener.allowed_routes.namespaces
        if spec.from_ == "All":
            return True
        if spec.from_ == "Same":
            return route_ns == lc.namespace
        if spec.from_ == "Selector":
            return spec.selector is not None and label_selector_matches(spec.selector, self.ctx.labels_of_namespace(route_ns))
        return False
