"""The data plane survives the control plane: real ``gateweave serve`` processes, real Envoys,
real traffic. A ``kill -9`` of serve leaves its Envoy serving; the next serve on the same
state directory adopts it (no new process, no failed request) and keeps configuring it; an
explicit stop (SIGTERM, SIGINT, also through ``python3 dev.py``) drains and stops every Envoy."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave.infra.statedir import EnvoyRecord, records, running
from gateweave_bench import harness as h
from tests.support.data import ROOT
from tests.support.serveproc import GATEWEAVE, ServeProcess
from tests.support.traffic import Traffic

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")


def until(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    return running(pid)  # (an exited Envoy is init's zombie for a moment: not alive)


class Serve(ServeProcess):
    """``gateweave serve`` with host Envoys, and what the tests read from its admin API."""

    def metric(self, name: str) -> float | None:
        if self.url is None:
            return None
        try:
            text = httpx.get(f"{self.url}/metrics", timeout=5).text
        except httpx.HTTPError:
            return None
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    def programmed(self, gateway: str) -> bool:
        if self.url is None:
            return False
        try:
            items = httpx.get(f"{self.url}/api/objects", headers=self.headers, timeout=5).json()[
                "items"
            ]
        except (httpx.HTTPError, ValueError):
            return False
        for obj in items:
            if obj["kind"] == "Gateway" and obj["metadata"]["name"] == gateway:
                cond = h.condition(obj, "Programmed")
                return cond is not None and cond["status"] == "True"
        return False


@pytest.fixture
def backends() -> Iterator[dict[str, h.NameServer]]:
    a, b = h.NameServer("A"), h.NameServer("B")
    try:
        yield {"A": a, "B": b}
    finally:
        a.close()
        b.close()


def manifests(
    address: str, port: int, backends: dict[str, h.NameServer], extra_rule: bool = False
) -> list[dict[str, Any]]:
    rules = [h.rule("/", [h.backend_ref("svc-a", 80)])]
    if extra_rule:
        rules.append(h.rule("/b", [h.backend_ref("svc-b", 80)]))
    return [
        h.gateway_class(),
        h.gateway("gw", address, [h.listener("http", "HTTP", port)]),
        *h.service("svc-a", 80, backends["A"].port),
        *h.service("svc-b", 80, backends["B"].port),
        h.http_route("web", "gw", ["example.com"], rules),
    ]


def envoys(state: Path) -> list[EnvoyRecord]:
    return records(state / "envoys", prune=False)


def test_kill_9_then_a_new_serve_adopts_the_envoy_without_a_failed_request(
    tmp_path: Path, backends: dict[str, h.NameServer]
) -> None:
    address = "127.40.9.1"
    port = free_port(address)
    config, state = tmp_path / "config", tmp_path / "state"
    config.mkdir()
    h.write_manifests(config / "all.yaml", manifests(address, port, backends))
    first = Serve("--config-dir", str(config), "--state-dir", str(state))
    second: Serve | None = None
    traffic: Traffic | None = None
    pids: set[int] = set()
    try:
        until(
            lambda: first.programmed("gw"),
            30,
            f"Gateway programmed by the first serve:\n{first.log()}",
        )
        until(
            lambda: (r := h.fetch_sync(address, port)) is not None and r.body == "A",
            10,
            "served by Envoy",
        )
        [record] = envoys(state)
        pids.add(record.pid)
        assert (state.stat().st_mode & 0o777, (state / "xds.sock").stat().st_mode & 0o777) == (
            0o700,
            0o600,
        )

        traffic = Traffic(address, port, "A")
        until(lambda: traffic.sent >= 10, 10, "traffic flowing")
        first.proc.kill()  # kill -9: nothing of serve's shutdown runs
        first.proc.wait()
        assert alive(record.pid)

        # Without a controller: the Envoy keeps serving, and status lists it.
        status = subprocess.run(
            [GATEWEAVE, "status", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert status.returncode == 0, status.stderr
        assert (
            "no controller" in status.stdout
            and "default/gw" in status.stdout
            and str(record.pid) in status.stdout
        )
        sent = traffic.sent
        until(lambda: traffic.sent >= sent + 10, 10, "traffic flowing without a controller")

        second = Serve("--config-dir", str(config), "--state-dir", str(state))
        until(
            lambda: second.programmed("gw"),
            30,
            f"Gateway programmed by the second serve:\n{second.log()}",
        )
        assert second.metric("gateweave_envoys_adopted_total") == 1.0
        assert second.metric("gateweave_envoys_orphaned") == 0.0

        # The adopted Envoy follows the new serve's configuration.
        h.write_manifests(config / "all.yaml", manifests(address, port, backends, extra_rule=True))
        until(
            lambda: (r := h.fetch_sync(address, port, "/b")) is not None and r.body == "B",
            10,
            f"a route added after the restart is served:\n{second.log()}",
        )
        sent = traffic.sent
        until(lambda: traffic.sent >= sent + 10, 10, "traffic flowing after the change")
        traffic.stop()
        assert traffic.failed == [], (
            f"{len(traffic.failed)} of {traffic.sent} requests failed: {traffic.failed[:5]}"
        )
        assert [r.pid for r in envoys(state)] == [record.pid]  # adopted, no second Envoy

        # An explicit stop drains and stops it within 5 s.
        stopped_at = time.monotonic()
        second.proc.send_signal(signal.SIGTERM)
        until(lambda: not alive(record.pid), 5, "Envoy gone after SIGTERM")
        assert time.monotonic() - stopped_at < 5
        assert second.proc.wait(timeout=10) == 0
        assert envoys(state) == [] and not (state / "xds.sock").exists()
    finally:
        if traffic is not None:
            traffic.stop()
        for serve in (first, second):
            if serve is not None:
                serve.stop(signal.SIGKILL)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_dev_py_quickstart_passes_the_signal_on_and_leaves_no_envoy(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """``python3 dev.py quickstart`` (the real dev.py): its signal reaches gateweave, which
    drains and stops its Envoy before dev.py exits."""
    state = tmp_path / "state"
    env = {**os.environ, "GATEWEAVE_NATIVE": "0"}
    dev = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "dev.py"),
            "quickstart",
            "--admin-address",
            "127.0.0.1:0",
            "--state-dir",
            str(state),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        assert dev.stdout is not None
        for line in dev.stdout:
            if line.startswith("gateweave is serving"):
                break
        else:
            raise AssertionError(
                f"the quickstart did not start: {dev.stderr.read() if dev.stderr else ''}"
            )
        pids = [r.pid for r in envoys(state)]
        assert len(pids) == 1 and alive(pids[0])
        stopped_at = time.monotonic()
        dev.send_signal(sig)
        until(lambda: not alive(pids[0]), 5, "Envoy gone after the signal to dev.py")
        assert time.monotonic() - stopped_at < 5
        dev.wait(timeout=10)
        assert envoys(state) == []
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
