"""The policy attachment stage: Envoy Gateway's policies resolved to their targets, the winner
of every target chosen, and every policy's ``status.ancestors`` written as Envoy Gateway
writes them.

For each policy kind (kinds.py), in Envoy Gateway's order:

1. **Targets.** ``targetRef``/``targetRefs`` name objects in the policy's namespace (with a
   ``sectionName``: a Gateway's or ListenerSet's listener, a route's rule);
   ``targetSelectors`` pick Gateways, ListenerSets or routes by labels (in the policy's
   namespace, or others a ReferenceGrant opens), never a section. A target that is missing,
   or not ours (a Gateway of another class, a route attached to none of our Gateways), is
   left alone: no ancestor is written for it (another controller may own it), and
   ``explain`` reports it.
2. **Precedence.** Scopes are visited most specific first: route rules, routes, ListenerSet
   listeners, ListenerSets, Gateway listeners, Gateways (ClientTrafficPolicy: sections
   first, then whole Gateways and ListenerSets). Within a level policies go oldest first
   (creationTimestamp, then namespace/name). The first policy to reach a scope holds it;
   a later one gets ``Accepted=False`` reason ``Conflicted`` ("Unable to target ...,
   another ... has already attached to it"). A sectionName naming nothing is
   ``TargetNotFound``.
3. **Refusal.** A policy setting a field gateweave does not implement is ``Accepted=False``
   (reason ``Invalid``) naming every such field (fields.py) and is not applied; it still
   holds the scopes it reached.
4. **Overridden.** A policy holding a broader scope while narrower scopes under it (a
   listener, a ListenerSet, a route or rule attached through it) are held by other policies
   of its kind gets ``Overridden=True`` listing them, in Envoy Gateway's words.

Ancestors: a Gateway (with the sectionName for a listener target), a ListenerSet for
ListenerSet targets and routes attached through one, and for a route target each Gateway
of ours its parentRefs name (with their sectionName).

The result, :class:`PolicyIndex`, is what the feature modules read: the policy that governs
a route on a listener (:meth:`PolicyIndex.for_route`) or a listener
(:meth:`PolicyIndex.for_listener`), most specific scope first; a scope held by a refused
policy governs with nothing (its status says so).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.context import (
    Ctx,
    GatewayCtx,
    ListenerCtx,
    label_selector_matches,
    sort_key,
)
from gateweave.translate.policies import fields
from gateweave.translate.policies.kinds import POLICY_KINDS, PolicyKind

# Scope levels, most specific first.
RULE, ROUTE, LS_LISTENER, LS, GW_LISTENER, GW = range(6)
_ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
_LEVEL_NAMES = {
    RULE: "route rule",
    ROUTE: "route",
    LS_LISTENER: "ListenerSet listener",
    LS: "ListenerSet",
    GW_LISTENER: "Gateway listener",
    GW: "Gateway",
}
# Envoy Gateway's Overridden message: scopes grouped by level, in this order.
_OVERRIDE_LABELS = (
    (GW_LISTENER, "these gateway listeners"),
    (LS, "these listenersets"),
    (LS_LISTENER, "these listenerset listeners"),
    (ROUTE, "these routes"),
    (RULE, "these route rules"),
)


class Scope(NamedTuple):
    """A place a policy attaches to: ``kind`` is the target's kind, ``section`` a listener or rule
    name.
    """

    level: int
    kind: str
    namespace: str
    name: str
    section: str | None = None

    def __str__(self) -> str:
        base = f"{self.namespace}/{self.name}"
        return f"{base}/{self.section}" if self.section else base

    def describe(self) -> str:
        return f"{_LEVEL_NAMES[self.level]} {self}"


AncestorKey = tuple[str, str, str, str | None]  # (kind, namespace, name, sectionName)


@dataclass
class PolicyReport:
    """What happened to one policy (explain shows it)."""

    kind: str
    policy: Any
    refused: tuple[str, ...] = ()  # unimplemented fields it sets
    problems: tuple[str, ...] = ()  # what in its implemented fields cannot be applied
    effect: Any = None  # what its kind's ``resolve`` made of it (None: the kind has none)
    held: list[Scope] = field(default_factory=list)  # scopes it holds
    lost: list[tuple[Scope, str]] = field(default_factory=list)  # scopes it could not take, and why
    missing: list[str] = field(default_factory=list)  # targets not found, or not ours
    overridden_by: list[Scope] = field(default_factory=list)  # narrower scopes other policies hold
    # ancestor -> conditions by type (first set wins for Accepted, as Envoy Gateway does)
    ancestors: dict[AncestorKey, dict[str, c.Condition]] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        return not self.refused and not self.problems

    @property
    def refusal(self) -> str:
        """Why it is not applied ("" when it is)."""
        parts = [fields.refusal(self.refused)] if self.refused else []
        return "; ".join(parts + list(self.problems))


class _Route(NamedTuple):
    kind: str
    route: Any
    parents: tuple[tuple[AncestorKey, Scope], ...]  # (ancestor, the scope it attaches through)


@dataclass
class PolicyIndex:
    """Every policy's outcome, and which policy holds each scope (per policy kind)."""

    holders: dict[str, dict[Scope, PolicyReport]] = field(default_factory=dict)
    reports: list[PolicyReport] = field(default_factory=list)

    def holder(self, kind: str, scope: Scope) -> PolicyReport | None:
        return self.holders.get(kind, {}).get(scope)

    def for_listener(self, kind: str, lc: ListenerCtx) -> tuple[Scope, PolicyReport] | None:
        """The policy of ``kind`` that governs listener ``lc`` (its own, its ListenerSet's or its
        Gateway's), with the scope it holds; None when none does."""
        hit = self.held_for_listener(kind, lc)
        return hit if hit is not None and hit[1].applied else None

    def for_route(
        self, kind: str, route_kind: str, route: Any, rule: str | None, lc: ListenerCtx
    ) -> tuple[Scope, PolicyReport] | None:
        """The policy of ``kind`` that governs rule ``rule`` of ``route`` served on ``lc``:
        the rule's, the route's, then the listener's chain."""
        hit = self.held_for_route(kind, route_kind, route, rule, lc)
        return hit if hit is not None and hit[1].applied else None

    def held_for_route(
        self, kind: str, route_kind: str, route: Any, rule: str | None, lc: ListenerCtx
    ) -> tuple[Scope, PolicyReport] | None:
        """The most specific scope held above a route's rule on ``lc``, whether or not its
        holder is applied (explain shows a refused holder too)."""
        meta = route.metadata
        chain = [Scope(ROUTE, route_kind, meta.namespace, meta.name)]
        if rule:
            chain.insert(0, Scope(RULE, route_kind, meta.namespace, meta.name, rule))
        return self._held(kind, chain + listener_chain(lc))

    def held_for_listener(self, kind: str, lc: ListenerCtx) -> tuple[Scope, PolicyReport] | None:
        return self._held(kind, listener_chain(lc))

    def _held(self, kind: str, chain: list[Scope]) -> tuple[Scope, PolicyReport] | None:
        held = self.holders.get(kind)
        if held:
            for scope in chain:
                rep = held.get(scope)
                if rep is not None:
                    return scope, rep
        return None


