"""The Kubernetes data plane's infrastructure against the API-server stand-in: per Gateway
an Envoy Deployment, Service, ServiceAccount and bootstrap ConfigMap, owned by the Gateway,
with spec.infrastructure labels/annotations; listeners binding 0.0.0.0 (checked with an
in-test ADS client standing in for the Envoy pod); status.addresses from the Service, as
translate computes it (Kubernetes addressing mode)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from gateweave.app import KubeDataplane
from gateweave.sinks.kubeinfra import STATS_PORT, object_name
from gateweave.xds import pki
from gateweave_conformance import generated
from gateweave_conformance import manifests as mf
from gateweave_conformance.cases import load_case
from tests.support.data import EXTRA_CASES, MANIFESTS, QUICKSTART
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig
from tests.support.xdsclient import envoy_pod, secret_files


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("condition not met")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_envoy_infrastructure_per_gateway(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            if doc["kind"] == "Gateway":
                doc["spec"]["infrastructure"] = {
                    "labels": {"team": "edge"},
                    "annotations": {"note": "hi"},
                }
                del doc["spec"]["addresses"]
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    name = object_name("quickstart")
    xds_port = free_port()
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(
                xds_bind="127.0.0.1",
                xds_port=xds_port,
                xds_host="gateweave.gateweave-system.svc",
                service_type="LoadBalancer",
            ),
        ) as (
            runtime,
            source,
        ):
            await settle(api, runtime, source)
            gw = api.get("Gateway", "default", "quickstart")
            assert gw is not None
            objs: dict[str, Any] = {
                k: api.get(k, "default", name)
                for k in ("Deployment", "Service", "ServiceAccount", "ConfigMap", "Secret")
            }
            for kind, obj in objs.items():
                assert obj is not None, kind
                assert obj["metadata"]["ownerReferences"][0]["uid"] == gw["metadata"]["uid"]
                assert obj["metadata"]["labels"]["team"] == "edge"
                assert obj["metadata"]["annotations"]["note"] == "hi"
            dep, svc = objs["Deployment"], objs["Service"]
            pod = dep["spec"]["template"]
            assert (
                pod["metadata"]["labels"]["team"] == "edge"
                and pod["spec"]["serviceAccountName"] == name
            )
            assert [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]] == [
                8080,
                STATS_PORT,  # the statistics (tests/kube/test_pod_stats.py)
            ]
            assert svc["spec"]["type"] == "LoadBalancer" and svc["spec"]["ports"][0]["port"] == 8080
            boot = json.loads(objs["ConfigMap"]["data"]["bootstrap.json"])
            xds = boot["static_resources"]["clusters"][0]
            assert xds["type"] == "STRICT_DNS"
            assert boot["node"]["id"] == "default/quickstart"
            # xDS is mutual TLS: the pod mounts its Gateway's client certificate (the Secret)
            assert (
                xds["transport_socket"]["typed_config"]["sni"] == "gateweave.gateweave-system.svc"
            )
            assert {"name": "xds-tls", "secret": {"secretName": name}} in pod["spec"]["volumes"]
            assert set(objs["ConfigMap"]["data"]) == {
                "bootstrap.json",
                "xds-client-sds.json",
                "xds-ca-sds.json",
            }
            files = secret_files(objs["Secret"])
            assert pki.identities(files["tls.crt"]) == [
                "spiffe://gateweave/ns/default/gateway/quickstart"
            ]
            assert "PRIVATE KEY" in files["tls.key"] and "BEGIN CERTIFICATE" in files["ca.crt"]
            applies = [
                r for r in api.requests(verb="patch") if r.resource in ("deployments", "services")
            ]
            assert applies and all(r.code == 200 for r in applies)

            # a LoadBalancer Service without ingress yet: no address, not programmed, yet served
            status = api.get("Gateway", "default", "quickstart")["status"]  # type: ignore[index]
            assert "addresses" not in status
            assert conditions(status)["Programmed"] == ("False", "AddressNotAssigned")
            xds = runtime.last_result.xds["default/quickstart"]
            assert xds.address == "0.0.0.0"

            # the Envoy pod connects and acknowledges: listeners bind 0.0.0.0
            async with envoy_pod(xds_port, "default/quickstart", files) as listeners:
                await until(lambda: bool(listeners))
                assert {lst.address.socket_address.address for lst in listeners} == {"0.0.0.0"}
                await settle(api, runtime, source)
                status = api.get("Gateway", "default", "quickstart")["status"]  # type: ignore[index]
                assert conditions(status)["Programmed"] == ("False", "AddressNotAssigned")

                # the cloud controller writes the load balancer's address (status subresource):
                # a translation, and the Gateway has the address and is programmed
                translations = runtime.translations
                svc = api.get("Service", "default", name)
                assert svc is not None
                api._update(
                    api.rtype("Service"),
                    "default",
                    name,
                    {**svc, "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}},
                    True,
                    "cloud",
                )
                await settle(api, runtime, source)
                assert runtime.translations > translations
                status = api.get("Gateway", "default", "quickstart")["status"]  # type: ignore[index]
                assert status["addresses"] == [{"type": "IPAddress", "value": "203.0.113.7"}]
                assert conditions(status)["Programmed"] == ("True", "Programmed")
                assert api.get("Service", "default", name)["spec"].get("loadBalancerIP") is None  # type: ignore[index]

            # the Gateway goes: so does its infrastructure
            api.remove("Gateway", "default", "quickstart")
            await settle(api, runtime, source)
            await asyncio.sleep(0.05)
            assert all(
                api.get(k, "default", name) is None
                for k in ("Deployment", "Service", "ServiceAccount", "ConfigMap", "Secret")
            )
    finally:
        await api.stop()


async def test_requested_address_goes_into_the_service(tmp_path: Path) -> None:
    """A ClusterIP Service: the requested IP becomes an externalIP, and the Gateway's
    addresses are the externalIPs then the cluster IP (no load balancer to wait for)."""
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            if doc["kind"] == "Gateway":
                doc["spec"]["addresses"] = [{"type": "IPAddress", "value": "192.0.2.10"}]
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    name = object_name("quickstart")
    xds_port = free_port()
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(xds_bind="127.0.0.1", xds_port=xds_port, service_type="ClusterIP"),
        ) as (runtime, source):
            await settle(api, runtime, source)
            svc = api.get("Service", "default", name)
            assert svc is not None
            assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["externalIPs"] == [
                "192.0.2.10"
            ]
            status = api.get("Gateway", "default", "quickstart")["status"]  # type: ignore[index]
            assert status["addresses"] == [
                {"type": "IPAddress", "value": "192.0.2.10"},
                {"type": "IPAddress", "value": svc["spec"]["clusterIP"]},
            ]
            assert conditions(status)["Programmed"] == (
                "False",
                "Pending",
            )  # no Envoy has acknowledged
            secret = api.get("Secret", "default", name)
            assert secret is not None
            async with envoy_pod(xds_port, "default/quickstart", secret_files(secret)):
                await until(
                    lambda: (
                        runtime.last_result is not None
                        and conditions(
                            runtime.last_result.statuses[("Gateway", "default", "quickstart")]
                        )["Programmed"][0]
                        == "True"
                    )
                )
                await settle(api, runtime, source)
                status = api.get("Gateway", "default", "quickstart")["status"]  # type: ignore[index]
                assert conditions(status)["Programmed"] == ("True", "Programmed")
    finally:
        await api.stop()


async def test_gateway_infrastructure_case_holds_for_what_the_infra_sink_created(
    tmp_path: Path,
) -> None:
    """GatewayInfrastructurePropagation in Kubernetes mode: the transcribed upstream check (the
    generated_objects step of tests/conformance_extra's GatewayInfrastructure) holds for the objects
    the infra sink created in the stand-in. No Deployment controller runs there: a Pod is what the
    Deployment's pod template makes."""
    case = load_case(EXTRA_CASES / "GatewayInfrastructure.yaml")
    (step,) = [s.generated for s in case.steps if s.generated is not None]
    subs = mf.Substitutions()
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    api.put(mf.gateway_class(subs))
    for rel in case.manifests:
        for src in mf.load_file(MANIFESTS, rel, subs):
            api.put(src.obj)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    namespace, _, gateway = step.gateway.partition("/")
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(xds_bind="127.0.0.1", xds_port=free_port(), service_type="ClusterIP"),
        ) as (runtime, source):
            await settle(api, runtime, source)
            pods = [
                {
                    "metadata": {
                        **d["spec"]["template"]["metadata"],
                        "namespace": d["metadata"]["namespace"],
                        "name": d["metadata"]["name"] + "-pod",
                    }
                }
                for d in api.objects("Deployment")
            ]
            listed = {
                "ServiceAccount": api.objects("ServiceAccount"),
                "Pod": pods,
                "Service": api.objects("Service"),
            }
            assert set(listed) == set(step.kinds)
            found = {
                kind: generated.labelled(objects, namespace, gateway)
                for kind, objects in listed.items()
            }
            assert all(len(objects) == 1 for objects in found.values()), found
            assert generated.check(step, found) is None
            wrong = msgspec.structs.replace(step, annotations={"key1": "other"})
            assert "lack {'key1': 'other'}" in str(generated.check(wrong, found))
            # the Envoy the pods run carries them as its node metadata, as on one machine
            config = api.get("ConfigMap", namespace, object_name(gateway))
            assert config is not None
            node = json.loads(config["data"]["bootstrap.json"])["node"]
            assert (node["metadata"]["labels"], node["metadata"]["annotations"]) == (
                step.labels,
                step.annotations,
            )
    finally:
        await api.stop()


