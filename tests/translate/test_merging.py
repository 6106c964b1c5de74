"""mergeGateways through translate: the Gateways of a class whose parameters set it are one
Envoy (one xDS node: one XdsGateway, one InfraGateway), each Gateway's listeners on its own
address; statuses stay per Gateway, Programmed from the class node's acknowledgements."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.dashboard.served import served_listeners
from gateweave.snapshot import Snapshot
from gateweave.translate import DataplaneState, translate
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.translate.merging import node_of
from gateweave.translate.options import TranslateOptions
from tests.support.conformance_objects import decoded

GWAPI = "gateway.networking.k8s.io/v1"
LOCAL = TranslateOptions(local_addresses=("10.0.0.5", "10.0.0.6"), default_concurrency=3)
NODE = node_of("gc")


def gateway_class(merged: bool = True) -> list[dict[str, Any]]:
    ref = {
        "group": "gateweave.io",
        "kind": "GatewayParameters",
        "name": "shared",
        "namespace": "infra",
    }
    spec: dict[str, Any] = (
        {"mergeGateways": True, "envoy": {"concurrency": 2}}
        if merged
        else {"envoy": {"concurrency": 2}}
    )
    return [
        {
            "apiVersion": GWAPI,
            "kind": "GatewayClass",
            "metadata": {"name": "gc"},
            "spec": {"controllerName": "gateweave.io/gateway-controller", "parametersRef": ref},
        },
        params("shared", spec, "infra"),
    ]


def params(name: str, spec: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def gateway(
    name: str,
    address: str,
    port: int = 80,
    created: str = "2026-01-01T00:00:00Z",
    own_params: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": "gc",
        "addresses": [{"type": "IPAddress", "value": address}],
        "listeners": [{"name": "http", "protocol": "HTTP", "port": port}],
    }
    if own_params is not None:
        spec["infrastructure"] = {
            "parametersRef": {
                "group": "gateweave.io",
                "kind": "GatewayParameters",
                "name": own_params,
            }
        }
    return {
        "apiVersion": GWAPI,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "apps", "creationTimestamp": created},
        "spec": spec,
    }


def route(name: str, gw: str, host: str) -> dict[str, Any]:
    return {
        "apiVersion": GWAPI,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "parentRefs": [{"name": gw}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}],
        },
    }


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "svc", "namespace": "apps"},
    "spec": {"ports": [{"port": 80}]},
}


def snapshot(*raws: dict[str, Any]) -> Snapshot:
    return Snapshot.from_objects(decoded(raw).model for raw in raws)


def cond(status: dict[str, Any], type_: str) -> tuple[str, str, str]:
    c = next(c for c in status["conditions"] if c["type"] == type_)
    return c["status"], c["reason"], c["message"]


def objects(merged: bool = True) -> list[dict[str, Any]]:
    return [
        *gateway_class(merged),
        SERVICE,
        gateway("a", "10.0.0.5"),
        gateway("b", "10.0.0.6"),
        route("ra", "a", "a.example"),
        route("rb", "b", "b.example"),
    ]


def test_a_merged_class_is_one_envoy_with_each_gateways_listeners_on_its_address() -> None:
    res = translate(snapshot(*objects()), LOCAL)
    assert list(res.xds) == [NODE] and list(res.infra) == [NODE]
    xds = res.xds[NODE]
    assert [(p.name, p.address, p.port) for p in xds.ports] == [
        ("apps/a/80", "10.0.0.5", 80),
        ("apps/b/80", "10.0.0.6", 80),
    ]
    assert [c.name for c in xds.clusters] == [
        "apps/svc/80/http1"
    ]  # one cluster for both Gateways' routes
    domains = [vh.domains for p in xds.ports if p.http is not None for vh in p.http.virtual_hosts]
    assert domains == [("a.example",), ("b.example",)]
    infra = res.infra[NODE]
    assert infra.name == NODE and infra.gateway_class == "gc"
    assert infra.ports == (ir.InfraPort(name="apps/a/http,apps/b/http", port=80, protocol="TCP"),)
    assert infra.envoy == ir.EnvoySettings(concurrency=2)
    # statuses are per Gateway, as without merging
    unmerged = translate(snapshot(*objects(merged=False)), LOCAL)
    assert res.statuses == unmerged.statuses
    assert sorted(unmerged.xds) == ["apps/a", "apps/b"]


def test_programmed_per_gateway_from_the_class_nodes_acknowledgements() -> None:
    snap = snapshot(*objects())
    waiting = translate(
        snap, msgspec.structs.replace(LOCAL, dataplane={"apps/a": DataplaneState(acked=True)})
    )
    for gw in ("a", "b"):  # the Gateways' own names are no Envoy's nodes any more
        assert cond(waiting.statuses[("Gateway", "apps", gw)], "Programmed")[:2] == (
            "False",
            "Pending",
        )
    acked = translate(
        snap, msgspec.structs.replace(LOCAL, dataplane={NODE: DataplaneState(acked=True)})
    )
    for gw in ("a", "b"):
        assert cond(acked.statuses[("Gateway", "apps", gw)], "Programmed")[:2] == (
            "True",
            "Programmed",
        )
    nacked = translate(
        snap, msgspec.structs.replace(LOCAL, dataplane={NODE: DataplaneState(error="bad")})
    )
    assert cond(nacked.statuses[("Gateway", "apps", "b")], "Programmed")[0] == "False"


def test_two_gateways_of_a_merged_class_on_one_address_and_port_the_older_keeps_it() -> None:
    res = translate(
        snapshot(
            *gateway_class(),
            gateway("new", "10.0.0.5", created="2026-02-01T00:00:00Z"),
            gateway("old", "10.0.0.5"),
        ),
        LOCAL,
    )
    listeners: Any = res.statuses[("Gateway", "apps", "new")]["listeners"]
    new = listeners[0]
    assert cond(new, "Accepted")[:2] == ("False", "PortUnavailable")
    assert "apps/old" in cond(new, "Accepted")[2]
    assert [(p.name, p.address) for p in res.xds[NODE].ports] == [("apps/old/80", "10.0.0.5")]


def test_merge_gateways_on_a_gateways_own_parameters_is_invalid_parameters() -> None:
    res = translate(
        snapshot(
            *objects(),
            params("mine", {"mergeGateways": False}),
            gateway("c", "10.0.0.5", port=81, own_params="mine"),
        ),
        LOCAL,
    )
    assert cond(res.statuses[("Gateway", "apps", "c")], "Accepted")[:2] == (
        "False",
        "InvalidParameters",
    )
    assert (
        "mergeGateways is a GatewayClass setting"
        in cond(res.statuses[("Gateway", "apps", "c")], "Accepted")[2]
    )
    assert [p.name for p in res.xds[NODE].ports] == ["apps/a/80", "apps/b/80"]


KUBE = TranslateOptions(address_mode="kubernetes", privileged_ports_below=1024)


def class_service(ingress: str | None = None) -> dict[str, Any]:
    """The merged class's Envoy Service as the Kubernetes data plane labels it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "shared-envoy",
            "namespace": "gateweave-system",
            "labels": ir.class_envoy_labels("gc"),
        },
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ingress}] if ingress else []}},
    }


