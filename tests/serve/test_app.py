"""The composition root (gateweave/app): one Settings that every part reads."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave import app
from gateweave.app.root import translator
from gateweave.providers.file import FileProvider
from gateweave.translate.incremental import IncrementalTranslator
from tests.support.gcwatch import AutomaticPasses

OTHER = "example.com/other-controller"
MANIFESTS = f"""\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: other}}
spec: {{controllerName: {OTHER}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: other
  listeners: [{{name: http, protocol: HTTP, port: 8080}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: route, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
status:
  parents:
  - parentRef: {{group: gateway.networking.k8s.io, kind: Gateway, namespace: default, name: gw}}
    controllerName: gateweave.io/gateway-controller
    conditions:
    - {{type: Accepted, status: "True", reason: Accepted, message: "", lastTransitionTime:
    "2024-01-01T00:00:00Z"}}
"""


def test_settings_refuse_a_kubernetes_data_plane_without_the_kubernetes_provider() -> None:
    with pytest.raises(ValueError, match="Kubernetes provider"):
        app.Settings(provider=app.FileSettings("."), dataplane=app.KubeDataplane())
    kube = app.Settings(
        provider=app.KubeSettings(), dataplane=app.KubeDataplane(), controller_name=OTHER
    )
    assert kube.translate_options().address_mode == "kubernetes"
    assert kube.translate_options().controller_name == OTHER
    assert (
        app.Settings(provider=app.KubeSettings()).translate_options().address_mode == "standalone"
    )


def test_the_incremental_check_is_a_setting() -> None:
    settings = app.Settings(provider=app.FileSettings("."))
    checked = app.Settings(
        provider=app.FileSettings("."), runtime=app.RuntimeSettings(check_incremental=True)
    )
    plain, check = translator(settings), translator(checked)
    assert isinstance(plain, IncrementalTranslator) and isinstance(check, IncrementalTranslator)
    assert not plain.check and check.check


async def test_the_controller_name_comes_from_the_settings_alone(tmp_path: Path) -> None:
    """Translation and the status sink both take the settings' controller name: the route's
    status gets our entry beside the entry another controller (the default name) wrote."""
    (tmp_path / "objects.yaml").write_text(MANIFESTS)
    stop = asyncio.Event()
    started: asyncio.Future[app.App] = asyncio.get_running_loop().create_future()
    settings = app.Settings(
        provider=app.FileSettings(str(tmp_path)),
        dataplane=None,
        controller_name=OTHER,
        admin=app.AdminSettings("127.0.0.1:0"),
    )
    task = asyncio.create_task(
        app.run(settings, app.Hooks(stop=stop, on_started=started.set_result))
    )
    try:
        running = await asyncio.wait_for(started, 10)
        await running.runtime.wait_settled(10)
        async with httpx.AsyncClient(
            base_url=running.admin.url, headers=running.admin.headers
        ) as client:
            items: list[dict[str, Any]] = (await client.get("/api/objects")).json()["items"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    route = next(o for o in items if o["kind"] == "HTTPRoute")
    assert [p["controllerName"] for p in route["status"]["parents"]] == [
        "gateweave.io/gateway-controller",
        OTHER,
    ]
    ours = route["status"]["parents"][1]["conditions"]
    assert {c["type"]: c["status"] for c in ours} == {"Accepted": "True", "ResolvedRefs": "True"}
    gateway_class = next(o for o in items if o["kind"] == "GatewayClass")
    assert {c["type"]: c["status"] for c in gateway_class["status"]["conditions"]}[
        "Accepted"
    ] == "True"


async def test_no_collection_between_the_first_read_and_the_freeze(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file provider's first read, its apply to the store, the runtime's construction and
    first translation run with the collector held, until the runtime's freeze collects once:
    no automatic pass walks the objects read on the way (with the collector back on after the
    read, the apply's allocations set off passes over everything read)."""
    (tmp_path / "objects.yaml").write_text(
        MANIFESTS.split("---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute")[0]
        + "".join(
            f"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
            f"metadata: {{name: r{i}, namespace: default}}\nspec:\n  parentRefs: [{{name: gw}}]\n"
            f"  rules: [{{backendRefs: [{{name: svc, port: 80}}]}}]\n"
            for i in range(100)
        )
    )
    passes = AutomaticPasses()
    passes.open_at(monkeypatch, FileProvider, "refresh")
    stop = asyncio.Event()
    started: asyncio.Future[app.App] = asyncio.get_running_loop().create_future()
    settings = app.Settings(
        provider=app.FileSettings(str(tmp_path)),
        dataplane=None,
        admin=app.AdminSettings("127.0.0.1:0"),
    )
    with passes:
        task = asyncio.create_task(
            app.run(settings, app.Hooks(stop=stop, on_started=started.set_result))
        )
        try:
            running = await asyncio.wait_for(started, 10)
            await running.runtime.wait_settled(10)
            assert len(running.runtime.store) == 102
            assert gc.get_freeze_count() > 0  # frozen: the window is closed
            assert passes.open
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    assert passes.passes == []
