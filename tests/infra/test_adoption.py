"""HostInfra across controllers: a detached HostInfra (the controller failed) leaves its Envoy
serving; the next one on the same state adopts it when its settings are the same, and
replaces it make-before-break when they changed - under steady traffic, no request fails."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gateweave.infra.host import HostInfra, free_port
from gateweave.infra.statedir import StateDir, records, running
from gateweave.metrics import Metrics
from gateweave.offline import translate_paths
from gateweave.translate import TranslateOptions
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.server import AdsServer
from gateweave_bench import harness as h
from tests.support.traffic import Traffic


def alive(pid: int) -> bool:
    return running(pid)  # (an exited Envoy is init's zombie for a moment: not alive)


async def until(check: Callable[[], Any], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(check):
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


async def test_adopted_when_the_same_replaced_when_changed_and_no_request_fails(
    tmp_path: Path,
) -> None:
    backend = h.NameServer("A")
    address = "127.40.9.2"
    port = free_port(address)
    config = tmp_path / "config"
    config.mkdir()
    h.write_manifests(
        config / "all.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", address, [h.listener("http", "HTTP", port)]),
            *h.service("svc-a", 80, backend.port),
            h.http_route("web", "gw", ["example.com"], [h.rule("/", [h.backend_ref("svc-a", 80)])]),
        ],
    )
    run = translate_paths([str(config)], TranslateOptions())
    assert run.result is not None
    infra_ir = run.result.infra
    state = StateDir.open(tmp_path / "s")
    server = AdsServer(registry=CollectorRegistry())
    await server.start_unix(str(state.socket))
    snapshots = IncrementalSnapshots()
    for name, gw in run.result.xds.items():
        server.publish(name, snapshots.snapshot(gw))

    def infra(**settings: Any) -> HostInfra:
        return HostInfra(
            work_dir=state.envoys, xds_pipe=str(state.socket), register_atexit=False, **settings
        )

    traffic: Traffic | None = None
    pids: set[int] = set()
    last: HostInfra | None = None
    try:
        last = first = infra()
        await first.reconcile(infra_ir)
        await until(
            lambda: (r := h.fetch_sync(address, port)) is not None and r.body == "A", 15, "served"
        )
        pid = first.process("default/gw").pid  # type: ignore[union-attr]
        assert pid is not None
        pids.add(pid)
        traffic = Traffic(address, port, "A")
        await until(lambda: traffic.sent >= 10, 10, "traffic flowing")

        await first.detach()  # the controller fails: the Envoy keeps serving
        assert alive(pid) and [r.pid for r in records(state.envoys)] == [pid]
        sent = traffic.sent
        await until(lambda: traffic.sent >= sent + 10, 10, "traffic without a controller")

        metrics = Metrics()
        last = same = infra(metrics=metrics)  # the same settings: adopted as it is
        assert metrics.value("gateweave_envoys_orphaned") == 1
        await same.reconcile(infra_ir)
        assert same.process("default/gw").pid == pid  # type: ignore[union-attr]
        assert metrics.value("gateweave_envoys_orphaned") == 0
        assert metrics.value("gateweave_envoys_adopted_total") == 1
        await same.detach()

        last = changed = infra(drain_time_s=3)  # another Envoy setting: replaced, make-before-break
        await changed.reconcile(infra_ir)
        new_pid = changed.process("default/gw").pid  # type: ignore[union-attr]
        assert new_pid is not None and new_pid != pid
        pids.add(new_pid)
        await until(lambda: not alive(pid), 15, "the replaced Envoy gone")
        sent = traffic.sent
        await until(lambda: traffic.sent >= sent + 10, 10, "traffic after the replacement")
        traffic.stop()
        assert traffic.failed == [], (
            f"{len(traffic.failed)} of {traffic.sent} requests failed: {traffic.failed[:5]}"
        )
        assert [r.pid for r in records(state.envoys)] == [new_pid]

        await changed.close()
        assert not alive(new_pid) and records(state.envoys) == []
    finally:
        if traffic is not None:
            traffic.stop()
        if last is not None:
            await last.close()
        for p in pids:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        await server.stop(0)
        state.close()
        backend.close()
