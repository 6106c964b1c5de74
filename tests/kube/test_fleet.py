"""Envoy fleets (issue 19, part 3) against the API stand-in: a Gateway's GatewayParameters
give its Envoy Deployment replicas, a PodDisruptionBudget and an autoscaler (absent when not
asked for, deleted when the ask goes away); the pods drain before they stop; and Programmed
says which of the Gateway's pods (in-test ADS clients, each its own node ``ns/name/pod``)
run the current configuration."""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateweave.app import KubeDataplane
from gateweave.infra.host import default_envoy_path
from gateweave.sinks.kubeinfra import (
    DEFAULT_DRAIN_S,
    STOP_MARGIN_S,
    drain_hook,
    node_id,
    object_name,
)
from tests.kube.test_replicas import until
from tests.support.data import QUICKSTART
from tests.support.envoypod import envoy_pod, free_port
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig
from tests.support.xdsclient import secret_files

LEADER: dict[str, Any] = {
    "leader_elect": True,
    "lease_duration": 2.0,
    "renew_deadline": 1.5,
    "retry_period": 0.1,
    "lease_namespace": "gateweave-system",
}
NAME = object_name("quickstart")


def programmed(api: KubeAPI) -> tuple[str, str]:
    gw = api.get("Gateway", "default", "quickstart") or {}
    for c in (gw.get("status") or {}).get("conditions") or []:
        if c["type"] == "Programmed":
            return c["status"], c["message"]
    return "", ""


def parameters(kubernetes: dict[str, Any], envoy: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": {"name": "fleet", "namespace": "default"},
        "spec": {"kubernetes": kubernetes, **({"envoy": envoy} if envoy else {})},
    }


def load(api: KubeAPI, kubernetes: dict[str, Any], envoy: dict[str, Any] | None = None) -> None:
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc and doc["kind"] == "Gateway":
            doc = copy.deepcopy(doc)
            doc["spec"]["addresses"] = [
                {"type": "IPAddress", "value": "192.0.2.10"}
            ]  # no load balancer to wait for
            doc["spec"]["infrastructure"] = {
                "parametersRef": {
                    "group": "gateweave.io",
                    "kind": "GatewayParameters",
                    "name": "fleet",
                }
            }
        if doc:
            api.put(doc)
    api.put(parameters(kubernetes, envoy))


def dataplane() -> KubeDataplane:
    return KubeDataplane(xds_bind="127.0.0.1", xds_port=free_port(), service_type="ClusterIP")


async def test_disruption_budget_and_autoscaler_when_asked_for(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    load(
        api,
        {
            "replicas": 3,
            "podDisruptionBudget": {"maxUnavailable": "25%"},
            "autoscaling": {
                "minReplicas": 2,
                "maxReplicas": 6,
                "cpuUtilization": 70,
                "memoryUtilization": 80,
            },
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        },
        {"drainTimeout": "20s"},
    )
    try:
        async with serving(api, write_kubeconfig(api, str(tmp_path / "kc")), dataplane()) as (
            runtime,
            source,
        ):
            await settle(api, runtime, source)
            gw = api.get("Gateway", "default", "quickstart")
            pdb = api.get("PodDisruptionBudget", "default", NAME)
            hpa = api.get("HorizontalPodAutoscaler", "default", NAME)
            dep = api.get("Deployment", "default", NAME)
            assert gw is not None and pdb is not None and hpa is not None and dep is not None
            for obj in (pdb, hpa):  # owned by the Gateway, as the other generated objects
                assert obj["metadata"]["ownerReferences"][0]["uid"] == gw["metadata"]["uid"]
            assert pdb["spec"] == {
                "maxUnavailable": "25%",
                "selector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]},
            }
            assert hpa["spec"] == {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
                "minReplicas": 2,
                "maxReplicas": 6,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 70},
                        },
                    },
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "memory",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    },
                ],
            }
            assert "replicas" not in dep["spec"]  # the autoscaler's to decide, not fought over
            # the pods drain before they stop: the preStop hook waits the drain time, within the
            # grace period
            pod = dep["spec"]["template"]["spec"]
            container = pod["containers"][0]
            assert container["args"][container["args"].index("--drain-time-s") + 1] == "20"
            hook = " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
            assert "/drain_listeners?graceful" in hook and hook.endswith("sleep 20")
            assert pod["terminationGracePeriodSeconds"] == 20 + STOP_MARGIN_S
            # each pod is its own xDS node, named by the downward API
            assert container["args"][container["args"].index("--service-node") + 1] == node_id(
                "default/quickstart", "$(POD_NAME)"
            )
            assert {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
            } in container["env"]

            # the ask goes away: so do they, and the Deployment has its replicas again
            api.put(parameters({"replicas": 3}))
            await settle(api, runtime, source)
            await until(lambda: api.get("HorizontalPodAutoscaler", "default", NAME) is None)
            assert api.get("PodDisruptionBudget", "default", NAME) is None
            dep = api.get("Deployment", "default", NAME)
            assert dep is not None and dep["spec"]["replicas"] == 3
            spec = dep["spec"]["template"]["spec"]
            assert spec["terminationGracePeriodSeconds"] == DEFAULT_DRAIN_S + STOP_MARGIN_S

            # a budget alone, by minAvailable
            api.put(parameters({"replicas": 3, "podDisruptionBudget": {"minAvailable": 2}}))
            await settle(api, runtime, source)
            await until(lambda: api.get("PodDisruptionBudget", "default", NAME) is not None)
            assert api.get("PodDisruptionBudget", "default", NAME)["spec"]["minAvailable"] == 2  # type: ignore[index]
            assert api.get("HorizontalPodAutoscaler", "default", NAME) is None
    finally:
        await api.stop()