def listener_chain(lc: ListenerCtx) -> list[Scope]:
    """The scopes above listener ``lc``, most specific first (its own, its ListenerSet's, its
    Gateway's)."""
    gw = lc.gateway.gateway.metadata
    chain: list[Scope] = []
    if lc.listener_set is not None:
        ls = lc.listener_set.metadata
        chain += [
            Scope(LS_LISTENER, "ListenerSet", ls.namespace, ls.name, lc.name),
            Scope(LS, "ListenerSet", ls.namespace, ls.name),
        ]
    else:
        chain.append(Scope(GW_LISTENER, "Gateway", gw.namespace, gw.name, lc.name))
    chain.append(Scope(GW, "Gateway", gw.namespace, gw.name))
    return chain


# What a policy's kind made of it, by (kind, namespace, name): (the policy object, the
# unimplemented fields it sets, its problems, its resolved effect).
Resolved = dict[tuple[str, str, str], tuple[Any, tuple[str, ...], tuple[str, ...], Any]]


def attach_policies(
    ctx: Ctx, gateways: list[GatewayCtx], resolved: Resolved | None = None
) -> PolicyIndex:
    """The stage: every policy of every kind attached, and its
    status written to ``ctx.statuses``.

    ``resolved``: what was made of each policy before, reused for the same policy object (the
    caller keeps it only while nothing a policy reads changed: the incremental translator),
    and filled for the others.
    """
    index = PolicyIndex()
    world = _World(ctx, gateways)
    for pk in POLICY_KINDS:
        policies = sorted(ctx.snapshot.by_kind(pk.kind).values(), key=sort_key)
        if not policies:
            continue
        held: dict[Scope, PolicyReport] = {}
        reports = [_report(ctx, pk, p, resolved) for p in policies]
        _Attacher(world, pk, held).run(reports)
        index.holders[pk.kind] = held
        index.reports.extend(reports)
        for rep in reports:
            meta = rep.policy.metadata
            ctx.statuses[(pk.kind, meta.namespace, meta.name)] = _status(ctx, rep)
    return index


