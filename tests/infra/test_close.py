"""HostInfra.close() stops every Envoy it started - also one whose stop was begun by a
reconcile that got cancelled (serve stopping while the runtime removes a Gateway), one just
replaced (a hot restart racing close) and one a reconcile arriving during close would start;
and detach() while an Envoy starts leaves that Envoy recorded, for the next controller.

The Gateway is a UDP one with a session through it: a UDP session stays active for its idle
timeout (a minute), so stopping that Envoy drains for the whole ``drain_s``, which is where a
cancelled stop used to leave it running, forgotten by close()."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from gateweave.infra import host
from gateweave.infra.host import HostInfra
from gateweave.infra.statedir import cmdline, records, running
from gateweave.ir import InfraGateway
from gateweave.offline import translate_paths
from gateweave.translate import TranslateOptions
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.server import AdsServer
from gateweave_bench import harness as h
from gateweave_conformance.echo import EchoSpec, start_echo
from tests.support.live import until

ADDRESS = "127.40.11.2"
GATEWAY = "default/udp-gw"


def envoys_under(work_dir: Path) -> set[int]:
    """Every process running with a bootstrap (``-c``) under ``work_dir``: the Envoys of that
    state, whoever started them and whether or not anything recorded them."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not running(int(entry.name)):
            continue
        args = cmdline(int(entry.name))
        if any(a == "-c" and b.startswith(f"{work_dir}/") for a, b in itertools.pairwise(args)):
            found.add(int(entry.name))
    return found


def udp_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


async def echoed(port: int) -> bool:
    """One datagram through the Gateway's UDP listener is echoed back (a session now exists)."""

    def exchange() -> bytes | None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.5)
            sock.sendto(b"ping", (ADDRESS, port))
            try:
                return sock.recvfrom(2048)[0]
            except OSError:
                return None

    data = await asyncio.to_thread(exchange)
    return data is not None and json.loads(data)["request"] == "ping"


async def started(work_dir: Path) -> set[int]:
    return await asyncio.to_thread(envoys_under, work_dir)


class UdpGateway:
    """A UDP Gateway routed to the echo backend: its infra IR and an xDS server serving its
    configuration to the Envoy of ``HostInfra`` instances made by :meth:`infra`."""

    def __init__(self, tmp_path: Path, echo_port: int) -> None:
        self.work_dir = tmp_path / "envoys"
        self.work_dir.mkdir()
        self.port = udp_port(ADDRESS)
        config = tmp_path / "config"
        config.mkdir()
        h.write_manifests(config / "all.yaml", _manifests(self.port, echo_port))
        run = translate_paths([str(config)], TranslateOptions())
        assert run.result is not None
        self.desired: dict[str, InfraGateway] = dict(run.result.infra)
        assert set(self.desired) == {GATEWAY}
        self.xds = dict(run.result.xds)
        self.server = AdsServer(registry=CollectorRegistry())

    async def start(self) -> None:
        await self.server.start("127.0.0.1", 0)
        snapshots = IncrementalSnapshots()
        for name, gw in self.xds.items():
            self.server.publish(name, snapshots.snapshot(gw))

    def infra(self, **settings: Any) -> HostInfra:
        return HostInfra(
            work_dir=self.work_dir,
            xds_host="127.0.0.1",
            xds_port=self.server.port,
            stop_timeout=2.0,
            register_atexit=False,
            **settings,
        )

    async def stop(self) -> None:
        for pid in envoys_under(self.work_dir):  # (only if a test failed)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await self.server.stop(0)


def _manifests(port: int, echo_port: int) -> list[dict[str, Any]]:
    return [
        h.gateway_class(),
        h.gateway("udp-gw", ADDRESS, [h.listener("udp", "UDP", port)]),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": h.meta("echo"),
            "spec": {
                "ports": [{"name": "u", "port": 53, "targetPort": echo_port, "protocol": "UDP"}]
            },
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": h.meta("echo-1", labels={"kubernetes.io/service-name": "echo"}),
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "u", "port": echo_port, "protocol": "UDP"}],
        },
        {
            "apiVersion": f"{h.G}/v1alpha2",
            "kind": "UDPRoute",
            "metadata": h.meta("echo"),
            "spec": {
                "parentRefs": [{"name": "udp-gw", "sectionName": "udp"}],
                "rules": [{"backendRefs": [h.backend_ref("echo", 53)]}],
            },
        },
    ]


@pytest.fixture
async def udp_gateway(tmp_path: Path) -> AsyncIterator[UdpGateway]:
    echo = await start_echo(EchoSpec(mode="udp", udp_port=0, pod="echo-1", namespace="default"))
    gw = UdpGateway(tmp_path, echo.ports["udp"])
    try:
        await gw.start()
        yield gw
    finally:
        await gw.stop()
        await echo.stop()


async def _serving(infra: HostInfra, gw: UdpGateway) -> int:
    """Start the Gateway's Envoy, send a datagram through it (a session), return its pid."""
    await infra.reconcile(gw.desired)
    await until(lambda: echoed(gw.port), 20, "the UDP listener echoes")
    pid = infra.process(GATEWAY).pid  # type: ignore[union-attr]
    assert pid is not None
    return pid