async def test_programmed_once_every_envoy_pod_acknowledged(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    load(api, {"replicas": 3})
    dp = dataplane()
    try:
        async with serving(
            api, write_kubeconfig(api, str(tmp_path / "kc")), dp, identity="a", **LEADER
        ) as (
            runtime,
            source,
        ):
            await until(lambda: source.elector.leading)
            # the new leader creates the Envoy fleet in a task of its own, which settle() does
            # not wait for: wait until it has applied what the translation asks for
            infra = source.infra
            await until(lambda: bool(infra.applied) and infra.applied == infra.desired)
            await settle(api, runtime, source)
            assert programmed(api) == (
                "False",
                "waiting for Envoy to acknowledge the configuration",
            )
            await until(lambda: api.get("Secret", "default", NAME) is not None)
            files = secret_files(api.get("Secret", "default", NAME) or {})

            def pod(name: str, **kw: Any) -> Any:
                return envoy_pod(dp.xds_port, node_id("default/quickstart", name), files, **kw)

            async with pod("envoy-a") as a, pod("envoy-b") as b:
                await until(lambda: bool(a.listeners and b.listeners))
                await until(lambda: programmed(api)[1].startswith("2 of 3"))
                assert programmed(api) == (
                    "False",
                    "2 of 3 Envoy pods run the current configuration; waiting for 1 more not "
                    "connected",
                )
                async with pod("envoy-c", hold=True) as c:  # connected, still loading
                    await until(lambda: "waiting for envoy-c" in programmed(api)[1])
                    assert programmed(api) == (
                        "False",
                        "2 of 3 Envoy pods run the current configuration; waiting for envoy-c",
                    )
                    c.answer()
                    await until(lambda: programmed(api)[0] == "True")
                    assert c.listeners

                    # a fourth pod (a rollout's new one) rejects the configuration: named, with
                    # Envoy's reason
                    async with pod("envoy-d", reject=True):
                        await until(lambda: "rejected" in programmed(api)[1])
                        assert programmed(api) == (
                            "False",
                            "Envoy pod envoy-d rejected the configuration: rejected by the test",
                        )
                    await until(lambda: programmed(api)[0] == "True")
                # a pod stops: 2 of the 3 wanted
                await until(lambda: programmed(api)[1].startswith("2 of 3"))
    finally:
        await api.stop()


def test_the_drain_hook_drains_a_real_envoy(tmp_path: Path) -> None:
    """The pods' preStop command, run against a real Envoy (admin on loopback, as in the pod):
    while the hook waits, the listener still answers but closes each connection; once the
    drain time has passed (the hook returns) the listener is gone, before any SIGTERM."""
    admin, port = free_port(), free_port()
    router = {
        "name": "envoy.filters.http.router",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
        },
    }
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
        "HttpConnectionManager",
        "stat_prefix": "gw",
        "http_filters": [router],
        "route_config": {
            "virtual_hosts": [
                {
                    "name": "all",
                    "domains": ["*"],
                    "routes": [
                        {
                            "match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": "ok"}},
                        }
                    ],
                }
            ]
        },
    }
    boot = {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {
            "listeners": [
                {
                    "name": "gw",
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                    "filter_chains": [
                        {
                            "filters": [
                                {
                                    "name": "envoy.filters.network.http_connection_manager",
                                    "typed_config": hcm,
                                }
                            ]
                        }
                    ],
                }
            ]
        },
    }
    (tmp_path / "boot.json").write_text(json.dumps(boot))
    drain_s = 2
    with (tmp_path / "envoy.log").open("wb") as log:
        envoy = subprocess.Popen(
            [
                default_envoy_path(),
                "--config-path",
                str(tmp_path / "boot.json"),
                "--concurrency",
                "1",
                "--disable-hot-restart",
                "--log-level",
                "warn",
                "--drain-time-s",
                str(drain_s),
                "--drain-strategy",
                "immediate",
            ],
            stdout=log,
            stderr=log,
        )
    try:
        for _ in range(500):
            with contextlib.suppress(OSError):
                assert get(port) == ("ok", None)  # serving, keep-alive
                break
            time.sleep(0.02)
        else:
            raise AssertionError("Envoy did not start")
        hook = subprocess.Popen(drain_hook(drain_s, admin)["preStop"]["exec"]["command"])
        try:
            for _ in range(250):  # the drain has begun: answered, with the connection closed
                if get(port) == ("ok", "close"):
                    break
                time.sleep(0.02)
            else:
                raise AssertionError("Envoy did not start draining")
            assert hook.wait(drain_s + 10) == 0
        finally:
            if hook.poll() is None:
                hook.kill()
        with pytest.raises(OSError):  # drained: no listener left
            get(port)
        assert envoy.poll() is None  # and Envoy itself still runs, for Kubernetes to stop
    finally:
        envoy.terminate()
        envoy.wait(10)


def get(port: int) -> tuple[str, str | None]:
    """GET / on the listener: (body, its Connection header)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/")
        resp = conn.getresponse()
        return resp.read().decode(), resp.getheader("connection")
    finally:
        conn.close()
