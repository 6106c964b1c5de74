"""What one translation computes once and shares between routes must not leak between them.

The route side memoises pure pieces per translation (header matches and modifiers, weighted
backends, a Service port's cluster whichever namespace refers to it, each listener's verdict
before hostnames). These tests build routes that share those pieces but must still differ:
each rule with a shared invalid match is dropped, a ReferenceGrant is checked per referring
namespace, hostname intersection stays per route.
"""

from __future__ import annotations

import itertools
from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.core import run_pipeline
from gateweave.translate.hostnames import effective_hostnames
from gateweave.translate.parentrefs import OK, ParentIndex, _RouteHosts

NS = "infra"
G = m.GATEWAY_GROUP


def meta(name: str, ns: str = NS, ts: str = "2025-01-01T00:00:00Z", **kw: Any) -> m.ObjectMeta:
    return m.ObjectMeta(name=name, namespace=ns, creation_timestamp=ts, **kw)


def objects(*listeners: m.Listener) -> list[Any]:
    gwc = m.GatewayClass(
        metadata=m.ObjectMeta(name="gw-class"),
        spec=m.GatewayClassSpec(controller_name="gateweave.io/gateway-controller"),
    )
    all_ns = m.AllowedRoutes(namespaces=m.RouteNamespaces(from_="All"))
    gw = m.Gateway(
        metadata=meta("gw"),
        spec=m.GatewaySpec(
            gateway_class_name="gw-class",
            listeners=listeners
            or (m.Listener(name="http", port=80, protocol="HTTP", allowed_routes=all_ns),),
        ),
    )
    svc = m.Service(
        metadata=meta("svc"), spec=m.ServiceSpec(ports=(m.ServicePort(name="http", port=8080),))
    )
    eps = m.EndpointSlice(
        metadata=meta("svc-a", labels={"kubernetes.io/service-name": "svc"}),
        endpoints=(
            m.Endpoint(addresses=("10.0.0.1",), conditions=m.EndpointConditions(ready=True)),
        ),
        ports=(m.EndpointPort(name="http", port=3000),),
    )
    return [gwc, gw, svc, eps]


def route(
    name: str,
    *rules: m.HTTPRouteRule,
    ns: str = NS,
    hostnames: tuple[str, ...] = (),
    ts: str = "2025-01-01T00:00:00Z",
) -> m.HTTPRoute:
    return m.HTTPRoute(
        metadata=meta(name, ns, ts),
        spec=m.HTTPRouteSpec(
            parent_refs=(m.ParentReference(name="gw", namespace=NS),),
            hostnames=hostnames,
            rules=rules,
        ),
    )


def rule(
    *matches: m.HTTPRouteMatch, backend_ns: str | None = None, weight: int = 1
) -> m.HTTPRouteRule:
    ref = m.HTTPBackendRef(name="svc", namespace=backend_ns, port=8080, weight=weight)
    return m.HTTPRouteRule(matches=matches or (m.HTTPRouteMatch(),), backend_refs=(ref,))


def prefix(path: str, **kw: Any) -> m.HTTPRouteMatch:
    return m.HTTPRouteMatch(path=m.HTTPPathMatch(type="PathPrefix", value=path), **kw)


def entry(result: ir.Result, name: str, ns: str = NS) -> dict[str, Any]:
    status: Any = result.statuses[("HTTPRoute", ns, name)]
    (only,) = status["parents"]
    assert isinstance(only, dict)
    return only


