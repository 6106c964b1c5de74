"""Routes of every kind: translation, attachment to listeners, route status, BackendTLSPolicy
status, and the status of the Envoy Gateway Backends our routes refer to.

Each route is translated once (rules, filters, backends), then each of its parentRefs that
targets one of our Gateways or ListenerSets is resolved to listeners. Routes are visited
oldest first (creationTimestamp, then namespace/name), so every listener's ``routes`` list
and every status come out in a deterministic order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from gateweave.api.kinds import ROUTE_KINDS
from gateweave.snapshot import Snapshot
from gateweave.translate import conditions as c
from gateweave.translate import egbackend
from gateweave.translate.attachment import Attachment, RouteTranslation, ServicePortKey
from gateweave.translate.backends import BackendResolver
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx, SortKey, sort_key
from gateweave.translate.grpcroute import translate_grpc_route
from gateweave.translate.httproute import translate_http_route
from gateweave.translate.l4routes import translate_l4_route
from gateweave.translate.parentrefs import ParentIndex, ParentOutcome, Shortcut, status_ref


def translate_route(
    kind: str, route: Any, resolver: BackendResolver, order: SortKey | None = None
) -> RouteTranslation:
    """``order``: the route's :func:`sort_key`, when the caller has it.

    A route the data plane found its Envoy rejects (``options.rejected``) is left out whole:
    no rule of it is translated until it changes (the runtime then releases it)."""
    meta = route.metadata
    rejected = resolver.ctx.options.rejected.get((kind, meta.namespace, meta.name))
    if rejected is not None:
        return RouteTranslation(kind=kind, route=route, rejected=rejected)
    if kind == "HTTPRoute":
        return translate_http_route(route, resolver, order or sort_key(route))
    if kind == "GRPCRoute":
        return translate_grpc_route(route, resolver, order or sort_key(route))
    return translate_l4_route(kind, route, resolver)


def in_order(snapshot: Snapshot) -> Iterator[tuple[str, SortKey, Any]]:
    """Every route as a translation visits them, with its :func:`sort_key`: by kind
    (``ROUTE_KINDS``), then oldest first."""
    for kind in ROUTE_KINDS:
        keyed = sorted(
            [(sort_key(route), route) for route in snapshot.by_kind(kind).values()],
            key=itemgetter(0),
        )
        for order, route in keyed:
            yield kind, order, route


def attach_routes(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    """Attach every route to the listeners it may attach to and write every route's status."""
    tls_index = BackendTLSIndex(ctx)
    resolver = BackendResolver(ctx, tls_index)
    parents = ParentIndex(ctx, gateways)
    using: dict[ServicePortKey, list[GatewayCtx]] = {}
    policies = bool(tls_index.results)  # which Gateways use which Service ports: their ancestors
    used_backends: set[tuple[str, str]] = set()  # Envoy Gateway Backends routes of ours refer to
    for kind, order, route in in_order(ctx.snapshot):
        tr = translate_route(kind, route, resolver, order)
        outcome = _attach_one(ctx, parents, tr)
        if outcome.owned and tr.backends:
            used_backends.update(tr.backends)
        if policies:
            for gw in outcome.accepted_by:
                for svc in tr.services:
                    users = using.setdefault(svc, [])
                    if gw not in users:
                        users.append(gw)
    tls_index.write_statuses(using)
    write_backend_statuses(ctx, resolver, used_backends)


def write_backend_statuses(ctx: Ctx, resolver: BackendResolver, used: set[tuple[str, str]]) -> None:
    """The status of every Envoy Gateway Backend in ``used`` (those routes of ours refer to)."""
    for key in sorted(used):
        be = ctx.snapshot.backends.get(key)
        if be is not None:
            ctx.statuses[("Backend", key[0], key[1])] = egbackend.backend_status(
                be, resolver.verdict(be)
            )


def _attach_one(ctx: Ctx, parents: ParentIndex, tr: RouteTranslation) -> RouteOutcome:
    """Resolve the route's parentRefs, attach it, write its status."""
    outcome = judge_route(ctx, parents, tr)
    route = tr.route
    ctx.statuses[(tr.kind, route.metadata.namespace, route.metadata.name)] = outcome.status
    att: Attachment | None = None
    for lc, hosts in outcome.attached:
        lc.attached_routes += 1
        # Listeners where the route serves the very same hostnames (one shared tuple) share one
        # record.
        if att is None or att.hostnames is not hosts:
            att = Attachment(translation=tr, hostnames=hosts)
        lc.routes.append(att)
    return outcome


@dataclass(slots=True)
class RouteOutcome:
    """What a route's parentRefs come to: its status, the listeners it attaches to (each once,
    with the hostnames it serves there), the Gateways that accepted it, and whether any of its
    parentRefs is ours (then what it refers to is ours to report on)."""

    status: dict[str, Any]
    attached: list[tuple[ListenerCtx, tuple[str, ...] | None]]
    accepted_by: list[GatewayCtx]
    owned: bool


