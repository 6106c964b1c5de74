"""The Kubernetes data plane's statistics: a real Envoy run with the bootstrap and arguments a
Gateway's pod gets (the ConfigMap's files mounted where the test can write them, the xDS
server on loopback), registered as a Pod with a loopback podIP in the API-server stand-in, is
found by gateweave's pod watch and read through its stats port: ``/metrics`` and
``/api/traffic`` show exactly the requests driven through it. The stats port lets only the
stats reads (and ``/ready``) through to the admin, which stays on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from gateweave.app import App, KubeDataplane
from gateweave.infra.host import free_port, http_status
from gateweave.ir import InfraGateway, InfraPort
from gateweave.kube.pods import EnvoyPods
from gateweave.sinks.kubeinfra import (
    ENVOY_ADMIN_PORT,
    STATS_PORT,
    STATS_PORT_NAME,
    KubernetesInfra,
    object_name,
)
from gateweave.telemetry import EnvoyId
from gateweave.telemetry.stats import STATS_PATH, scrape
from gateweave_bench import harness as h
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig
from tests.support.kubeenvoy import envoy, mount_config_map, quickstart, until
from tests.support.live import samples

GATEWAY = "default/quickstart"
ROUTE = "HTTPRoute/default/demo"
POD_IP = "127.0.0.7"  # the pod's address: the Envoy's stats listener binds 0.0.0.0
POD = "gateweave-quickstart-7d9f-abcde"
N = 7


def pod_args(deployment: dict[str, Any], pod: str) -> list[str]:
    """The Envoy container's arguments, as the kubelet gives them to the pod ``pod`` (the
    downward API's name substituted), without the config path (the test's), one worker."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a.replace("$(POD_NAME)", pod) for a in container["args"]]
    i = args.index("--config-path")
    del args[i : i + 2]
    return [*args, "--concurrency", "1"]


def pod_object(deployment: dict[str, Any], name: str, ip: str, ready: bool) -> dict[str, Any]:
    """The Pod the Deployment's pod template makes (no Deployment controller runs in the
    stand-in), with the status a kubelet writes."""
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": name,
            "namespace": deployment["metadata"]["namespace"],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def put_pod(api: KubeAPI, pod: dict[str, Any]) -> None:
    api.put(pod)  # a create drops the status: the kubelet writes it through the subresource
    api._update(
        api.rtype("Pod"),
        pod["metadata"]["namespace"],
        pod["metadata"]["name"],
        pod,
        True,
        "kubelet",
    )


async def test_pod_statistics_reach_metrics_and_traffic(tmp_path: Path) -> None:
    backend = h.NameServer("demo")
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    quickstart(api, backend.port)
    name = object_name("quickstart")
    apps: list[App] = []
    try:
        async with serving(
            api,
            write_kubeconfig(api, str(tmp_path / "kc")),
            KubeDataplane(
                xds_bind="127.0.0.1", xds_port=free_port(), xds_host="127.0.0.1", xds_plaintext=True
            ),
            on_app=apps.append,
            lease_namespace="gateweave-system",
        ) as (runtime, source):
            await settle(api, runtime, source)
            admin = apps[0].admin
            pods = admin.envoys
            assert isinstance(pods, EnvoyPods)
            config_map = api.get("ConfigMap", "default", name)
            deployment = api.get("Deployment", "default", name)
            assert config_map is not None and deployment is not None
            bootstrap = mount_config_map(config_map, tmp_path / "etc-envoy")
            args = pod_args(deployment, POD)
            with envoy(bootstrap, tmp_path / "envoy.log", args) as proc:
                # Envoy has its listener (a host no route matches: the listener's 404, no route's)
                probes = 0  # each answered, and counted by the listener
                for _ in range(150):
                    reply = await h.fetch("127.0.0.1", 8080, "/", "nothing.example")
                    if reply is not None:
                        assert reply.status == 404
                        probes += 1
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise TimeoutError("the Envoy's listener did not answer")
                for _ in range(N):
                    reply = await h.fetch("127.0.0.1", 8080, "/x", "demo.example.com")
                    assert reply is not None and reply.status == 200

                async with httpx.AsyncClient(timeout=10, headers=admin.headers) as client:

                    async def metrics() -> str:
                        return (await client.get(f"{admin.url}/metrics")).text

                    # no Pod yet, then one not Ready: nothing is read
                    assert pods.stats_addresses() == {}
                    put_pod(api, pod_object(deployment, POD, POD_IP, ready=False))
                    await until(lambda: ("default", POD) in pods.pods)
                    assert pods.stats_addresses() == {}
                    assert not samples(await metrics(), "gateweave_route_requests_total")

                    # Ready: read through its stats port at its podIP
                    put_pod(api, pod_object(deployment, POD, POD_IP, ready=True))
                    await until(pods.stats_addresses)
                    assert pods.stats_addresses() == {
                        EnvoyId(GATEWAY, POD): f"{POD_IP}:{STATS_PORT}"
                    }
                    text = await metrics()
                    routes = samples(text, "gateweave_route_requests_total")
                    assert {dict(k)["route"]: v for k, v in routes.items()} == {ROUTE: N}
                    (labels,) = routes
                    assert dict(labels) == {
                        "gateway": GATEWAY,
                        "listener": f"{GATEWAY}/8080",
                        "route": ROUTE,
                        "rule": "0",
                        "response_class": "2xx",
                    }
                    listener = samples(text, "gateweave_listener_requests_total")
                    by_class = {dict(k)["response_class"]: v for k, v in listener.items()}
                    assert by_class == {"2xx": N, "4xx": probes}
                    # Envoy's own families pass through, per pod
                    passed = samples(text, "envoy_cluster_upstream_rq_total")
                    assert any(
                        dict(k).get("pod") == POD and dict(k)["gateway"] == GATEWAY for k in passed
                    ), passed

                    traffic = (await client.get(f"{admin.url}/api/traffic")).json()
                    assert traffic["routes"][ROUTE]["requests"] == N
                    assert traffic["routes"][ROUTE]["rules"]["0"]["requests"] == N
                    assert traffic["gateways"][GATEWAY]["requests"] == N + probes

                    # the pod goes away: it is no longer read
                    api.remove("Pod", "default", POD)
                    await until(lambda: not pods.stats_addresses())

                # the stats port: the stats reads and /ready only; the admin stays on loopback
                port = STATS_PORT
                for method, target, status in [
                    ("GET", STATS_PATH, 200),
                    ("GET", "/stats/prometheus?usedonly", 200),
                    ("GET", "/ready", 200),
                    ("POST", "/quitquitquit", 404),
                    ("POST", "/stats", 404),
                    ("POST", "/drain_listeners?graceful", 404),
                    ("GET", "/config_dump", 404),
                    ("GET", "/clusters", 404),
                    ("GET", "/stats/../config_dump", 404),
                    ("GET", "//stats/..//certs", 404),
                    ("GET", "/stats/recentlookups", 404),
                    ("HEAD", "/stats", 404),
                ]:
                    got = await http_status(POD_IP, port, target, 5.0, method)
                    assert got == status, (method, target, got)
                assert proc.poll() is None  # /quitquitquit did not reach the admin
                try:
                    await asyncio.open_connection(POD_IP, ENVOY_ADMIN_PORT)
                    reachable = True
                except OSError:
                    reachable = False
                assert not reachable  # the admin listens on 127.0.0.1 only
    finally:
        await api.stop()
        backend.close()
        log = tmp_path / "envoy.log"
        print(log.read_text() if log.exists() else "", end="")


