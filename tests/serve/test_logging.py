"""``--log-level`` reaches every part of ``gateweave serve``: the xDS server and the Envoy
supervisor log through the one configuration the command line makes (gateweave/logs.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from gateweave.admintoken import AdminTokenError, client_headers, client_token
from gateweave.infra.host import free_port
from tests.support.data import QUICKSTART

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _programmed(admin: str, state_dir: Path) -> bool:
    try:
        token = client_token(None, state_dir=str(state_dir))  # the one serve wrote there
        items = httpx.get(
            f"http://{admin}/api/objects", headers=client_headers(token), timeout=2
        ).json()["items"]
    except (httpx.HTTPError, ValueError, KeyError, AdminTokenError):
        return False
    return any(
        o["kind"] == "Gateway"
        and any(
            c["type"] == "Programmed" and c["status"] == "True"
            for c in o.get("status", {}).get("conditions", [])
        )
        for o in items
    )


def serve_lines(level: str, state_dir: Path, until: str | None = None) -> list[str]:
    """Run ``gateweave --log-level LEVEL serve`` on the quickstart (a real Envoy) until its
    Gateway is Programmed (Envoy ACKed its configuration) and, when ``until`` is given, a stderr
    line contains it; then stop it. Its stderr lines."""
    admin = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [
            GATEWEAVE,
            "--log-level",
            level,
            "serve",
            "--config-dir",
            str(QUICKSTART.parent),
            "--admin-address",
            admin,
            "--state-dir",
            str(state_dir),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(ANSI.sub("", line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not (
            _programmed(admin, state_dir)
            and (until is None or any(until in line for line in lines))
        ):
            assert proc.poll() is None, "serve exited:\n" + "\n".join(lines[-30:])
            assert time.monotonic() < deadline, (
                f"not programmed (or no {until!r} line) in 60 s:\n" + "\n".join(lines[-30:])
            )
            time.sleep(0.1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=5)
    return lines


def test_log_level_reaches_the_xds_server_and_the_envoy_supervisor(tmp_path: Path) -> None:
    debug = serve_lines("debug", tmp_path / "state", until="xDS ACK")
    assert any(
        "[debug" in line and "xDS ACK" in line and "node=default/quickstart" in line
        for line in debug
    )

    info = serve_lines("info", tmp_path / "state")
    assert any("[info" in line and "xDS server listening" in line for line in info), info
    assert any(
        "[info" in line and "Envoy started" in line and "gateway=default/quickstart" in line
        for line in info
    ), info
    assert not any("[debug" in line for line in info), info

    warning = serve_lines("warning", tmp_path / "state")
    assert not any("xDS server listening" in line or "Envoy started" in line for line in warning), (
        warning
    )
    assert not any("[info" in line or "[debug" in line for line in warning), warning
