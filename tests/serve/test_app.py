"""The composition root (gateweave/app): one Settings that every part reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave import app
from gateweave.app.root import translator
from gateweave.translate.incremental import IncrementalTranslator

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