def kube_objects(merged: bool = True) -> list[dict[str, Any]]:
    """:func:`objects` with b on port 81: in one Envoy pod both bind 0.0.0.0."""
    raws = objects(merged)
    raws[0]["metadata"]["uid"] = "class-uid"
    raws[4]["spec"]["listeners"][0]["port"] = 81
    return raws


def test_kubernetes_mode_merges_into_one_envoy_owned_by_the_class() -> None:
    raws = kube_objects()
    res = translate(snapshot(*raws), KUBE)
    assert list(res.xds) == [NODE] and list(res.infra) == [NODE]
    infra = res.infra[NODE]
    assert infra.uid == "class-uid"  # the GatewayClass owns the shared objects
    # every address the Gateways request, for the one Service
    assert infra.requested_addresses == ("10.0.0.5", "10.0.0.6")
    assert [(p.name, p.address) for p in res.xds[NODE].ports] == [
        ("apps/a/80", "0.0.0.0"),
        ("apps/b/81", "0.0.0.0"),
    ]


def test_kubernetes_mode_merged_gateways_on_one_port_the_older_keeps_it() -> None:
    """In a pod every listener binds 0.0.0.0: two merged Gateways on port 80 collide (the
    older keeps it, no privileged-port rule in a pod); unmerged ones each have their own."""
    raws = [
        *gateway_class(),
        gateway("new", "", created="2026-02-01T00:00:00Z"),
        gateway("old", ""),
    ]
    for raw in raws[2:]:
        del raw["spec"]["addresses"]
    res = translate(snapshot(*raws), KUBE)
    statuses: Any = res.statuses
    new = statuses[("Gateway", "apps", "new")]["listeners"][0]
    assert cond(new, "Accepted")[:2] == ("False", "PortUnavailable")
    assert "apps/old" in cond(new, "Accepted")[2]
    old = statuses[("Gateway", "apps", "old")]["listeners"][0]
    assert cond(old, "Accepted")[:2] == ("True", "Accepted")
    assert [p.name for p in res.xds[NODE].ports] == ["apps/old/80"]
    raws[1:2] = gateway_class(merged=False)[1:]
    unmerged = translate(snapshot(*raws), KUBE)
    assert sorted(unmerged.xds) == ["apps/new", "apps/old"]
    statuses = unmerged.statuses
    new = statuses[("Gateway", "apps", "new")]["listeners"][0]
    assert cond(new, "Accepted")[:2] == ("True", "Accepted")