def cond(e: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [c for c in e["conditions"] if c["type"] == type_]
    assert isinstance(found, dict)
    return found


def http_routes(result: ir.Result) -> dict[str, ir.Route]:
    port = result.xds[f"{NS}/gw"].ports[0]
    assert port.http is not None
    return {r.name: r for vh in port.http.virtual_hosts for r in vh.routes}


def test_a_shared_invalid_header_match_drops_the_rule_of_every_route_that_has_it() -> None:
    bad = (m.HTTPHeaderMatch(type="RegularExpression", name="x-build", value="v[0-9"),)
    good = (m.HTTPHeaderMatch(name="x-tenant", value="t"),)
    r1 = route("r1", rule(prefix("/ok1", headers=good)), rule(prefix("/bad1", headers=bad)))
    r2 = route("r2", rule(prefix("/bad2", headers=bad)), rule(prefix("/ok2", headers=good)))
    r3 = route("r3", rule(prefix("/bad3", headers=bad)))
    res = translate(Snapshot.from_objects([*objects(), r1, r2, r3]))

    for name, dropped in (("r1", "rule 1"), ("r2", "rule 0")):
        partially = cond(entry(res, name), "PartiallyInvalid")
        assert partially["status"] == "True"
        assert partially["message"].startswith(
            f"dropped {dropped}: invalid header regular expression 'v[0-9'"
        )
        assert cond(entry(res, name), "Accepted")["status"] == "True"
    accepted = cond(entry(res, "r3"), "Accepted")
    assert (
        accepted["status"] == "False" and "invalid header regular expression" in accepted["message"]
    )

    routes = http_routes(res)
    assert set(routes) == {"httproute/infra/r1/rule/0/match/0", "httproute/infra/r2/rule/1/match/0"}
    # The valid header matches are the same value, built once: equal, and the same IR.
    ok1, ok2 = (
        routes["httproute/infra/r1/rule/0/match/0"],
        routes["httproute/infra/r2/rule/1/match/0"],
    )
    assert (
        ok1.match.headers
        == ok2.match.headers
        == (ir.StringMatch(name="x-tenant", type="Exact", value="t"),)
    )


def test_a_reference_grant_is_checked_for_each_referring_namespace() -> None:
    grant = m.ReferenceGrant(
        metadata=meta("allow-a"),
        spec=m.ReferenceGrantSpec(
            from_=(m.ReferenceGrantFrom(group=G, kind="HTTPRoute", namespace="a"),),
            to=(m.ReferenceGrantTo(group="", kind="Service"),),
        ),
    )
    for first, second in (("a", "b"), ("b", "a")):
        older = route("r", rule(backend_ns=NS), ns=first, ts="2025-01-01T00:00:00Z")
        newer = route("r", rule(backend_ns=NS), ns=second, ts="2025-01-01T00:00:01Z")
        same = route("own", rule(), ts="2025-01-01T00:00:02Z")
        res = translate(Snapshot.from_objects([*objects(), grant, older, newer, same]))
        assert cond(entry(res, "r", "a"), "ResolvedRefs")["status"] == "True"
        refused = cond(entry(res, "r", "b"), "ResolvedRefs")
        assert (refused["status"], refused["reason"]) == ("False", "RefNotPermitted")
        assert cond(entry(res, "own"), "ResolvedRefs")["status"] == "True"
        routes = http_routes(res)
        assert routes["httproute/a/r/rule/0/match/0"].backends == (
            ir.WeightedCluster(cluster="infra/svc/8080/http1", weight=1),
        )
        assert routes["httproute/b/r/rule/0/match/0"].direct_status == 500


def test_weights_stay_per_rule_when_backends_are_shared() -> None:
    r1 = route("r1", rule(prefix("/a"), weight=3), rule(prefix("/b"), weight=0))
    r2 = route("r2", rule(prefix("/c"), weight=3))
    routes = http_routes(translate(Snapshot.from_objects([*objects(), r1, r2])))
    three = (ir.WeightedCluster(cluster="infra/svc/8080/http1", weight=3),)
    assert routes["httproute/infra/r1/rule/0/match/0"].backends == three
    assert routes["httproute/infra/r2/rule/0/match/0"].backends == three
    zero = routes["httproute/infra/r1/rule/1/match/0"]
    assert zero.backends == () and zero.direct_status == 500


def test_hostnames_are_judged_per_route_on_shared_listener_verdicts() -> None:
    all_ns = m.AllowedRoutes(namespaces=m.RouteNamespaces(from_="All"))
    wild = m.Listener(
        name="wild", port=80, protocol="HTTP", hostname="*.example.com", allowed_routes=all_ns
    )
    exact = m.Listener(
        name="exact", port=80, protocol="HTTP", hostname="a.example.com", allowed_routes=all_ns
    )
    r_in = route("in", rule(prefix("/in")), hostnames=("X.Example.COM",))
    r_out = route("out", rule(prefix("/out")), hostnames=("b.other.org",))
    r_both = route("both", rule(prefix("/both")), hostnames=("*.example.com", "a.example.com"))
    snap = Snapshot.from_objects([*objects(wild, exact), r_in, r_out, r_both])
    res = translate(snap)
    assert cond(entry(res, "in"), "Accepted")["status"] == "True"
    assert cond(entry(res, "out"), "Accepted")["reason"] == "NoMatchingListenerHostname"
    assert cond(entry(res, "both"), "Accepted")["status"] == "True"

    _, ctx, gws = run_pipeline(snap, TranslateOptions())
    index = ParentIndex(ctx, gws, explain=True)
    verdicts = {}
    for r in (r_in, r_out, r_both):
        outcome = index.resolve("HTTPRoute", r, r.spec.parent_refs[0])
        assert outcome is not None
        verdicts[r.metadata.name] = {v.listener.name: (v.stage, v.hosts) for v in outcome.verdicts}
        # The public one-listener judgement agrees with the outcome.
        for v in outcome.verdicts:
            alone = index.judge(v.listener, "HTTPRoute", r, r.spec.parent_refs[0])
            assert (alone.stage, alone.why, alone.hosts) == (v.stage, v.why, v.hosts)
    assert verdicts["in"] == {"wild": (OK, ("x.example.com",)), "exact": ("hostname", None)}
    assert verdicts["out"] == {"wild": ("hostname", None), "exact": ("hostname", None)}
    assert verdicts["both"] == {
        "wild": (OK, ("*.example.com", "a.example.com")),
        "exact": (OK, ("a.example.com",)),
    }
    # The sentences explain shows (written only when read).
    outcome = index.resolve("HTTPRoute", r_in, r_in.spec.parent_refs[0])
    assert outcome is not None
    why = {v.listener.name: v.why for v in outcome.verdicts}
    assert why["wild"] == (
        "allowedRoutes.namespaces.from=All admits namespace infra; listener hostname *.example.com"
        " with route hostnames X.Example.COM serves x.example.com"
    )
    assert why["exact"] == (
        "allowedRoutes.namespaces.from=All admits namespace infra, but listener hostname "
        "a.example.com"
        " does not intersect route hostnames X.Example.COM"
    )


def test_route_hostnames_on_a_listener_agree_with_effective_hostnames() -> None:
    listeners = [None, "a.example.com", "*.example.com", "*.b.example.com", "example.com", "*.com"]
    singles = [
        "a.example.com",
        "A.Example.com",
        "*.example.com",
        "x.b.example.com",
        "*.b.example.com",
        "example.com",
        "*.com",
        "other.org",
    ]
    sets = [
        (),
        *((h,) for h in singles),
        *itertools.combinations(singles, 2),
        ("a.example.com", "A.EXAMPLE.COM"),
    ]
    for hosts in sets:
        hosts_of = _RouteHosts(route("r", hostnames=tuple(hosts)))
        for listener in listeners:
            suffix = listener[1:] if listener is not None and listener.startswith("*.") else None
            assert hosts_of.on(listener, suffix) == effective_hostnames(listener, tuple(hosts)), (
                listener,
                hosts,
            )
