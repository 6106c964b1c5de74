"""HostInfra: one real Envoy process per Gateway, supervised; and its bootstrap."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.resource_monitors.downstream_connections.v3 import (  # noqa: F401
    downstream_connections_pb2,
)
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: F401
from google.protobuf import json_format
from prometheus_client import CollectorRegistry

from gateweave.infra import HostInfra, State
from gateweave.infra.bootstrap import BootstrapParams, render, write
from gateweave.infra.host import default_envoy_path, in_flight
from gateweave.infra.statedir import running
from gateweave.ir import InfraGateway, InfraPort
from gateweave.xds.server import AdsServer


def gateway(name: str, address: str, *ports: int) -> InfraGateway:
    namespace, gw = name.split("/")
    return InfraGateway(
        name=name,
        namespace=namespace,
        gateway_name=gw,
        gateway_class="gateweave",
        address=address,
        ports=tuple(InfraPort(name=f"p{p}", port=p, protocol="TCP") for p in ports),
    )


def gone(pid: int) -> bool:
    return not running(pid)  # (an exited Envoy is init's zombie for a moment: gone)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def ads() -> AsyncIterator[AdsServer]:
    server = AdsServer(registry=CollectorRegistry())
    await server.start("127.0.0.1", 0)
    try:
        yield server
    finally:
        await server.stop(0.2)


def test_bootstrap_parses_and_validates(tmp_path: Path) -> None:
    params = BootstrapParams(
        node_id="ns/gw", xds_host="127.0.0.1", xds_port=18000, admin_port=19000, delta=True
    )
    data = render(params)
    parsed = bootstrap_pb2.Bootstrap()
    json_format.ParseDict(data, parsed)  # every field is a real bootstrap field
    assert parsed.node.id == "ns/gw"
    assert (
        parsed.dynamic_resources.ads_config.api_type
        == parsed.dynamic_resources.ads_config.DELTA_GRPC
    )
    retry = parsed.dynamic_resources.ads_config.grpc_services[0].envoy_grpc.retry_policy
    assert retry.retry_back_off.base_interval.ToMilliseconds() == 100
    assert retry.retry_back_off.max_interval.ToMilliseconds() == 500
    assert parsed.admin.address.socket_address.address == "127.0.0.1"
    path = write(tmp_path / "b.json", params)
    assert json.loads(path.read_text()) == data
    run = subprocess.run(
        [default_envoy_path(), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert run.returncode == 0, run.stderr[-2000:]


def test_in_flight_counts_requests_sessions_and_udp_but_not_idle_http_or_admin() -> None:
    gauges = {
        "http.admin.downstream_rq_active": 1,  # the admin's own request asking
        "listener.admin.downstream_cx_active": 1,
        "http.default_gw_http.downstream_rq_active": 0,
        "http.default_gw_http.downstream_cx_active": 3,  # idle keep-alive connections
        "listener.default_gw_http.downstream_cx_active": 3,
    }
    assert in_flight(gauges) == 0
    assert in_flight({**gauges, "http.default_gw_http.downstream_rq_active": 2}) == 2
    tcp = {**gauges, "listener.default_gw_tcp.downstream_cx_active": 1}  # a TCP route's session
    assert in_flight(tcp) == 1
    assert in_flight({**tcp, "udp.default_gw_udp.downstream_sess_active": 2}) == 3


async def test_reconcile_restart_and_close(ads: AdsServer, tmp_path: Path) -> None:
    a, b = gateway("ns/a", "127.30.6.1", 8080), gateway("ns/b", "127.30.6.2", 8080)
    for gw in (a, b):
        ads.set_snapshot(gw.name, {})  # an empty config: Envoy becomes ready at once
    infra = HostInfra(
        xds_host="127.0.0.1",
        xds_port=ads.port,
        work_dir=tmp_path,
        backoff_base=0.05,
        stop_timeout=2.0,
        register_atexit=False,
    )
    pids: set[int] = set()
    try:
        await infra.reconcile({a.name: a, b.name: b})
        procs = infra.processes()
        assert set(procs) == {"ns/a", "ns/b"}
        pid_a, pid_b = procs["ns/a"].pid, procs["ns/b"].pid
        assert pid_a and pid_b and pid_a != pid_b
        pids |= {pid_a, pid_b}
        assert procs["ns/a"].admin_address != procs["ns/b"].admin_address
        assert procs["ns/a"].log_path.parent.name == "ns_a"
        assert (tmp_path / "ns_a" / "bootstrap.json").exists()

        async def both_ready() -> bool:
            return await infra.ready("ns/a") and await infra.ready("ns/b")

        await eventually(both_ready, 3.0, "both Envoys ready")
        assert all(p.state is State.RUNNING for p in infra.processes().values())
        assert ads.status("ns/a").connected and ads.status("ns/b").connected

        # the same desired state changes nothing
        await infra.reconcile({a.name: a, b.name: b})
        assert {p.pid for p in infra.processes().values()} == {pid_a, pid_b}

        # a killed Envoy is restarted
        os.kill(pid_a, signal.SIGKILL)

        async def restarted() -> bool:
            info = infra.process("ns/a")
            return info is not None and info.restarts == 1 and info.pid not in (None, pid_a)

        await eventually(restarted, 3.0, "Envoy a restarted")
        new_a = infra.process("ns/a").pid  # type: ignore[union-attr]
        assert new_a is not None
        pids.add(new_a)
        await eventually(lambda: infra.ready("ns/a"), 3.0, "restarted Envoy ready")
        assert gone(pid_a)

        # a Gateway dropped from the desired state loses its Envoy
        await infra.reconcile({b.name: b})
        assert set(infra.processes()) == {"ns/b"}
        assert gone(new_a)
        assert infra.process("ns/b").pid == pid_b  # type: ignore[union-attr]

        # close() stops everything it started
        await infra.close()
        assert infra.processes() == {}
        assert all(gone(pid) for pid in pids)
    finally:
        await infra.close()
        for pid in pids:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


async def _server_info(admin_address: str) -> dict[str, Any]:
    """What a running Envoy reports on its admin /server_info."""
    async with httpx.AsyncClient(trust_env=False) as client:
        reply = await client.get(f"http://{admin_address}/server_info")
    info: dict[str, Any] = reply.json()
    return info


async def _node(admin_address: str) -> dict[str, object]:
    """The node a running Envoy reports on its admin /server_info."""
    node: dict[str, object] = (await _server_info(admin_address))["node"]
    return node


def _host_infra(ads: AdsServer, tmp_path: Path) -> HostInfra:
    return HostInfra(
        xds_host="127.0.0.1",
        xds_port=ads.port,
        work_dir=tmp_path,
        stop_timeout=2.0,
        register_atexit=False,
    )


async def test_infrastructure_labels_and_annotations_are_the_node_metadata(
    ads: AdsServer, tmp_path: Path
) -> None:
    """GatewayInfrastructurePropagation on one host: the Envoy runs with them as its node
    metadata; Envoy reads it only when it starts, so a change replaces it."""
    gw = msgspec.structs.replace(
        gateway("ns/meta", "127.30.7.1", 8080),
        labels={"team": "edge"},
        annotations={"example.com/note": "hi"},
    )
    ads.set_snapshot(gw.name, {})
    infra = _host_infra(ads, tmp_path)
    try:
        await infra.reconcile({gw.name: gw})
        await eventually(lambda: infra.ready(gw.name), 3.0, "Envoy ready")
        first = infra.process(gw.name)
        assert first is not None
        node = await _node(first.admin_address)
        assert node["id"] == "ns/meta"
        assert node["metadata"] == {
            "namespace": "ns",
            "gateway": "meta",
            "gateway_class": "gateweave",
            "labels": {"team": "edge"},
            "annotations": {"example.com/note": "hi"},
        }
        changed = msgspec.structs.replace(gw, labels={"team": "core"})
        await infra.reconcile({gw.name: changed})
        await eventually(lambda: infra.ready(gw.name), 3.0, "restarted Envoy ready")
        second = infra.process(gw.name)
        assert second is not None and second.pid != first.pid and first.pid is not None
        replaced = first.pid

        async def replaced_gone() -> bool:
            return gone(replaced)

        # replaced make-before-break: the old Envoy quits once the new one is ready
        await eventually(replaced_gone, 2.0 + 5.0, "the replaced Envoy gone")
        assert (await _node(second.admin_address))["metadata"]["labels"] == {"team": "core"}  # type: ignore[index]
    finally:
        await infra.close()


async def test_envoy_skips_its_field_walk_unless_extra_args_ask_for_the_strict_check(
    ads: AdsServer, tmp_path: Path
) -> None:
    """Every Envoy runs with --ignore-unknown-dynamic-fields (no walk over every field of each
    xDS update), as Envoy itself reports it; a Gateway whose extraArgs ask for the strict check
    (--reject-unknown-dynamic-fields) gets that instead, which the other flag would override."""

    def with_args(name: str, address: str, *args: str) -> InfraGateway:
        gw = gateway(name, address, 8080)
        return msgspec.structs.replace(gw, envoy=msgspec.structs.replace(gw.envoy, extra_args=args))

    gateways = [
        with_args("ns/plain", "127.30.8.1"),
        with_args("ns/strict", "127.30.8.2", "--reject-unknown-dynamic-fields"),
        # named by the Gateway itself: given once (Envoy refuses to start on a flag twice)
        with_args("ns/named", "127.30.8.3", "--ignore-unknown-dynamic-fields"),
    ]
    for gw in gateways:
        ads.set_snapshot(gw.name, {})
    infra = _host_infra(ads, tmp_path)
    try:
        await infra.reconcile({gw.name: gw for gw in gateways})
        options: dict[str, dict[str, Any]] = {}
        for gw in gateways:
            await eventually(functools.partial(infra.ready, gw.name), 3.0, "Envoy ready")
            info = infra.process(gw.name)
            assert info is not None
            options[gw.name] = (await _server_info(info.admin_address))["command_line_options"]
        assert options["ns/plain"]["ignore_unknown_dynamic_fields"] is True
        assert options["ns/plain"]["reject_unknown_dynamic_fields"] is False
        assert options["ns/strict"]["ignore_unknown_dynamic_fields"] is False
        assert options["ns/strict"]["reject_unknown_dynamic_fields"] is True
        assert options["ns/named"]["ignore_unknown_dynamic_fields"] is True
    finally:
        await infra.close()


async def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    """A process that ignores SIGTERM is killed after ``stop_timeout``."""
    fake = tmp_path / "stubborn-envoy"
    ignoring = tmp_path / "ignoring-sigterm"
    fake.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        '"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
        f"open('{ignoring}', 'w').close(); time.sleep(30)\"\n"
    )
    fake.chmod(0o755)
    infra = HostInfra(
        xds_host="127.0.0.1",
        xds_port=1,
        work_dir=tmp_path,
        envoy_path=str(fake),
        stop_timeout=0.3,
        register_atexit=False,
    )
    gw = gateway("ns/s", "127.30.7.1")
    pid = None
    try:
        await infra.reconcile({gw.name: gw})
        pid = infra.process(gw.name).pid  # type: ignore[union-attr]
        assert pid is not None
        await eventually(
            lambda: asyncio.sleep(0, ignoring.exists()), 30.0, "SIGTERM ignored by the fake"
        )
        loop = asyncio.get_running_loop()
        start = loop.time()
        await infra.close()
        assert 0.25 <= loop.time() - start < 2.0
        assert gone(pid)
    finally:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)


async def test_kill_all_sync(tmp_path: Path, ads: AdsServer) -> None:
    """The atexit / signal-handler path ends every Envoy without an event loop."""
    gw = gateway("ns/k", "127.30.8.1")
    infra = HostInfra(
        xds_host="127.0.0.1",
        xds_port=ads.port,
        work_dir=tmp_path,
        backoff_base=5.0,  # no restart inside this test
        register_atexit=False,
    )
    pid = None
    try:
        await infra.reconcile({gw.name: gw})
        pid = infra.process(gw.name).pid  # type: ignore[union-attr]
        assert pid is not None
        infra.kill_all_sync(timeout=2.0)
        assert gone(pid)
    finally:
        await infra.close()
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)
