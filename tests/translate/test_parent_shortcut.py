"""The parentRef shortcut (parentrefs.Shortcut, routes._judge_one) is the general path, faster.

A route with one parentRef to an accepted Gateway of ours is judged from what its parentRef
comes to once per (route kind, namespace, parentRef); every other route by the general path
(``ParentIndex.resolve`` per parentRef). Each generated route is judged both ways, by one
index and by an index whose shortcut is switched off: the outcome (status, listeners with the
hostnames served, accepting Gateways) must be the same, and the shortcut must be taken exactly
for the routes of its shape.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions
from gateweave.translate import conditions as c
from gateweave.translate.attachment import RouteTranslation
from gateweave.translate.core import run_pipeline
from gateweave.translate.parentrefs import ParentIndex
from gateweave.translate.routes import RouteOutcome, judge_route

NS = "infra"
TEAM = "team"
HOSTS = (None, "a.example.com", "*.example.com", "*.a.example.com", "b.other.org")
ROUTE_HOSTS = (
    "a.example.com",
    "x.a.example.com",
    "A.Example.com",
    "*.example.com",
    "*.a.example.com",
    "b.other.org",
    "example.com",
)


def _general(index: ParentIndex, routes: list[tuple[str, Any]]) -> ParentIndex:
    """``index`` set to take the general path only: every parentRef of ``routes`` is
    remembered as having no shortcut. (Not a subclass: the compiled ParentIndex cannot have
    interpreted subclasses.)"""
    for kind, route in routes:
        for pref in route.spec.parent_refs:
            index.shortcuts[(kind, route.metadata.namespace, pref)] = None
    return index


def _meta(name: str, ns: str = NS, **kw: Any) -> m.ObjectMeta:
    return m.ObjectMeta(name=name, namespace=ns, creation_timestamp="2025-01-01T00:00:00Z", **kw)


@st.composite
def _listener(draw: st.DrawFn, i: int) -> m.Listener:
    allowed = draw(st.sampled_from(["All", "Same", "Selector"]))
    selector = m.LabelSelector(match_labels={"team": "yes"}) if allowed == "Selector" else None
    return m.Listener(
        name=f"l{i}",
        port=draw(st.sampled_from([80, 8080])),
        protocol=draw(st.sampled_from(["HTTP", "HTTP", "TCP"])),
        hostname=draw(st.sampled_from(HOSTS)),
        allowed_routes=m.AllowedRoutes(
            namespaces=m.RouteNamespaces(from_=allowed, selector=selector)
        ),
    )


def _pref(draw: st.DrawFn) -> m.ParentReference:
    if draw(st.integers(0, 3)):  # mostly the shape of the shortcut, near-misses otherwise
        return m.ParentReference(
            name="gw",
            namespace=NS,
            section_name=draw(st.sampled_from([None, None, None, "l0", "l1"])),
            port=draw(st.sampled_from([None, None, None, 80, 8080])),
        )
    return m.ParentReference(
        name=draw(st.sampled_from(["gw", "other-gw", "bad-class"])),
        namespace=draw(st.sampled_from([None, NS])),
        kind=draw(st.sampled_from(["Gateway", "ListenerSet"])),
        section_name=draw(st.sampled_from([None, "l0", "nope"])),
        port=draw(st.sampled_from([None, 80, 9])),
    )


@st.composite
def _route(draw: st.DrawFn, i: int) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["HTTPRoute", "HTTPRoute", "TCPRoute"]))
    ns = draw(st.sampled_from([NS, TEAM, "outsider"]))
    prefs = tuple(_pref(draw) for _ in range(draw(st.sampled_from([1, 1, 1, 1, 0, 2]))))
    meta = _meta(f"r{i}", ns, generation=draw(st.sampled_from([1, 2])))
    if kind == "TCPRoute":
        return kind, m.TCPRoute(metadata=meta, spec=m.L4RouteSpec(parent_refs=prefs))
    count = draw(st.sampled_from([1, 1, 1, 0, 2]))
    hosts = tuple(draw(st.lists(st.sampled_from(ROUTE_HOSTS), min_size=count, max_size=count)))
    spec = m.HTTPRouteSpec(parent_refs=prefs, hostnames=hosts)
    return kind, m.HTTPRoute(metadata=meta, spec=spec)


@st.composite
def _translation(draw: st.DrawFn, kind: str, route: Any) -> RouteTranslation:
    """A translation with the parts judge_route reads drawn: dropped rules, rejection, refs."""
    rules = draw(st.integers(0, 2))
    invalid = tuple(f"rule {j}: bad" for j in range(draw(st.integers(0, rules))))
    refs = draw(st.sampled_from([None, c.route_refs_resolved()]))
    terminated = draw(st.sampled_from([None, None, c.route_refs_resolved()]))
    return RouteTranslation(
        kind=kind,
        route=route,
        rule_count=rules,
        invalid_rules=invalid,
        incompatible_filters=draw(st.booleans()),
        rejected=draw(st.sampled_from(["", "", "", "Envoy says no"])),
        refs_problem=refs,
        terminated_refs_problem=terminated,
    )


def _objects(listeners: list[m.Listener]) -> list[Any]:
    gwc = m.GatewayClass(
        metadata=_meta("gw-class", ""),
        spec=m.GatewayClassSpec(controller_name="gateweave.io/gateway-controller"),
    )
    gw = m.Gateway(
        metadata=_meta("gw"),
        spec=m.GatewaySpec(gateway_class_name="gw-class", listeners=tuple(listeners)),
    )
    # A Gateway of a class that is not ours: its parentRefs are not ours to judge.
    foreign = m.Gateway(
        metadata=_meta("bad-class"),
        spec=m.GatewaySpec(gateway_class_name="missing", listeners=tuple(listeners)),
    )
    team = m.Namespace(metadata=_meta(TEAM, "", labels={"team": "yes"}))
    return [gwc, gw, foreign, team]


def _shown(outcome: RouteOutcome) -> tuple[Any, ...]:
    return (
        outcome.status,
        [(lc.name, hosts) for lc, hosts in outcome.attached],
        [gw.name for gw in outcome.accepted_by],
        outcome.owned,
    )


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_shortcut_gives_what_the_general_path_gives(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 4))
    listeners = [data.draw(_listener(i)) for i in range(n)]
    routes = [data.draw(_route(i)) for i in range(data.draw(st.integers(1, 6)))]
    snap = Snapshot.from_objects(_objects(listeners) + [r for _, r in routes])
    _, ctx, gws = run_pipeline(snap, TranslateOptions())
    fast, general = ParentIndex(ctx, gws), _general(ParentIndex(ctx, gws), routes)
    for kind, route in routes:
        tr = data.draw(_translation(kind, route))
        # Twice: the second judgement reads the shortcut the first one remembered.
        for _ in range(2):
            assert _shown(judge_route(ctx, fast, tr)) == _shown(judge_route(ctx, general, tr))
        refs = route.spec.parent_refs
        pref = refs[0] if refs else None
        gw = next((g for g in gws if g.gateway.metadata.name == "gw"), None)
        shaped = (
            len(refs) == 1
            and pref is not None
            and pref.kind == "Gateway"
            and pref.name == "gw"
            and (pref.namespace or route.metadata.namespace) == NS
            and gw is not None
            and gw.accepted
        )
        taken = len(refs) == 1 and fast.shortcuts.get((kind, route.metadata.namespace, refs[0]))
        assert bool(taken) == shaped
        assert not any(general.shortcuts.values())
