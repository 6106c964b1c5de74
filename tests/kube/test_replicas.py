"""Two controller replicas with the Kubernetes data plane against the API stand-in, in-test
ADS clients standing in for Envoy pods connected to either replica: the Lease holder writes
every Gateway's Programmed from the acknowledgements of all pods, wherever they are
connected (gateweave/sinks/sharedacks.py); a rejection on a follower's pod shows in status;
stopping the leader flips no Programmed, and the pods reconnect to the other and ACK."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import yaml

from gateweave.app import KubeDataplane
from gateweave.sinks.kubeinfra import object_name
from tests.support.data import QUICKSTART
from tests.support.envoypod import envoy_pod, free_port
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig
from tests.support.xdsclient import secret_files

FAST: dict[str, Any] = {
    "leader_elect": True,
    "lease_duration": 2.0,
    "renew_deadline": 1.5,
    "retry_period": 0.1,
    "lease_namespace": "gateweave-system",
}
GATEWAYS = ("first", "second")


async def until(cond: Any, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("condition not met")


def programmed(api: KubeAPI, name: str) -> tuple[str, str]:
    gw = api.get("Gateway", "default", name) or {}
    for c in (gw.get("status") or {}).get("conditions") or []:
        if c["type"] == "Programmed":
            return c["status"], c["message"]
    return "", ""


def objects() -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(QUICKSTART.read_text()) if d]
    gateway = next(d for d in docs if d["kind"] == "Gateway")
    out = [d for d in docs if d["kind"] != "Gateway"]
    for name in GATEWAYS:
        gw = copy.deepcopy(gateway)
        gw["metadata"]["name"] = name
        gw["spec"]["addresses"] = [
            {"type": "IPAddress", "value": "192.0.2.10"}
        ]  # ClusterIP: no load balancer
        out.append(gw)
    return out


async def test_acks_shared_across_replicas_and_failover(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in objects():
        api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    port_a, port_b = free_port(), free_port()

    def dataplane(port: int) -> KubeDataplane:
        return KubeDataplane(xds_bind="127.0.0.1", xds_port=port, service_type="ClusterIP")

    try:
        async with contextlib.AsyncExitStack() as stack_b:
            async with contextlib.AsyncExitStack() as stack_a:
                rt_a, src_a = await stack_a.enter_async_context(
                    serving(api, kc, dataplane(port_a), identity="a", **FAST)
                )
                await until(lambda: src_a.elector.leading)
                rt_b, src_b = await stack_b.enter_async_context(
                    serving(api, kc, dataplane(port_b), identity="b", **FAST)
                )
                await settle(api, rt_a, src_a)
                assert (
                    programmed(api, "first")[0] == programmed(api, "second")[0] == "False"
                )  # no pod yet

                # "first"'s pod on the follower, "second"'s on the leader (mutual TLS, with their
                # Gateway's client certificates, which the leader wrote): both Programmed
                await until(
                    lambda: all(api.get("Secret", "default", object_name(n)) for n in GATEWAYS)
                )
                files = {
                    n: secret_files(api.get("Secret", "default", object_name(n)) or {})
                    for n in GATEWAYS
                }
                pod_1 = await stack_b.enter_async_context(
                    envoy_pod([port_b, port_a], "default/first", files["first"])
                )
                pod_2 = await stack_b.enter_async_context(
                    envoy_pod([port_a, port_b], "default/second", files["second"])
                )
                await until(
                    lambda: programmed(api, "first")[0] == programmed(api, "second")[0] == "True"
                )
                assert not src_b.elector.leading and src_b.status_writer.writes == 0

                # a second pod of "second", on the follower, rejects its configuration: not
                # Programmed,
                # with Envoy's message, though the leader's own pod ACKed
                async with envoy_pod(port_b, "default/second", files["second"], reject=True):
                    await until(lambda: "rejected by the test" in programmed(api, "second")[1])
                    assert programmed(api, "second")[0] == "False"
                    assert programmed(api, "first")[0] == "True"
                await until(lambda: programmed(api, "second")[0] == "True")  # that pod went away

                # stop the leader: b takes over; no Programmed flips; "second"'s pod reconnects to b
                # and ACKs
                writes_before = len(api.status_writes)
                streams = pod_2.streams
            await until(lambda: src_b.elector.leading)
            await until(lambda: pod_2.streams > streams and pod_2.port == port_b)
            await until(
                lambda: (
                    rt_b.dataplane_states.get("default/second") is not None
                    and src_b.acks._mine["default/second"].pods == 1
                    and src_b.acks._mine["default/second"].acked
                )
            )
            route = api.get("HTTPRoute", "default", "demo")
            assert route is not None
            api.put(
                {**route, "spec": {**route["spec"], "hostnames": ["new.example.com"]}}
            )  # a new configuration
            await settle(api, rt_b, src_b)
            await asyncio.sleep(
                FAST["lease_duration"] * 1.5
            )  # a's report expires: b's pods alone count
            await settle(api, rt_b, src_b)
            after = api.status_writes[writes_before:]
            flips = [
                (r.name, c)
                for r, status in after
                if r.resource == "gateways"
                for c in status.get("conditions") or []
                if c["type"] == "Programmed" and c["status"] != "True"
            ]
            assert flips == []
            assert programmed(api, "first")[0] == programmed(api, "second")[0] == "True"
            assert pod_1.port == port_b and pod_1.streams == 1 and pod_1.listeners
            assert pod_2.listeners
            lease = api.get("Lease", "gateweave-system", "gateweave-controller")
            assert lease is not None and lease["spec"]["holderIdentity"] == "b"
    finally:
        await api.stop()
