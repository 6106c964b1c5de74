"""The graph /api/graph serves, built offline from conformance object sets and a translation:
which listener serves which route (read from the IR), rejected parentRefs with their reason,
where ReferenceGrants and policies bind, backends with the IR's clusters, the layout."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence

import msgspec
import pytest

from gateweave import ir
from gateweave.api.decode import Decoded
from gateweave.api.kinds import ROUTE_KINDS, Key
from gateweave.api.load import load_text
from gateweave.dashboard import graph, layout
from gateweave.dashboard.served import served_listeners
from gateweave.output import objects_with_status
from gateweave.providers import ConfigError
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from tests.support.conformance_objects import case_set, decoded

OURS = "gateweave.io/gateway-controller"
OPTIONS = TranslateOptions(controller_name=OURS)
CASES = (
    "HTTPRouteInvalidCrossNamespaceParentRef.yaml",
    "HTTPRouteListenerHostnameMatching.yaml",
    "HTTPRouteReferenceGrant.yaml",
    "TCPRouteReferenceGrant.yaml",
    "BackendTLSPolicy.yaml",
)
INFRA = "gateway-conformance-infra"
HOSTNAMES_GW = f"Gateway/{INFRA}/httproute-listener-hostname-matching"


def build(objects: Sequence[Decoded], errors: Iterable[ConfigError] = ()) -> graph.Graph:
    snapshot = Snapshot.from_objects(d.model for d in objects)
    result = translate(snapshot, OPTIONS)
    items = objects_with_status(objects, result.statuses, OURS)
    by_key = {
        Key(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items
    }
    return graph.build(
        graph.Inputs(
            snapshot=snapshot, objects=by_key, result=result, errors=list(errors), options=OPTIONS
        )
    )


@pytest.fixture(scope="module")
def system() -> graph.Graph:
    return build(case_set(CASES))


def edges(g: graph.Graph, kind: str, target: str | None = None) -> set[tuple[str, str]]:
    return {
        (e.source, e.target)
        for e in g.edges
        if e.kind == kind and (target is None or e.target == target)
    }


def nodes(g: graph.Graph) -> dict[str, graph.Node]:
    return {n.id: n for n in g.nodes}


def test_every_gateway_and_route_is_a_node(system: graph.Graph) -> None:
    want = {
        f"{d.model.kind}/{d.model.metadata.namespace}/{d.model.metadata.name}"
        for d in case_set(CASES)
        if d.model.kind in ("Gateway", *ROUTE_KINDS)
    }
    assert want <= set(nodes(system))
    assert len(want) > 10


def test_listeners_serve_the_routes_the_ir_gives_them(system: graph.Graph) -> None:
    """One port, four listeners told apart by hostname: each route hangs from the listener
    whose hostname owns its domains in the IR, not from every listener that takes HTTPRoutes."""
    listener = f"{HOSTNAMES_GW}/listener/"
    for route, want in (
        ("backend-v1", {"listener-1"}),
        ("backend-v2", {"listener-2"}),
        ("backend-v3", {"listener-3", "listener-4"}),
    ):
        rid = f"HTTPRoute/{INFRA}/{route}"
        assert edges(system, "attach", rid) == {(listener + name, rid) for name in want}, route


SHARED_PORT = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gateweave}
spec: {controllerName: gateweave.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: gateweave
  listeners:
  - {name: exact, protocol: HTTP, port: 80, hostname: a.test}
  - {name: wildcard, protocol: HTTP, port: 80, hostname: "*.test"}
  - {name: any, protocol: HTTP, port: 80}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: default}
spec: {ports: [{port: 80}]}
"""


def _route(name: str, hostnames: list[str]) -> str:
    return f"""---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: {hostnames}
  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]
"""


def test_a_domain_is_served_by_the_most_specific_listener_of_its_port() -> None:
    """No sectionName: each route is accepted by every listener whose hostname meets its own,
    but Envoy serves each domain from the most specific of them, as the IR says (a route
    without hostnames takes each listener's)."""
    text = SHARED_PORT + _route("a", ["a.test"]) + _route("b", ["b.test"]) + _route("any", [])
    g = build([decoded(o.raw) for o in load_text(text, "x.yaml").objects])
    listener = "Gateway/default/gw/listener/"
    for route, served_by in (
        ("a", {"exact"}),
        ("b", {"wildcard"}),
        ("any", {"exact", "wildcard", "any"}),
    ):
        rid = f"HTTPRoute/default/{route}"
        assert edges(g, "attach", rid) == {(listener + name, rid) for name in served_by}, route