def _report(ctx: Ctx, pk: PolicyKind, policy: Any, resolved: Resolved | None) -> PolicyReport:
    key = (pk.kind, policy.metadata.namespace, policy.metadata.name)
    hit = resolved.get(key) if resolved is not None else None
    if hit is not None and hit[0] is policy:
        _, refused, problems, effect = hit
    else:
        spec = spec_of(policy)
        found = pk.problems(spec)
        effect = None
        if pk.resolve is not None:
            effect, more = pk.resolve(ctx, policy)
            found = found + more
        refused = tuple(fields.unimplemented(spec, pk.implemented))
        problems = tuple(found)
        if resolved is not None:
            resolved[key] = (policy, refused, problems, effect)
    return PolicyReport(
        kind=pk.kind, policy=policy, refused=refused, problems=problems, effect=effect
    )


def spec_of(policy: Any) -> dict[str, Any]:
    return policy.spec if isinstance(policy.spec, dict) else {}


# ---------------------------------------------------------------- the objects policies can target


class _World:
    """Our Gateways, ListenerSets and routes, as targets."""

    def __init__(self, ctx: Ctx, gateways: list[GatewayCtx]) -> None:
        self.ctx = ctx
        self.gateways: dict[tuple[str, str], GatewayCtx] = {gw.key: gw for gw in gateways}
        self.listeners: dict[tuple[str, str], set[str]] = {
            gw.key: {lc.name for lc in gw.listeners} for gw in gateways
        }
        # ListenerSet -> (its Gateway, its listener names), accepted ones of our Gateways
        self.listener_sets: dict[tuple[str, str], tuple[tuple[str, str], set[str]]] = {}
        for gw in gateways:
            for ls, lcs in gw.listener_sets:
                self.listener_sets[(ls.metadata.namespace, ls.metadata.name)] = (
                    gw.key,
                    {lc.name for lc in lcs},
                )
        self.routes: dict[tuple[str, str, str], _Route] = {}
        for kind in _ROUTE_KINDS:
            for (ns, name), route in ctx.snapshot.by_kind(kind).items():
                parents = self._parents(route)
                if parents:
                    self.routes[(kind, ns, name)] = _Route(kind, route, parents)

    def _parents(self, route: Any) -> tuple[tuple[AncestorKey, Scope], ...]:
        out: list[tuple[AncestorKey, Scope]] = []
        ns = route.metadata.namespace
        for ref in route.spec.parent_refs:
            group = ref.group if ref.group is not None else m.GATEWAY_GROUP
            kind = ref.kind or "Gateway"
            key = (ref.namespace or ns, ref.name)
            if group != m.GATEWAY_GROUP:
                continue
            if kind == "Gateway" and key in self.gateways:
                level = GW_LISTENER if ref.section_name else GW
                out.append(
                    (
                        ("Gateway", key[0], key[1], ref.section_name),
                        Scope(level, "Gateway", key[0], key[1], ref.section_name),
                    )
                )
            elif kind == "ListenerSet" and key in self.listener_sets:
                level = LS_LISTENER if ref.section_name else LS
                out.append(
                    (
                        ("ListenerSet", key[0], key[1], ref.section_name),
                        Scope(level, "ListenerSet", key[0], key[1], ref.section_name),
                    )
                )
        return tuple(dict.fromkeys(out))

    def labels(self, kind: str, key: tuple[str, str]) -> dict[str, str] | None:
        """Labels of a target of ours, None when it is not one."""
        if kind == "Gateway":
            gw = self.gateways.get(key)
            return dict(gw.gateway.metadata.labels) if gw is not None else None
        if kind == "ListenerSet":
            ls = self.ctx.snapshot.listener_sets.get(key)
            return (
                dict(ls.metadata.labels) if ls is not None and key in self.listener_sets else None
            )
        hit = self.routes.get((kind, key[0], key[1]))
        return dict(hit.route.metadata.labels) if hit is not None else None

    def candidates(self, kind: str) -> list[tuple[str, str]]:
        if kind == "Gateway":
            return sorted(self.gateways)
        if kind == "ListenerSet":
            return sorted(self.listener_sets)
        return sorted((ns, name) for (k, ns, name) in self.routes if k == kind)


