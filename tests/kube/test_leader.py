"""Leader election on a Lease: two replicas against the stand-in; only the leader writes
status, both translate; the follower takes over when the leader goes away."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import yaml

from tests.support.data import QUICKSTART
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig

FAST: dict[str, Any] = {
    "leader_elect": True,
    "lease_duration": 1.0,
    "renew_deadline": 0.8,
    "retry_period": 0.1,
    "lease_namespace": "gateweave-system",
}


async def wait_until(cond: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_only_the_leader_writes_and_failover(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    try:
        async with contextlib.AsyncExitStack() as stack_b:
            async with contextlib.AsyncExitStack() as stack_a:
                rt_a, src_a = await stack_a.enter_async_context(
                    serving(api, kc, identity="a", **FAST)
                )
                await wait_until(lambda: src_a.elector.leading)
                rt_b, src_b = await stack_b.enter_async_context(
                    serving(api, kc, identity="b", **FAST)
                )
                await settle(api, rt_a, src_a)
                await settle(api, rt_b, src_b)
                await asyncio.sleep(0.3)  # several lease rounds: b stays a follower
                assert src_a.elector.leading and not src_b.elector.leading
                assert src_a.status_writer.writes == 3 and src_b.status_writer.writes == 0
                assert rt_b.translations >= 1  # the follower translates too (it could serve xDS)
                lease = api.get("Lease", "gateweave-system", "gateweave-controller")
                assert lease is not None and lease["spec"]["holderIdentity"] == "a"
            # a has shut down (and released the Lease): b takes over at its next round
            await wait_until(lambda: src_b.elector.leading, timeout=1.0)
            route = api.get("HTTPRoute", "default", "demo")
            assert route is not None
            api.put({**route, "spec": {**route["spec"], "hostnames": ["new.example.com"]}})
            await settle(api, rt_b, src_b)
            assert src_b.status_writer.writes == 1  # only the route's observedGeneration changed
            lease = api.get("Lease", "gateweave-system", "gateweave-controller")
            assert lease is not None and lease["spec"]["holderIdentity"] == "b"
            assert lease["spec"]["leaseTransitions"] == 1
    finally:
        await api.stop()


async def test_follower_takes_over_an_expired_lease(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    # a leader that stopped renewing (crashed without releasing)
    api.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "gateweave-controller", "namespace": "gateweave-system"},
            "spec": {
                "holderIdentity": "crashed",
                "leaseDurationSeconds": 1,
                "renewTime": "2026-01-01T00:00:00.000000Z",
                "leaseTransitions": 0,
            },
        }
    )
    try:
        async with serving(api, kc, identity="b", **FAST) as (rt_b, src_b):
            await asyncio.sleep(0.5)
            assert not src_b.elector.leading and src_b.status_writer.writes == 0  # not expired yet
            await wait_until(lambda: src_b.elector.leading, timeout=3)
            await settle(api, rt_b, src_b)
            assert (
                src_b.status_writer.writes == 3
            )  # statuses computed while following, written on taking over
    finally:
        await api.stop()
