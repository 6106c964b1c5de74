"""`gateweave serve --provider kubernetes` as a real process against the API-server stand-in."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import yaml

from tests.support.data import QUICKSTART
from tests.support.kubeapi import KubeAPI, write_kubeconfig

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_serve_kubernetes_process(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.05)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kubeconfig"))
    proc = await asyncio.create_subprocess_exec(
        GATEWEAVE,
        "serve",
        "--provider",
        "kubernetes",
        "--kubeconfig",
        kc,
        "--namespace",
        "default",
        "--no-dataplane",
        "--admin-address",
        f"127.0.0.1:{free_port()}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "KUBECONFIG": ""},
    )
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # a ceiling for a hang: a process start at load 18 took >20 s
        while True:
            route = api.get("HTTPRoute", "default", "demo") or {}
            parents = (route.get("status") or {}).get("parents") or []
            if parents and parents[0]["conditions"][0]["status"] == "True":
                break
            assert proc.returncode is None, "gateweave exited"
            assert loop.time() < deadline, "no status written"
            await asyncio.sleep(0.05)
        gw = api.get("Gateway", "default", "quickstart")
        assert (
            gw is not None
            and {c["type"]: c["status"] for c in gw["status"]["conditions"]}["Programmed"] == "True"
        )
        assert {r.namespace for r in api.requests(resource="httproutes", verb="watch")} == {
            "default"
        }
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 15)
        await api.stop()
    assert proc.returncode == 0, out.decode()[-2000:]
