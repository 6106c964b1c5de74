"""``gateweave serve`` on a directory large enough for its reads to be shared with a worker
process (gateweave.providers.readers): every route accepted, a rejected object's error at its
line, and the start says how the files were read."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.providers.fileread import read_file
from tests.support.fake_translate import SEED
from tests.support.serveproc import ServeProcess

pytestmark = pytest.mark.timeout(120)

ROUTES = 600

BASE = "---\n".join(
    [
        SEED["GatewayClass"],
        SEED["Gateway"],
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n  namespace: default\n"
        "spec:\n  ports:\n  - port: 80\n",
    ]
)


def route(name: str, path: str) -> str:
    # the path match on line 13
    return (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n"
        f"  name: {name}\n  namespace: default\nspec:\n  parentRefs:\n  - name: gw\n"
        f"  hostnames:\n  - {name}.test\n  rules:\n  - matches:\n    - path:\n"
        f"        value: {path}\n    backendRefs:\n    - name: svc\n      port: 80\n"
    )


def accepted(obj: Any) -> bool:
    parents = (obj or {}).get("status", {}).get("parents", [])
    return bool(parents) and all(
        any(c["type"] == "Accepted" and c["status"] == "True" for c in p["conditions"])
        for p in parents
    )


def test_serve_reads_a_large_directory_with_a_worker_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "base.yaml").write_text(BASE)
    for i in range(ROUTES):
        (config / f"route-{i:04}.yaml").write_text(route(f"r{i}", f"/r{i}"))
    (config / "route-bad.yaml").write_text(route("bad", "/a//b"))
    monkeypatch.setenv("GATEWEAVE_READ_WORKERS", "1")
    server = ServeProcess("--no-dataplane", "--config-dir", str(config))
    try:
        url = server.wait_listening()
        with httpx.Client(headers=server.headers, timeout=5) as client:

            def get(path: str, **params: str) -> Any:
                reply = client.get(f"{url}{path}", params=params)
                return reply.json() if reply.status_code == 200 else None

            deadline = time.monotonic() + 60
            while not all(
                accepted(get("/api/object", kind="HTTPRoute", namespace="default", name=f"r{i}"))
                for i in (0, ROUTES // 2, ROUTES - 1)
            ):
                assert time.monotonic() < deadline, f"routes not accepted:\n{server.log()}"
                time.sleep(0.1)
            objects = get("/api/objects")
            names = {
                o["metadata"]["name"]
                for o in (objects or {}).get("items", [])
                if o.get("kind") == "HTTPRoute"
            }
            assert names == {f"r{i}" for i in range(ROUTES)}
            errors = get("/api/errors")["items"]
        bad = [e for e in errors if e.get("name") == "bad"]
        assert len(bad) == 1, errors
        # at the path match's line, as serve reading the file itself says
        here = read_file(str(config / "route-bad.yaml"), str(config / "route-bad.yaml"), "/", None)
        assert [p.source for p in here.problems] == [f"{config}/route-bad.yaml:13"]
        assert bad[0]["source"] == here.problems[0].source, bad
        read = [line for line in server.lines if "files read with worker processes" in line]
        assert len(read) == 1, server.log()
        assert re.search(rf"files={ROUTES + 2}\b", read[0]) and re.search(r"workers=1\b", read[0])
    finally:
        server.stop()