def _targeting(policy: Any) -> m.PolicyTargeting | None:
    try:
        return msgspec.convert(spec_of(policy), m.PolicyTargeting, strict=False)
    except msgspec.ValidationError:
        return None


def targets_of(world: _World, pk: PolicyKind, policy: Any) -> tuple[list[Scope], list[str]]:
    """The scopes a policy names (targetRef(s) and targetSelectors, without repeats), and the
    targets it names that are missing or not ours."""
    targeting = _targeting(policy)
    if targeting is None:
        return [], []
    ns = policy.metadata.namespace
    scopes: list[Scope] = []
    missing: list[str] = []
    refs = (
        (targeting.target_ref,) if targeting.target_ref is not None else ()
    ) + targeting.target_refs
    for sel in targeting.target_selectors:
        if sel.group != m.GATEWAY_GROUP or sel.kind not in pk.targets:
            continue
        want = m.LabelSelector(
            match_labels=sel.match_labels, match_expressions=sel.match_expressions
        )
        for key in world.candidates(sel.kind):
            if not _selector_namespace_ok(world.ctx, pk, ns, sel, sel.kind, key):
                continue
            labels = world.labels(sel.kind, key)
            if labels is not None and label_selector_matches(want, labels):
                scopes.append(_scope(sel.kind, key, None))
    for ref in refs:
        if ref.group != m.GATEWAY_GROUP or ref.kind not in pk.targets:
            missing.append(
                f"{ref.group}/{ref.kind} {ns}/{ref.name}: not a target kind of {pk.kind}"
            )
            continue
        if world.labels(ref.kind, (ns, ref.name)) is None:
            missing.append(
                f"{ref.kind} {ns}/{ref.name}: not found, or not attached to a Gateway of ours"
            )
            continue
        scopes.append(_scope(ref.kind, (ns, ref.name), ref.section_name))
    return list(dict.fromkeys(scopes)), missing


def named_targets(policy: Any) -> tuple[frozenset[tuple[str, str, str]], frozenset[str]]:
    """The (kind, namespace, name) a policy's targetRef(s) name, and the kinds its
    targetSelectors pick from: a change of a route neither names nor selects by kind leaves
    the policy's attachment as it was (the incremental translator's invalidation)."""
    targeting = _targeting(policy)
    if targeting is None:
        return frozenset(), frozenset()
    ns = policy.metadata.namespace
    refs = (
        (targeting.target_ref,) if targeting.target_ref is not None else ()
    ) + targeting.target_refs
    return (
        frozenset((ref.kind, ns, ref.name) for ref in refs),
        frozenset(sel.kind for sel in targeting.target_selectors),
    )


def _selector_namespace_ok(
    ctx: Ctx, pk: PolicyKind, ns: str, sel: m.TargetSelector, kind: str, key: tuple[str, str]
) -> bool:
    where = sel.namespaces.from_ if sel.namespaces is not None else "Same"
    if where == "Same" or key[0] == ns:
        return key[0] == ns
    if where == "Selector":
        selector = sel.namespaces.selector if sel.namespaces is not None else None
        if not label_selector_matches(selector, ctx.labels_of_namespace(key[0])):
            return False
    elif where != "All":
        return False
    return ctx.reference_allowed(
        m.ENVOY_GATEWAY_GROUP, pk.kind, ns, m.GATEWAY_GROUP, kind, key[0], key[1]
    )