async def test_a_stop_whose_reconcile_was_cancelled_is_finished_by_close(
    udp_gateway: UdpGateway,
) -> None:
    """serve stopping while the runtime removes the Gateway: the runtime (and so its reconcile)
    is cancelled while the Envoy drains its UDP session; close() still stops that Envoy."""
    infra = udp_gateway.infra(drain_s=3.0)
    try:
        pid = await _serving(infra, udp_gateway)
        removal = asyncio.create_task(infra.reconcile({}))
        await until(lambda: asyncio.sleep(0, infra.process(GATEWAY) is None), 5, "removal begun")
        assert running(pid)  # still draining: the UDP session keeps it busy for drain_s
        removal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await removal
        await infra.close()
        assert not running(pid)
        assert envoys_under(udp_gateway.work_dir) == set()
    finally:
        await infra.close()


async def test_a_replacement_racing_close_leaves_no_envoy(udp_gateway: UdpGateway) -> None:
    """The Gateway's Envoy settings change (a hot restart replacement, the next epoch) and
    close() comes at once: neither the replaced Envoy nor its successor survives."""
    infra = udp_gateway.infra()
    try:
        first = await _serving(infra, udp_gateway)
        changed = {
            name: msgspec.structs.replace(gw, labels={"rollout": "2"})
            for name, gw in udp_gateway.desired.items()
        }
        await infra.reconcile(changed)
        second = infra.process(GATEWAY).pid  # type: ignore[union-attr]
        assert second is not None and second != first
        await infra.close()
        assert not running(first) and not running(second)
        assert envoys_under(udp_gateway.work_dir) == set()
    finally:
        await infra.close()


async def test_a_reconcile_during_close_starts_nothing(udp_gateway: UdpGateway) -> None:
    """A translation published while close() runs (it waits for close's reconcile) does not
    start the Gateway's Envoy again."""
    infra = udp_gateway.infra()
    try:
        pid = await _serving(infra, udp_gateway)
        closing = asyncio.create_task(infra.close())
        await asyncio.sleep(0)  # close() has begun (it holds the reconcile lock)
        await infra.reconcile(udp_gateway.desired)
        await closing
        assert infra.processes() == {}
        assert not running(pid)
        assert envoys_under(udp_gateway.work_dir) == set()
    finally:
        await infra.close()


async def test_an_envoy_starting_when_the_controller_detaches_is_recorded_and_adopted(
    udp_gateway: UdpGateway,
) -> None:
    """detach() (the controller fails) while the Gateway's Envoy is being started: that Envoy
    starts anyway, so it is recorded, and the next controller adopts it - never an Envoy that
    nothing knows of (which no close() would ever stop)."""
    first = udp_gateway.infra()
    starting = asyncio.create_task(first.reconcile(udp_gateway.desired))
    while first.process(GATEWAY) is None:  # the supervisor exists ...
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # ... and its task began starting the Envoy
    await first.detach()
    await asyncio.wait_for(starting, 10)  # (a detached supervisor keeps reconcile waiting no more)
    await until(lambda: started(udp_gateway.work_dir), 10, "the Envoy started")
    [pid] = envoys_under(udp_gateway.work_dir)
    assert [r.pid for r in records(udp_gateway.work_dir)] == [pid]
    second = udp_gateway.infra()
    try:
        await second.reconcile(udp_gateway.desired)
        assert second.process(GATEWAY).pid == pid  # type: ignore[union-attr]
        await until(lambda: echoed(udp_gateway.port), 20, "the adopted Envoy echoes")
        await second.close()
        assert not running(pid)
        assert envoys_under(udp_gateway.work_dir) == set()
    finally:
        await second.close()


async def test_an_envoy_started_as_the_event_loop_is_torn_down_is_found_and_adopted(
    udp_gateway: UdpGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller's event loop is torn down (a second Ctrl-C: asyncio.run cancelling every
    task, the start's own among them) once the Gateway's Envoy exists but before its pid was
    read back: nothing in the controller records it, yet the next controller finds it (from
    what was written before it started, and the pid it wrote itself) and adopts it."""
    real_spawn = host.spawn_detached
    spawned: list[int] = []

    async def spawn_then_hang(*args: Any) -> int:
        spawned.append(await real_spawn(*args))
        await asyncio.Event().wait()  # the pid is never handed back: the loop goes first
        raise AssertionError("unreachable")

    monkeypatch.setattr(host, "spawn_detached", spawn_then_hang)

    def torn_down_while_starting() -> None:
        async def controller() -> None:
            infra = udp_gateway.infra()
            starting = asyncio.create_task(infra.reconcile(udp_gateway.desired))
            while not spawned:
                await asyncio.sleep(0.005)
            assert not starting.done()  # the Envoy runs, and its start is still under way
            # returning ends asyncio.run: every task left is cancelled, the loop closed

        asyncio.run(controller())

    await asyncio.to_thread(torn_down_while_starting)
    monkeypatch.setattr(host, "spawn_detached", real_spawn)
    [pid] = spawned
    await until(lambda: asyncio.sleep(0, envoys_under(udp_gateway.work_dir) == {pid}), 10, "run")
    second = udp_gateway.infra()
    try:
        await second.reconcile(udp_gateway.desired)
        assert second.process(GATEWAY).pid == pid  # type: ignore[union-attr]
        await until(lambda: echoed(udp_gateway.port), 20, "the adopted Envoy echoes")
        assert [r.pid for r in records(udp_gateway.work_dir)] == [pid]
        await second.close()
        assert not running(pid)
        assert envoys_under(udp_gateway.work_dir) == set()
    finally:
        await second.close()