def test_an_l4_route_hangs_from_its_listener_by_status(system: graph.Graph) -> None:
    rid = f"TCPRoute/{INFRA}/tcp-reference-grant"
    assert edges(system, "attach", rid) == {
        (f"Gateway/{INFRA}/tcp-reference-grant-gateway/listener/tcp", rid)
    }


def test_a_rejected_route_fails_with_its_reason(system: graph.Graph) -> None:
    rid = "HTTPRoute/gateway-conformance-web-backend/invalid-cross-namespace-parent-ref"
    node = nodes(system)[rid]
    assert node.health == graph.FAIL
    assert node.why.startswith("Accepted NotAllowedByListeners: ")
    assert node.why.endswith(f"(parent Gateway {INFRA}/same-namespace)")
    assert node.explain == f"/api/explain/{rid}"
    [edge] = [e for e in system.edges if e.target == rid and e.kind != "backend"]
    assert (edge.source, edge.kind, edge.label, edge.health) == (
        f"Gateway/{INFRA}/same-namespace",
        "rejected",
        "NotAllowedByListeners",
        graph.FAIL,
    )


def test_grants_and_policies_bind_where_they_apply(system: graph.Graph) -> None:
    web = "gateway-conformance-web-backend"
    assert edges(system, "grant") == {
        (f"ReferenceGrant/{web}/reference-grant", f"Service/{web}/web-backend"),
        (f"ReferenceGrant/{web}/tcp-reference-grant", f"Service/{web}/tcp-reference-grant-backend"),
    }
    by_id = nodes(system)
    assert by_id[f"ReferenceGrant/{web}/reference-grant"].health == graph.OK
    policies = edges(system, "policy")
    assert (
        f"BackendTLSPolicy/{INFRA}/normative-test",
        f"Service/{INFRA}/backendtlspolicy-test",
    ) in policies
    assert all(
        by_id[s].kind == "BackendTLSPolicy" and by_id[t].kind == "Service" for s, t in policies
    )


def test_backends_carry_the_clusters_of_the_ir(system: graph.Graph) -> None:
    result = translate(Snapshot.from_objects(d.model for d in case_set(CASES)), OPTIONS)
    clusters = {c.name for gw in result.xds.values() for c in gw.clusters}
    shown = [c["name"] for n in system.nodes for c in n.details.get("clusters", [])]
    assert sorted(shown) == sorted(clusters)  # each once, under the backend it reaches
    for n in system.nodes:
        for c in n.details.get("clusters", []):
            assert graph.cluster_backend(c["name"]) == (n.kind, n.namespace, n.name)
    backend = nodes(system)[f"Service/{INFRA}/infra-backend-v1"]
    assert backend.health == graph.OK and backend.details["clusters"][0]["endpoints"]


def test_no_private_key_in_the_graph(system: graph.Graph) -> None:
    assert b"PRIVATE KEY" not in msgspec.json.encode(system)


def test_same_objects_same_bytes_and_no_overlap() -> None:
    objects = case_set(CASES)
    shuffled = list(objects)
    random.Random(7).shuffle(shuffled)
    one, other = build(objects), build(shuffled)
    assert msgspec.json.encode(one) == msgspec.json.encode(other)
    by_column: dict[int, list[graph.Node]] = {}
    for n in one.nodes:
        by_column.setdefault(n.column, []).append(n)
        assert (
            n.x >= 0
            and n.x + layout.NODE_W <= one.width
            and n.y >= 0
            and n.y + layout.NODE_H <= one.height
        )
    xs = [min(n.x for n in col) for _, col in sorted(by_column.items())]
    assert xs == sorted(set(xs))
    for col in by_column.values():
        assert len({n.x for n in col}) == 1
        ys = sorted(n.y for n in col)
        assert all(b - a >= layout.NODE_H + layout.ROW_GAP for a, b in itertools.pairwise(ys))