def _scope(kind: str, key: tuple[str, str], section: str | None) -> Scope:
    if kind == "Gateway":
        return Scope(GW_LISTENER if section else GW, kind, key[0], key[1], section)
    if kind == "ListenerSet":
        return Scope(LS_LISTENER if section else LS, kind, key[0], key[1], section)
    return Scope(RULE if section else ROUTE, kind, key[0], key[1], section)


# ---------------------------------------------------------------- precedence, conflicts, overrides


class _Attacher:
    def __init__(self, world: _World, pk: PolicyKind, held: dict[Scope, PolicyReport]) -> None:
        self.world = world
        self.pk = pk
        self.held = held
        self.children: dict[Scope, set[Scope]] = defaultdict(
            set
        )  # scope -> narrower scopes held under it

    def run(self, reports: list[PolicyReport]) -> None:
        targets: list[list[Scope]] = []
        for rep in reports:
            scopes, missing = targets_of(self.world, self.pk, rep.policy)
            rep.missing = missing
            targets.append(scopes)
        order = (
            (GW_LISTENER, LS_LISTENER, GW, LS)
            if self.pk.client_side
            else (RULE, ROUTE, LS_LISTENER, LS, GW_LISTENER, GW)
        )
        for level in order:
            for rep, scopes in zip(reports, targets, strict=True):
                for scope in scopes:
                    if scope.level == level:
                        self._take(rep, scope)
        for scope, rep in sorted(self.held.items()):
            self._overridden(rep, scope)

    # -- one target
    def _take(self, rep: PolicyReport, scope: Scope) -> None:
        ancestors = self._ancestors(scope)
        problem = self._section_problem(scope)
        if problem is None:
            holder = self.held.get(scope)
            if holder is not None and holder is not rep:
                problem = c.eg_policy_conflicted(self._conflict_message(scope))
        if problem is not None:
            rep.lost.append((scope, problem.message))
            for anc in ancestors:
                rep.ancestors.setdefault(anc, {}).setdefault(c.ACCEPTED, problem)
            return
        self.held[scope] = rep
        rep.held.append(scope)
        self._record_parents(scope)
        accepted = c.eg_policy_accepted() if rep.applied else c.eg_policy_invalid(rep.refusal)
        for anc in ancestors:
            rep.ancestors.setdefault(anc, {}).setdefault(c.ACCEPTED, accepted)

    def _ancestors(self, scope: Scope) -> list[AncestorKey]:
        if scope.level in (GW, GW_LISTENER, LS, LS_LISTENER):
            return [(scope.kind, scope.namespace, scope.name, scope.section)]
        route = self.world.routes[(scope.kind, scope.namespace, scope.name)]
        return [anc for anc, _ in route.parents]

    def _section_problem(self, scope: Scope) -> c.Condition | None:
        if scope.section is None:
            return None
        key = (scope.namespace, scope.name)
        if scope.level == GW_LISTENER and scope.section not in self.world.listeners.get(key, set()):
            return c.eg_policy_target_not_found(
                f"No section name {scope.section} found for Gateway {scope.namespace}/{scope.name}"
            )
        if scope.level == LS_LISTENER and scope.section not in self.world.listener_sets[key][1]:
            return c.eg_policy_target_not_found(
                f"ListenerSet {scope.namespace}/{scope.name} does not have a listener named "
                f'"{scope.section}"'
            )
        if scope.level == RULE:
            route = self.world.routes[(scope.kind, scope.namespace, scope.name)].route
            names = {getattr(rule, "name", None) for rule in getattr(route.spec, "rules", ())}
            if scope.section not in names:
                return c.eg_policy_target_not_found(
                    f"No section name {scope.section} found for {scope.kind} "
                    f"{scope.namespace}/{scope.name}"
                )
        return None

    def _conflict_message(self, scope: Scope) -> str:
        kind = self.pk.kind
        if self.pk.client_side:
            if scope.section:
                return (
                    f"Unable to target section of {scope.name}, another {kind} has already "
                    "attached to it"
                )
            return (
                f"Unable to target {scope.kind} {scope.name}, another {kind} has already attached "
                "to it"
            )
        if scope.level == GW_LISTENER:
            what = f"Listener {scope.namespace}/{scope.name}/{scope.section}"
        elif scope.level == LS_LISTENER:
            what = f"Listener {scope.name}/{scope.section}"
        elif scope.level == RULE:
            what = f"RouteRule {scope.name}/{scope.section}"
        else:
            what = f"{scope.kind} {scope.name}"
        return f"Unable to target {what}, another {kind} has already attached to it"

    def _record_parents(self, scope: Scope) -> None:
        """Record ``scope`` under every broader scope it narrows (for Overridden)."""
        parents: list[Scope] = []
        if scope.level in (RULE, ROUTE):
            route = self.world.routes[(scope.kind, scope.namespace, scope.name)]
            for _, through in route.parents:
                parents += self._chain_above(through, include=True)
            if scope.level == RULE:
                parents.append(Scope(ROUTE, scope.kind, scope.namespace, scope.name))
        else:
            parents = self._chain_above(scope, include=False)
        for parent in parents:
            self.children[parent].add(scope)

    def _chain_above(self, scope: Scope, *, include: bool) -> list[Scope]:
        """The Gateway-side scopes at and above ``scope`` (a route attached through a
        listener is under that listener and its Gateway; through the whole Gateway, under
        the Gateway and each of its listeners)."""
        out = [scope] if include else []
        if scope.level == GW_LISTENER:
            out.append(Scope(GW, "Gateway", scope.namespace, scope.name))
        elif scope.level == GW and include:
            out += [
                Scope(GW_LISTENER, "Gateway", scope.namespace, scope.name, name)
                for name in sorted(self.world.listeners.get((scope.namespace, scope.name), ()))
            ]
        elif scope.level in (LS, LS_LISTENER):
            key = (scope.namespace, scope.name)
            if scope.level == LS_LISTENER:
                out.append(Scope(LS, "ListenerSet", key[0], key[1]))
            elif include:
                out += [
                    Scope(LS_LISTENER, "ListenerSet", key[0], key[1], name)
                    for name in sorted(self.world.listener_sets[key][1])
                ]
            gw = self.world.listener_sets[key][0]
            out.append(Scope(GW, "Gateway", gw[0], gw[1]))
        return out

    # -- overrides
    def _overridden(self, rep: PolicyReport, scope: Scope) -> None:
        narrower = sorted(
            s
            for s in self.children.get(scope, ())
            if self.held.get(s) is not None and self.held[s] is not rep
        )
        if self.pk.client_side:
            narrower = [s for s in narrower if s.level in (GW_LISTENER, LS_LISTENER)]
        if not narrower:
            return
        rep.overridden_by.extend(narrower)
        if self.pk.client_side:
            sections = sorted({s.section or "" for s in narrower})
            msg = (
                "There are existing ClientTrafficPolicies that are overriding these sections "
                f"{_go_list(sections)}"
            )
        else:
            parts = []
            for level, label in _OVERRIDE_LABELS:
                names = sorted(str(s) for s in narrower if s.level == level)
                if names:
                    parts.append(f"{label}: {_go_list(names)}")
            msg = (
                f"This policy is being overridden by other {self.pk.plural} for "
                f"{' and '.join(parts)}"
            )
        for anc in self._ancestors(scope):
            rep.ancestors.setdefault(anc, {})[c.OVERRIDDEN] = c.eg_policy_overridden(msg)


def _go_list(items: list[str]) -> str:
    """A list as Go's ``%v`` prints a []string (Envoy Gateway's messages)."""
    return "[" + " ".join(items) + "]"


def _status(ctx: Ctx, rep: PolicyReport) -> dict[str, Any]:
    gen = rep.policy.metadata.generation
    entries = []
    for (kind, ns, name, section), conds in rep.ancestors.items():
        ref: dict[str, Any] = {
            "group": m.GATEWAY_GROUP,
            "kind": kind,
            "namespace": ns,
            "name": name,
        }
        if section:
            ref["sectionName"] = section
        entries.append(
            {
                "ancestorRef": ref,
                "controllerName": ctx.options.controller_name,
                "conditions": [c.to_status(cond, gen) for cond in conds.values()],
            }
        )
    return {"ancestors": entries}