def test_load_balancer_service_requests_its_ip() -> None:
    from gateweave.ir import InfraGateway, InfraPort
    from gateweave.sinks.kubeinfra import KubernetesInfra

    gw = InfraGateway(
        name="default/gw",
        namespace="default",
        gateway_name="gw",
        gateway_class="gc",
        address="0.0.0.0",
        ports=(InfraPort(name="dns", port=53, protocol="UDP"),),
        requested_addresses=("192.0.2.10",),
    )
    infra = KubernetesInfra(None, xds_host="10.0.0.1", xds_port=18000)  # type: ignore[arg-type]
    spec = next(obj for _path, obj in infra.manifests(gw) if obj["kind"] == "Service")["spec"]
    assert (
        spec["type"] == "LoadBalancer"
        and spec["loadBalancerIP"] == "192.0.2.10"
        and "externalIPs" not in spec
    )
    assert spec["ports"] == [{"name": "udp-53", "port": 53, "targetPort": 53, "protocol": "UDP"}]


def test_gateway_parameters_shape_the_deployment_and_service() -> None:
    from gateweave.ir import EnvoySettings, InfraGateway, InfraPort, KubernetesSettings
    from gateweave.sinks.kubeinfra import KubernetesInfra

    base = InfraGateway(
        name="default/gw",
        namespace="default",
        gateway_name="gw",
        gateway_class="gc",
        address="0.0.0.0",
        ports=(InfraPort(name="http", port=80, protocol="TCP"),),
        requested_addresses=("192.0.2.10",),
    )
    infra = KubernetesInfra(None, xds_host="10.0.0.1", xds_port=18000)  # type: ignore[arg-type]

    def rendered(gw: InfraGateway) -> tuple[dict[str, Any], dict[str, Any]]:
        objs = {obj["kind"]: obj for _path, obj in infra.manifests(gw)}
        return objs["Deployment"]["spec"], objs["Service"]["spec"]

    deployment, service = rendered(base)  # no parameters: one replica, Envoy's own concurrency
    container = deployment["template"]["spec"]["containers"][0]
    assert (
        deployment["replicas"] == 1
        and "resources" not in container
        and service["type"] == "LoadBalancer"
    )
    assert "--concurrency" not in container["args"]
    # the drain time is always given: the preStop hook waits it (the host data plane's default)
    assert container["args"][container["args"].index("--drain-time-s") + 1] == "5"
    assert container["args"][container["args"].index("--log-level") + 1] == "warn"
    # no walk over every field of each xDS update (docs/benchmarks.md)
    assert "--ignore-unknown-dynamic-fields" in container["args"]

    tuned = msgspec.structs.replace(
        base,
        envoy=EnvoySettings(
            concurrency=4,
            log_level="debug",
            drain_time_s=30,
            extra_args=("--component-log-level", "upstream:debug"),
        ),
        kubernetes=KubernetesSettings(
            replicas=3, service_type="NodePort", requests={"cpu": "100m"}, limits={"memory": "1Gi"}
        ),
    )
    deployment, service = rendered(tuned)
    container = deployment["template"]["spec"]["containers"][0]
    assert deployment["replicas"] == 3
    assert container["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}
    assert container["args"] == [
        "--config-path",
        "/etc/envoy/bootstrap.json",
        "--log-level",
        "debug",
        "--disable-hot-restart",
        "--concurrency",
        "4",
        "--drain-time-s",
        "30",
        "--service-node",
        "default/gw/$(POD_NAME)",
        "--ignore-unknown-dynamic-fields",
        "--component-log-level",
        "upstream:debug",
    ]
    # extraArgs asking for Envoy's strict check of unknown fields get it: the flag that would
    # override it is left out
    strict = msgspec.structs.replace(
        tuned, envoy=EnvoySettings(extra_args=("--reject-unknown-dynamic-fields",))
    )
    args = rendered(strict)[0]["template"]["spec"]["containers"][0]["args"]
    assert "--reject-unknown-dynamic-fields" in args
    assert "--ignore-unknown-dynamic-fields" not in args
    # named by the parameters themselves: once (Envoy refuses to start on a flag given twice)
    named = msgspec.structs.replace(
        tuned, envoy=EnvoySettings(extra_args=("--ignore-unknown-dynamic-fields",))
    )
    args = rendered(named)[0]["template"]["spec"]["containers"][0]["args"]
    assert args.count("--ignore-unknown-dynamic-fields") == 1
    # a NodePort Service gets the requested address as an external IP, not loadBalancerIP
    assert (
        service["type"] == "NodePort"
        and service["externalIPs"] == ["192.0.2.10"]
        and "loadBalancerIP" not in service
    )