def judge_route(ctx: Ctx, parents: ParentIndex, tr: RouteTranslation) -> RouteOutcome:
    """Resolve every parentRef of a translated route against our listeners (reads, never writes,
    them).

    The status is shared with every other route of this translation made of the same parts
    (parentRefs, outcomes, generation): statuses are values, nobody mutates them.
    """
    route = tr.route
    kind = tr.kind
    route_ns = route.metadata.namespace
    refs = route.spec.parent_refs
    if len(refs) == 1:
        shortcut = parents.shortcuts.get((kind, route_ns, refs[0]))
        if shortcut is None:
            shortcut = parents.shortcut(kind, route_ns, refs[0])
        if shortcut is not None:
            return _judge_one(ctx, parents, tr, shortcut)
    all_invalid = tr.all_rules_invalid
    accepted_by: list[GatewayCtx] = []
    attached: list[tuple[ListenerCtx, tuple[str, ...] | None]] = []
    refs_problem = tr.refs_problem
    seen: set[int] | None = None  # ids of attached listeners, once a second parentRef attaches
    parts: list[tuple[Any, ...]] = []  # per parentRef of ours: (parentRef, its Accepted condition)
    ours: list[ParentOutcome] = []
    for pref in route.spec.parent_refs:
        outcome = parents.resolve(kind, route, pref)
        if outcome is None:
            continue
        if outcome.attached and tr.rejected:
            parts.append((pref, c.route_rejected_by_dataplane(tr.rejected)))
        elif outcome.attached and all_invalid:
            parts.append(
                (
                    pref,
                    c.route_no_valid_rule(
                        "no valid rule: " + "; ".join(tr.invalid_rules), tr.incompatible_filters
                    ),
                )
            )
        elif outcome.attached:
            parts.append((pref, c.route_accepted()))
            if not attached:
                attached.extend(outcome.attached)  # one parentRef's listeners are distinct
            else:
                if seen is None:
                    seen = {id(lc) for lc, _ in attached}
                for lc, hosts in outcome.attached:
                    if id(lc) not in seen:
                        seen.add(id(lc))
                        attached.append((lc, hosts))
            if outcome.gateway not in accepted_by:
                accepted_by.append(outcome.gateway)
        else:
            parts.append((pref, outcome.not_accepted))
        ours.append(outcome)
    if tr.terminated_refs_problem is not None and any(lc.terminates_tls for lc, _ in attached):
        refs_problem = tr.terminated_refs_problem
    key = (
        route_ns,
        route.metadata.generation,
        refs_problem,
        tr.invalid_rules if not all_invalid else (),
        *parts,
    )
    status = parents.statuses.get(key)
    if status is None:
        if len(parents.statuses) >= _STATUS_MEMO:
            parents.statuses.clear()
        status = parents.statuses[key] = _route_status(
            ctx, tr, refs_problem, parts, [o.ref for o in ours]
        )
    return RouteOutcome(status, attached, accepted_by, bool(ours))


def _judge_one(ctx: Ctx, parents: ParentIndex, tr: RouteTranslation, sc: Shortcut) -> RouteOutcome:
    """:func:`judge_route` for a route whose one parentRef has a :class:`Shortcut`: the same
    outcome and status, without a ParentOutcome (tests/translate/test_parent_shortcut.py)."""
    route = tr.route
    pref = route.spec.parent_refs[0]
    attached = sc.attached(route)
    accepted_by: list[GatewayCtx] = []
    if not attached:
        accepted = sc.not_accepted
    elif tr.rejected:
        accepted = c.route_rejected_by_dataplane(tr.rejected)
        attached = []
    elif tr.invalid_rules and tr.all_rules_invalid:
        accepted = c.route_no_valid_rule(
            "no valid rule: " + "; ".join(tr.invalid_rules), tr.incompatible_filters
        )
        attached = []
    else:
        accepted = c.route_accepted()
        accepted_by.append(sc.gateway)
    refs_problem = tr.refs_problem
    if tr.terminated_refs_problem is not None and any(lc.terminates_tls for lc, _ in attached):
        refs_problem = tr.terminated_refs_problem
    part = (pref, accepted)
    all_invalid = bool(tr.invalid_rules) and tr.all_rules_invalid
    key = (
        route.metadata.namespace,
        route.metadata.generation,
        refs_problem,
        tr.invalid_rules if not all_invalid else (),
        part,
    )
    status = parents.statuses.get(key)
    if status is None:
        if len(parents.statuses) >= _STATUS_MEMO:
            parents.statuses.clear()
        status = parents.statuses[key] = _route_status(
            ctx, tr, refs_problem, [part], [status_ref(pref, sc.namespace)]
        )
    return RouteOutcome(status, attached, accepted_by, True)


_STATUS_MEMO = 1 << 14


def _route_status(
    ctx: Ctx,
    tr: RouteTranslation,
    refs_problem: c.Condition | None,
    parts: list[tuple[Any, ...]],
    refs: list[dict[str, Any]],
) -> dict[str, Any]:
    gen = tr.route.metadata.generation
    controller = ctx.options.controller_name
    resolved = c.to_status(
        refs_problem if refs_problem is not None else c.route_refs_resolved(), gen
    )
    partially = None
    if tr.invalid_rules and not tr.all_rules_invalid:
        partially = c.to_status(
            c.route_partially_invalid("dropped " + "; ".join(tr.invalid_rules)), gen
        )
    entries: list[dict[str, Any]] = []
    for (_, accepted), ref in zip(parts, refs, strict=True):
        conds = (
            [c.to_status(accepted, gen), resolved, partially]
            if partially
            else [c.to_status(accepted, gen), resolved]
        )
        entries.append({"parentRef": ref, "controllerName": controller, "conditions": conds})
    return {"parents": entries}
