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

import bisect
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
    if not any(ctx.snapshot.by_kind(pk.kind) for pk in POLICY_KINDS):
        return PolicyIndex()  # no policy: the targets need not be indexed
    return PolicyAttacher(ctx, gateways, resolved).index


class PolicyAttacher:
    """The attachment stage, kept between translations (the incremental translator): built
    like :func:`attach_policies`, then :meth:`reattach` settles a change of some policies
    where they reach, and :meth:`route_changed` keeps the targets
    it knows current for the next one (:meth:`moved_on`: the translation's context and
    Gateways)."""

    def __init__(
        self, ctx: Ctx, gateways: list[GatewayCtx], resolved: Resolved | None = None
    ) -> None:
        self.index = PolicyIndex()
        self.world = _World(ctx, gateways)
        self.kinds: dict[str, _KindAttachment] = {}
        for pk in POLICY_KINDS:
            policies = sorted(ctx.snapshot.by_kind(pk.kind).values(), key=sort_key)
            if not policies:
                continue
            ka = self.kinds[pk.kind] = _KindAttachment(self.world, pk)
            ka.run(ctx, policies, resolved)
            self.index.holders[pk.kind] = ka.held
            self.index.reports.extend(ka.reports[key] for _, key in ka.order)
            for rep in ka.reports.values():
                meta = rep.policy.metadata
                ctx.statuses[(pk.kind, meta.namespace, meta.name)] = _status(ctx, rep)

    def reattach(
        self,
        ctx: Ctx,
        changed: dict[str, set[PolicyKey]],
        resolved: Resolved | None,
        statuses: dict[tuple[str, str, str], dict[str, Any]],
    ) -> dict[str, dict[Scope, PolicyReport | None]]:
        """Settle a change of the policies ``changed`` (by kind; ``ctx.snapshot`` holds their
        new versions) while nothing else they read changed: their reports and those of the
        policies competing with them or overridden by them are made again, their statuses
        written to ``statuses``. Returns, per kind, the scopes whose holder may have changed
        with the report that held each before."""
        self.world.ctx = ctx
        out: dict[str, dict[Scope, PolicyReport | None]] = {}
        for pk in POLICY_KINDS:
            keys = changed.get(pk.kind)
            if not keys:
                continue
            ka = self.kinds.get(pk.kind)
            if ka is None:
                ka = self.kinds[pk.kind] = _KindAttachment(self.world, pk)
            for key in keys:
                if key not in ctx.snapshot.by_kind(pk.kind):
                    statuses.pop((pk.kind, key[0], key[1]), None)
            redone, before = ka.update(ctx, keys, resolved)
            for key in redone:
                statuses[(pk.kind, key[0], key[1])] = _status(ctx, ka.reports[key])
            out[pk.kind] = before
            if ka.reports:
                self.index.holders[pk.kind] = ka.held
            else:
                del self.kinds[pk.kind]
                self.index.holders.pop(pk.kind, None)
        self.index.reports = [ka.reports[key] for ka in self.kinds.values() for _, key in ka.order]
        return out

    def route_changed(self, kind: str, namespace: str, name: str, route: Any) -> None:
        """A route changed (``route`` None: deleted) in a way no policy's targets read."""
        self.world.route_changed(kind, namespace, name, route)

    def moved_on(self, ctx: Ctx, gateways: list[GatewayCtx]) -> None:
        """The next translation: its context, and its gateway side (run again or not, with
        the same Gateways and listeners: the incremental translator's fingerprint held)."""
        self.world.ctx = ctx
        self.world.gateways = {gw.key: gw for gw in gateways}


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

    def route_changed(self, kind: str, namespace: str, name: str, route: Any) -> None:
        parents = self._parents(route) if route is not None else ()
        if parents:
            self.routes[(kind, namespace, name)] = _Route(kind, route, parents)
        else:
            self.routes.pop((kind, namespace, name), None)

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


PolicyKey = tuple[str, str]  # a policy's (namespace, name) within its kind
_Taker = tuple[tuple[Any, ...], PolicyKey]  # (the policy's sort_key, its key)