def test_kubernetes_mode_merged_gateways_have_the_class_services_address() -> None:
    raws = [o for o in kube_objects() if o["kind"] != "Gateway"]
    raws += [gateway("a", ""), gateway("b", "", port=81)]
    for raw in raws[-2:]:
        del raw["spec"]["addresses"]
    waiting = translate(snapshot(*raws), KUBE)
    statuses: Any = waiting.statuses
    for gw in ("a", "b"):
        status = statuses[("Gateway", "apps", gw)]
        assert cond(status, "Programmed")[:2] == ("False", "AddressNotAssigned")
        assert "shared Envoy Service of GatewayClass gc" in cond(status, "Programmed")[2]
    assert list(waiting.infra) == [NODE]  # served meanwhile: the Service must be made
    found = translate(snapshot(*raws, class_service("203.0.113.9")), KUBE)
    statuses = found.statuses
    for gw in ("a", "b"):
        assert statuses[("Gateway", "apps", gw)]["addresses"] == [
            {"type": "IPAddress", "value": "203.0.113.9"}
        ]
    # a Gateway's own Service (by the Gateway's labels) is not the merged class's
    own = {
        **class_service("198.51.100.1"),
        "metadata": {"name": "x", "namespace": "apps", "labels": ir.envoy_labels("a")},
    }
    assert translate(snapshot(*raws, own), KUBE).statuses == waiting.statuses


def test_kubernetes_mode_incremental_equals_full_as_the_class_service_and_merging_change() -> None:
    inc = IncrementalTranslator(check=True)
    base = kube_objects()
    steps = [
        base,
        [*base, class_service()],
        [*base, class_service("203.0.113.9")],
        [*kube_objects(merged=False), class_service("203.0.113.9")],
        [*base, class_service("203.0.113.9")],
        base,
    ]
    for raws in steps:
        assert inc(snapshot(*raws), KUBE) == translate(snapshot(*raws), KUBE)


def test_incremental_equals_full_as_merging_and_gateways_change() -> None:
    inc = IncrementalTranslator(check=True)  # raises on any difference from a full translation
    base = objects()
    steps = [
        base,
        [*base, route("rb2", "b", "b2.example")],
        [*base[:-1]],  # a route gone
        [o for o in base if o["metadata"].get("name") != "a"],  # a Gateway gone: b still served
        objects(merged=False),
        base,
    ]
    for raws in steps:
        res = inc(snapshot(*raws), LOCAL)
        assert res == translate(snapshot(*raws), LOCAL)
    gone = inc(snapshot(*[o for o in base if o["metadata"].get("name") != "a"]), LOCAL)
    assert [p.name for p in gone.xds[NODE].ports] == ["apps/b/80"]


def test_the_dashboard_reads_which_gateway_serves_which_route_through_a_merged_node() -> None:
    res = translate(snapshot(*objects()), LOCAL)
    served = served_listeners(
        res.xds, res.infra, {("apps/a", "http"): None, ("apps/b", "http"): None}
    )
    assert served == {
        ("apps/a", "HTTPRoute/apps/ra"): {"http"},
        ("apps/b", "HTTPRoute/apps/rb"): {"http"},
    }
    unmerged = translate(snapshot(*objects(merged=False)), LOCAL)
    assert (
        served_listeners(
            unmerged.xds, unmerged.infra, {("apps/a", "http"): None, ("apps/b", "http"): None}
        )
        == served
    )


def test_a_merged_envoy_logs_and_traces_as_the_class_says_whatever_a_gateways_own_say() -> None:
    class_spec = {"mergeGateways": True, "telemetry": {"accessLog": {"format": "text"}}}
    raws = [
        gateway_class()[0],
        params("shared", class_spec, "infra"),
        SERVICE,
        gateway("a", "10.0.0.5", own_params="quiet"),
        gateway("b", "10.0.0.6"),
        params("quiet", {"telemetry": {"accessLog": {"sink": "off"}}}),
    ]
    xds = translate(snapshot(*raws), LOCAL).xds[NODE]
    assert xds.telemetry.access_log_format == "text" and xds.telemetry.access_log == "file"
