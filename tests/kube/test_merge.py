"""mergeGateways in Kubernetes mode against the API stand-in: the Gateways of a merged class
share one Envoy Deployment, Service, ServiceAccount, ConfigMap and xDS client Secret, named
for the class, in the controller's namespace, owned by the GatewayClass; the Service carries
every Gateway's listener ports; each Gateway's addresses are that Service's and its
Programmed comes from the class node's pods (an in-test ADS client per pod). Switching the
class's ``mergeGateways`` on and off converges both ways, and the last Gateway gone takes the
shared objects with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from gateweave import ir
from gateweave.app import KubeDataplane
from gateweave.kube.pods import EnvoyPod, EnvoyPods
from gateweave.sinks.kubeinfra import (
    STATS_PORT,
    KubernetesInfra,
    class_object_name,
    node_id,
    object_name,
)
from gateweave.translate.merging import node_of
from gateweave.xds import pki
from tests.kube.test_infra import conditions, free_port, until
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig
from tests.support.xdsclient import envoy_pod, secret_files

GWAPI = "gateway.networking.k8s.io/v1"
CONTROLLER_NS = "gateweave-system"
NAME = class_object_name("gw")
NODE = node_of("gw")
KINDS = ("Deployment", "Service", "ServiceAccount", "ConfigMap", "Secret")
GATEWAYS = (("apps", "a", 8080), ("web", "b", 8081))


def parameters(merge: bool) -> dict[str, Any]:
    return {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": {"name": "shared", "namespace": "infra"},
        "spec": {"mergeGateways": merge, "kubernetes": {"replicas": 2}},
    }


def gateway(namespace: str, name: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": GWAPI,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "gatewayClassName": "gw",
            "listeners": [{"name": "http", "protocol": "HTTP", "port": port}],
        },
    }


def load(api: KubeAPI, merge: bool = True) -> None:
    api.put(
        {
            "apiVersion": GWAPI,
            "kind": "GatewayClass",
            "metadata": {"name": "gw"},
            "spec": {
                "controllerName": "gateweave.io/gateway-controller",
                "parametersRef": {
                    "group": "gateweave.io",
                    "kind": "GatewayParameters",
                    "name": "shared",
                    "namespace": "infra",
                },
            },
        }
    )
    api.put(parameters(merge))
    for ns, name, port in GATEWAYS:
        api.put(gateway(ns, name, port))


def dataplane(xds_port: int) -> KubeDataplane:
    return KubeDataplane(
        xds_bind="127.0.0.1",
        xds_port=xds_port,
        xds_host="gateweave.gateweave-system.svc",
        service_type="LoadBalancer",
    )


def shared(api: KubeAPI) -> dict[str, Any]:
    """The merged class's objects that exist, by kind."""
    found = {kind: api.get(kind, CONTROLLER_NS, NAME) for kind in KINDS}
    return {kind: obj for kind, obj in found.items() if obj is not None}


def own(api: KubeAPI) -> dict[tuple[str, str], Any]:
    """Each Gateway's own objects that exist, by (kind, Gateway)."""
    out = {}
    for ns, name, _port in GATEWAYS:
        for kind in KINDS:
            obj = api.get(kind, ns, object_name(name))
            if obj is not None:
                out[(kind, name)] = obj
    return out


def status(api: KubeAPI, ns: str, name: str) -> dict[str, Any]:
    gw = api.get("Gateway", ns, name)
    assert gw is not None
    return cast(dict[str, Any], gw["status"])