async def test_a_gateways_pods_are_summed(tmp_path: Path) -> None:
    """Two pods of one Gateway (stand-ins serving Envoy's JSON stats on their own addresses):
    one reading, their counters summed and histogram bins added."""

    def doc(count: int, bins: list[tuple[int, int, int]]) -> bytes:
        details = [
            {
                "name": "http.l.downstream_rq_time",
                "totals": [{"lower_bound": lo, "width": w, "count": c} for lo, w, c in bins],
            }
        ]
        return json.dumps(
            {
                "stats": [
                    {"name": "http.l.downstream_rq_2xx", "value": count},
                    {"histograms": {"details": details}},
                ]
            }
        ).encode()

    bodies = {"127.0.0.21": doc(3, [(1, 1, 2)]), "127.0.0.22": doc(4, [(1, 1, 1), (5, 1, 3)])}

    async def handler(request: web.Request) -> web.Response:
        assert request.path == "/stats"
        return web.Response(body=bodies[request.host.partition(":")[0]])

    app = web.Application()
    app.router.add_get("/stats", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    try:
        for ip in bodies:
            await web.TCPSite(runner, ip, port).start()
        stats = await scrape(
            {EnvoyId("ns/gw", f"pod-{ip}"): f"{ip}:{port}" for ip in bodies}
            | {EnvoyId("ns/gw", "gone"): f"127.0.0.23:{port}"}  # not answering: left out
        )
    finally:
        await runner.cleanup()
    assert stats["ns/gw"].counters == {"http.l.downstream_rq_2xx": 7}
    assert stats["ns/gw"].histograms == {"http.l.downstream_rq_time": ((1, 1, 3), (5, 1, 3))}


def test_the_deployment_exposes_the_stats_port() -> None:
    gw = InfraGateway(
        name="default/gw",
        namespace="default",
        gateway_name="gw",
        gateway_class="gc",
        address="0.0.0.0",
        ports=(InfraPort(name="http", port=80, protocol="TCP"),),
    )
    infra = KubernetesInfra(
        None,  # type: ignore[arg-type]
        xds_host="gateweave.gateweave-system.svc",
        xds_port=18000,
    )
    objs = {obj["kind"]: obj for _path, obj in infra.manifests(gw)}
    template = objs["Deployment"]["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert {"name": STATS_PORT_NAME, "containerPort": STATS_PORT, "protocol": "TCP"} in container[
        "ports"
    ]
    # the kubelet probes the pod's address, where only the stats port answers
    assert container["readinessProbe"] == {"httpGet": {"path": "/ready", "port": STATS_PORT_NAME}}
    annotations = template["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"]) == (
        "true",
        str(STATS_PORT),
    )
    assert annotations["prometheus.io/path"] == "/stats/prometheus"
    boot = json.loads(objs["ConfigMap"]["data"]["bootstrap.json"])
    assert boot["admin"]["address"]["socket_address"] == {
        "address": "127.0.0.1",
        "port_value": ENVOY_ADMIN_PORT,
    }
    (listener,) = boot["static_resources"]["listeners"]
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": STATS_PORT}
    # the xDS cluster is resolved by DNS (a Service name); the admin is an address
    types = {c["name"]: c["type"] for c in boot["static_resources"]["clusters"]}
    assert types == {"xds_cluster": "STRICT_DNS", "gateweave-admin": "STATIC"}