OTHERS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: theirs}
spec: {controllerName: example.com/another}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: default}
spec:
  gatewayClassName: theirs
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: elsewhere, namespace: default}
spec:
  parentRefs: [{name: theirs}]
  rules: [{backendRefs: [{name: nowhere, port: 80}]}]
"""


def test_what_is_not_ours_and_what_is_missing() -> None:
    objects = [decoded(o.raw) for o in load_text(OTHERS, "others.yaml").objects]
    g = build(
        objects,
        [
            ConfigError(
                "others.yaml:14",
                'unknown field "spec.hostname"',
                "HTTPRoute",
                "default",
                "elsewhere",
            )
        ],
    )
    by_id = nodes(g)
    route = by_id["HTTPRoute/default/elsewhere"]
    assert (route.health, route.conditions) == (graph.NONE, [])  # another controller's to judge
    assert edges(g, "unjudged") == {("Gateway/default/theirs", route.id)}
    assert route.errors == [
        {
            "source": "others.yaml:14",
            "message": 'unknown field "spec.hostname"',
            "kind": "HTTPRoute",
            "namespace": "default",
            "name": "elsewhere",
        }
    ]
    missing = by_id["Service/default/nowhere"]
    assert (missing.health, missing.why) == (graph.FAIL, "Service default/nowhere not found")
    theirs = by_id["Gateway/default/theirs"]
    assert (theirs.health, theirs.why) == (graph.NONE, "Accepted Pending: Waiting for controller")


@pytest.mark.parametrize(
    ("conds", "want"),
    [
        ([], graph.NONE),
        ([("Accepted", "Unknown", "Pending")], graph.NONE),
        ([("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")], graph.OK),
        (
            [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "BackendNotFound")],
            graph.WARN,
        ),
        ([("Accepted", "True", "Accepted"), ("Programmed", "False", "Pending")], graph.WARN),
        ([("Accepted", "False", "NotAllowedByListeners")], graph.FAIL),
        ([("Programmed", "False", "Invalid")], graph.FAIL),
        ([("Conflicted", "True", "HostnameConflict")], graph.FAIL),
        ([("Conflicted", "False", "NoConflicts")], graph.OK),
    ],
)
def test_health(conds: list[tuple[str, str, str]], want: str) -> None:
    got, why = graph.health(
        [graph.Condition(type=t, status=s, reason=r, message="m") for t, s, r in conds]
    )
    assert got == want
    assert bool(why) == (want != graph.OK and bool(conds))


def test_tls_filter_chains_name_their_listener() -> None:
    route = ir.Route(name="httproute/default/web/rule/0/match/0", match=ir.RouteMatch())
    misdirected = ir.Route(
        name="default/gw/443/misdirected/b.test", match=ir.RouteMatch(), direct_status=421
    )
    chains = (
        ir.FilterChain(
            name="default/gw/443/https",
            server_names=("a.test",),
            http=ir.RouteConfig(
                name="c",
                virtual_hosts=(
                    ir.VirtualHost(name="v", domains=("a.test",), routes=(route,)),
                    ir.VirtualHost(name="w", domains=("b.test",), routes=(misdirected,)),
                ),
            ),
        ),
        ir.FilterChain(
            name="default/gw/443/tls/default/passthrough",
            server_names=("b.test",),
            tcp=ir.TCPProxy(name="default/gw/443/tls/default/passthrough"),
        ),
    )
    xds = {
        "default/gw": ir.XdsGateway(
            name="default/gw",
            address="127.0.0.1",
            ports=(ir.Port(name="default/gw/443", port=443, protocol="TLS", filter_chains=chains),),
        )
    }
    infra = {
        "default/gw": ir.InfraGateway(
            name="default/gw",
            namespace="default",
            gateway_name="gw",
            gateway_class="c",
            address="127.0.0.1",
            ports=(ir.InfraPort(name="https,tls", port=443, protocol="TCP"),),
        )
    }
    assert served_listeners(xds, infra, {}) == {
        ("default/gw", "HTTPRoute/default/web"): {"https"},
        ("default/gw", "TLSRoute/default/passthrough"): {"tls"},
    }