async def test_a_merged_class_is_one_deployment_and_service_owned_by_the_class(
    tmp_path: Path,
) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    load(api)
    xds_port = free_port()
    try:
        async with serving(
            api,
            write_kubeconfig(api, str(tmp_path / "kc")),
            dataplane(xds_port),
            lease_namespace=CONTROLLER_NS,
        ) as (runtime, source):
            await settle(api, runtime, source)
            gc = api.get("GatewayClass", "", "gw")
            assert gc is not None
            objs = shared(api)
            assert set(objs) == set(KINDS)
            assert own(api) == {}  # no Gateway has objects of its own
            for kind, obj in objs.items():
                meta = obj["metadata"]
                assert meta["ownerReferences"] == [
                    {
                        "apiVersion": GWAPI,
                        "kind": "GatewayClass",
                        "name": "gw",
                        "uid": gc["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ], kind
                assert ir.class_envoy_labels("gw").items() <= meta["labels"].items(), kind
                assert ir.GATEWAY_NAME_LABEL not in meta["labels"], kind
            dep, svc = objs["Deployment"], objs["Service"]
            assert dep["spec"]["replicas"] == 2  # the class's parameters
            assert dep["spec"]["selector"]["matchLabels"] == ir.class_envoy_labels("gw")
            assert svc["spec"]["selector"] == ir.class_envoy_labels("gw")
            # one Service with every Gateway's listener port
            assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
                (8080, 8080),
                (8081, 8081),
            ]
            container = dep["spec"]["template"]["spec"]["containers"][0]
            assert [p["containerPort"] for p in container["ports"]] == [8080, 8081, STATS_PORT]
            # the pods are the class's xDS node, with its client certificate
            args = container["args"]
            assert args[args.index("--service-node") + 1] == node_id(NODE, "$(POD_NAME)")
            boot = json.loads(objs["ConfigMap"]["data"]["bootstrap.json"])
            assert boot["node"]["id"] == NODE
            files = secret_files(objs["Secret"])
            assert pki.identities(files["tls.crt"]) == [
                "spiffe://gateweave/ns/gatewayclass.gateweave.io/gateway/gw"
            ]
            assert dep["spec"]["template"]["spec"]["serviceAccountName"] == NAME

            # no load balancer address yet: each Gateway waits for the shared Service's
            for ns, name, _port in GATEWAYS:
                programmed = conditions(status(api, ns, name))["Programmed"]
                assert programmed == ("False", "AddressNotAssigned")
            api._update(
                api.rtype("Service"),
                CONTROLLER_NS,
                NAME,
                {**svc, "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}},
                True,
                "cloud",
            )
            await settle(api, runtime, source)
            for ns, name, _port in GATEWAYS:
                st = status(api, ns, name)
                assert st["addresses"] == [{"type": "IPAddress", "value": "203.0.113.7"}]
                assert conditions(st)["Programmed"] == ("False", "Pending")

            # the class's pods (the Deployment asks for 2) take the configuration: both
            # Gateways' listeners, each Gateway programmed once both pods run it
            async with envoy_pod(xds_port, node_id(NODE, "envoy-0"), files) as first:
                await until(lambda: len(first) == 2)
                assert sorted(lst.address.socket_address.port_value for lst in first) == [
                    8080,
                    8081,
                ]
                await settle(api, runtime, source)
                programmed = conditions(status(api, "apps", "a"))["Programmed"]
                assert programmed == ("False", "Pending")  # 1 of 2 pods
                async with envoy_pod(xds_port, node_id(NODE, "envoy-1"), files):
                    await until(
                        lambda: all(
                            runtime.last_result is not None
                            and conditions(runtime.last_result.statuses[("Gateway", ns, n)])[
                                "Programmed"
                            ][0]
                            == "True"
                            for ns, n, _p in GATEWAYS
                        )
                    )
                    await settle(api, runtime, source)
                    for ns, name, _port in GATEWAYS:
                        programmed = conditions(status(api, ns, name))["Programmed"]
                        assert programmed == ("True", "Programmed")

            # a third Gateway on a port another of the class holds: the older keeps it
            api.put(gateway("web", "c", 8080))
            await settle(api, runtime, source)
            listener = status(api, "web", "c")["listeners"][0]
            accepted = conditions(listener)["Accepted"]
            assert accepted == ("False", "PortUnavailable")
            message = next(c["message"] for c in listener["conditions"] if c["type"] == "Accepted")
            assert "apps/a" in message
            svc = api.get("Service", CONTROLLER_NS, NAME)
            assert svc is not None and [p["port"] for p in svc["spec"]["ports"]] == [8080, 8081]

            # one Gateway gone: the Service keeps the other's port; the last gone: all go
            api.remove("Gateway", "web", "b")
            await settle(api, runtime, source)
            svc = api.get("Service", CONTROLLER_NS, NAME)
            assert svc is not None and [p["port"] for p in svc["spec"]["ports"]] == [8080]
            api.remove("Gateway", "web", "c")
            api.remove("Gateway", "apps", "a")
            await settle(api, runtime, source)
            assert shared(api) == {} and own(api) == {}
    finally:
        await api.stop()


async def test_switching_merge_gateways_on_and_off_converges(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    load(api, merge=False)
    try:
        async with serving(
            api,
            write_kubeconfig(api, str(tmp_path / "kc")),
            dataplane(free_port()),
            lease_namespace=CONTROLLER_NS,
        ) as (runtime, source):
            await settle(api, runtime, source)
            assert shared(api) == {} and len(own(api)) == len(KINDS) * len(GATEWAYS)

            api.put(parameters(True))  # on: each Gateway's objects go, the class's come
            await settle(api, runtime, source)
            assert set(shared(api)) == set(KINDS) and own(api) == {}
            svc = shared(api)["Service"]
            assert [p["port"] for p in svc["spec"]["ports"]] == [8080, 8081]
            runtime_infra = runtime.last_result.infra
            assert list(runtime_infra) == [NODE]

            api.put(parameters(False))  # and off again
            await settle(api, runtime, source)
            assert shared(api) == {}
            owned = own(api)
            assert len(owned) == len(KINDS) * len(GATEWAYS)
            for ns, name, port in GATEWAYS:
                gw = api.get("Gateway", ns, name)
                assert gw is not None
                for kind in KINDS:
                    owner = owned[(kind, name)]["metadata"]["ownerReferences"][0]
                    assert (owner["kind"], owner["uid"]) == ("Gateway", gw["metadata"]["uid"])
                svc = owned[("Service", name)]
                assert [p["port"] for p in svc["spec"]["ports"]] == [port]
    finally:
        await api.stop()


def test_a_merged_class_pods_statistics_are_read_as_the_class_node() -> None:
    """The pods of the shared Deployment (in its namespace, with the class's label) count as
    the class's Envoy; a Gateway's pods as the Gateway's."""
    infra = KubernetesInfra(cast(Any, None), xds_host="x", xds_port=1, namespace=CONTROLLER_NS)
    infra.desired = {
        NODE: ir.InfraGateway(
            name=NODE,
            namespace="gatewayclass.gateweave.io",
            gateway_name="gw",
            gateway_class="gw",
            address="0.0.0.0",
        ),
        "apps/a": ir.InfraGateway(
            name="apps/a", namespace="apps", gateway_name="a", gateway_class="x", address="0.0.0.0"
        ),
    }
    pods = EnvoyPods(cast(Any, None), infra.pod_owners)

    def pod(ns: str, name: str, labels: dict[str, str], ip: str) -> EnvoyPod:
        return EnvoyPod(namespace=ns, name=name, labels=labels, ip=ip, ready=True)

    pods.pods = {
        (p.namespace, p.name): p
        for p in (
            pod(CONTROLLER_NS, "shared-1", ir.class_envoy_labels("gw"), "10.1.0.1"),
            pod("apps", "shared-2", ir.class_envoy_labels("gw"), "10.1.0.2"),  # not its namespace
            pod("apps", "a-1", ir.envoy_labels("a"), "10.1.0.3"),
        )
    }
    assert {(e.gateway, e.pod): a for e, a in pods.stats_addresses().items()} == {
        (NODE, "shared-1"): f"10.1.0.1:{STATS_PORT}",
        ("apps/a", "a-1"): f"10.1.0.3:{STATS_PORT}",
    }


async def test_a_switch_made_while_no_controller_ran_converges_at_the_next_start(
    tmp_path: Path,
) -> None:
    """gateweave stopped, the class switches merging, gateweave starts: the objects of the
    shape no longer wanted (which its owner keeps alive) are deleted, both ways."""
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    load(api, merge=False)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    try:
        for merge in (False, True, False):
            api.put(parameters(merge))
            async with serving(api, kc, dataplane(free_port()), lease_namespace=CONTROLLER_NS) as (
                runtime,
                source,
            ):
                await settle(api, runtime, source)
                if merge:
                    assert set(shared(api)) == set(KINDS) and own(api) == {}
                else:
                    assert shared(api) == {} and len(own(api)) == len(KINDS) * len(GATEWAYS)
    finally:
        await api.stop()