class _KindAttachment:
    """One policy kind's attachment, kept so that a change of some of its policies is settled
    where they reach: the holder of a scope is the oldest policy naming it (when the scope
    exists), so only the scopes the changed policies name (before and after) can change
    hands; the policies naming those scopes, and those holding a scope above one that changed
    hands (Overridden), are the ones whose report is made again."""

    def __init__(self, world: _World, pk: PolicyKind) -> None:
        self.world = world
        self.pk = pk
        self.levels = (
            (GW_LISTENER, LS_LISTENER, GW, LS)
            if pk.client_side
            else (RULE, ROUTE, LS_LISTENER, LS, GW_LISTENER, GW)
        )
        self.reports: dict[PolicyKey, PolicyReport] = {}
        self.order: list[_Taker] = []  # every policy, oldest first
        self.rank: dict[PolicyKey, tuple[Any, ...]] = {}
        self.targets: dict[PolicyKey, tuple[list[Scope], list[str]]] = {}
        self.takers: dict[Scope, list[_Taker]] = {}  # scope -> policies naming it, oldest first
        self.holder_key: dict[Scope, PolicyKey] = {}
        self.held: dict[Scope, PolicyReport] = {}  # what PolicyIndex.holders[kind] holds
        self.parents: dict[Scope, list[Scope]] = {}  # held scope -> the broader scopes above it
        self.children: dict[Scope, set[Scope]] = {}  # scope -> narrower held scopes under it

    # -- the whole kind
    def run(self, ctx: Ctx, policies: list[Any], resolved: Resolved | None) -> None:
        for policy in policies:  # sorted by sort_key
            self._add(ctx, policy, resolved)
        for scope in self.takers:
            self._settle_holder(scope)
        for key in self.reports:
            self._rebuild(ctx, key)

    # -- some of its policies changed
    def update(
        self, ctx: Ctx, changed: set[PolicyKey], resolved: Resolved | None
    ) -> tuple[set[PolicyKey], dict[Scope, PolicyReport | None]]:
        """Settle the change of the policies ``changed`` (their new versions are in
        ``ctx.snapshot``, a missing one was deleted): the policies whose report was made again,
        and the scopes whose holder may have changed with the report that held each before."""
        policies = ctx.snapshot.by_kind(self.pk.kind)
        touched: set[Scope] = set()
        for key in changed:
            old = self.targets.pop(key, None)
            if old is not None:
                taker = (self.rank.pop(key), key)
                for scope in old[0]:
                    takers = self.takers[scope]
                    takers.remove(taker)
                    if not takers:
                        del self.takers[scope]
                touched.update(old[0])
                del self.order[bisect.bisect_left(self.order, taker)]
                del self.reports[key]
            policy = policies.get(key)
            if policy is not None:
                touched.update(self._add(ctx, policy, resolved))
        affected = {key for key in changed if key in self.reports}
        above: list[list[Scope]] = []  # the scopes above each scope that changed hands
        for scope in touched:
            was = self.parents.get(scope)
            if self._settle_holder(scope):
                above.append(was if was is not None else self.parents[scope])
            affected.update(key for _, key in self.takers.get(scope, ()))
        for parents in above:
            for parent in parents:
                hit = self.holder_key.get(parent)
                if hit is not None:
                    affected.add(hit)
        before: dict[Scope, PolicyReport | None] = {s: self.held.get(s) for s in touched}
        for key in affected:
            for scope in self.reports[key].held:
                before.setdefault(scope, self.held.get(scope))
        for key in sorted(affected, key=self.rank.__getitem__):
            self._rebuild(ctx, key)
        for scope in touched:
            hit = self.holder_key.get(scope)
            if hit is None:
                self.held.pop(scope, None)
        return affected, before

    # -- the parts
    def _add(self, ctx: Ctx, policy: Any, resolved: Resolved | None) -> list[Scope]:
        meta = policy.metadata
        key = (meta.namespace, meta.name)
        rank = sort_key(policy)
        self.rank[key] = rank
        taker = (rank, key)
        if not self.order or self.order[-1] < taker:
            self.order.append(taker)
        else:
            bisect.insort(self.order, taker)
        self.reports[key] = _report(ctx, self.pk, policy, resolved)
        scopes, missing = targets_of(self.world, self.pk, policy)
        self.targets[key] = (scopes, missing)
        for scope in scopes:
            takers = self.takers.setdefault(scope, [])
            if not takers or takers[-1] < taker:
                takers.append(taker)
            else:
                bisect.insort(takers, taker)
        return scopes

    def _settle_holder(self, scope: Scope) -> bool:
        """Who holds ``scope`` now (the oldest policy naming it, when it exists); whether
        that changed. Keeps the scopes above it knowing it is held under them."""
        takers = self.takers.get(scope)
        new = (
            takers[0][1]
            if takers and scope.level in self.levels and self._section_problem(scope) is None
            else None
        )
        old = self.holder_key.get(scope)
        if new == old:
            return False
        if new is None:
            del self.holder_key[scope]
            for parent in self.parents.pop(scope, ()):
                kids = self.children[parent]
                kids.discard(scope)
                if not kids:
                    del self.children[parent]
            return True
        self.holder_key[scope] = new
        if old is None:
            parents = self.parents[scope] = self._parents_of(scope)
            for parent in parents:
                self.children.setdefault(parent, set()).add(scope)
        return True

    def _rebuild(self, ctx: Ctx, key: PolicyKey) -> None:
        """The report of policy ``key`` made again from its targets and the holders."""
        old = self.reports[key]
        rep = PolicyReport(
            kind=old.kind,
            policy=old.policy,
            refused=old.refused,
            problems=old.problems,
            effect=old.effect,
        )
        self.reports[key] = rep
        scopes, missing = self.targets[key]
        rep.missing = list(missing)
        for level in self.levels:
            for scope in scopes:
                if scope.level == level:
                    self._take(rep, key, scope)
        for scope in sorted(rep.held):
            self.held[scope] = rep
            self._overridden(rep, key, scope)

    def _take(self, rep: PolicyReport, key: PolicyKey, scope: Scope) -> None:
        ancestors = self._ancestors(scope)
        problem = self._section_problem(scope)
        if problem is None and self.holder_key.get(scope) != key:
            problem = c.eg_policy_conflicted(self._conflict_message(scope))
        if problem is not None:
            rep.lost.append((scope, problem.message))
            for anc in ancestors:
                rep.ancestors.setdefault(anc, {}).setdefault(c.ACCEPTED, problem)
            return
        rep.held.append(scope)
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

    def _parents_of(self, scope: Scope) -> list[Scope]:
        """The broader scopes ``scope`` narrows (for Overridden)."""
        parents: list[Scope] = []
        if scope.level in (RULE, ROUTE):
            route = self.world.routes[(scope.kind, scope.namespace, scope.name)]
            for _, through in route.parents:
                parents += self._chain_above(through, include=True)
            if scope.level == RULE:
                parents.append(Scope(ROUTE, scope.kind, scope.namespace, scope.name))
        else:
            parents = self._chain_above(scope, include=False)
        return parents

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
    def _overridden(self, rep: PolicyReport, key: PolicyKey, scope: Scope) -> None:
        narrower = sorted(
            s for s in self.children.get(scope, ()) if self.holder_key.get(s) not in (None, key)
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
