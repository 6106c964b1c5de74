from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateweave import app
from gateweave.admin import AdminServer, parse_address
from gateweave.api.decode import decode
from gateweave.api.load import load_text
from gateweave.metrics import Metrics
from gateweave.output import objects_with_status
from gateweave.providers import ConfigError, ErrorBook
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.options import TranslateOptions
from tests.support.fake_translate import SEED, fake_translate

OURS = "gateweave.io/gateway-controller"
T0 = "2024-01-01T00:00:00Z"
SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n"


def load_into(store: Store, text: str) -> None:
    for obj in load_text(text, "x.yaml").objects:
        decoded, errors = decode(obj.raw, obj.source)
        assert decoded is not None, errors
        store.apply(decoded, source=obj.source)


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url) as resp:
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:19000") == ("127.0.0.1", 19000)
    assert parse_address("[::1]:8080") == ("::1", 8080)
    with pytest.raises(ValueError):
        parse_address("localhost")


async def test_endpoints() -> None:
    store = Store()
    errors = ErrorBook()
    errors.set("file:x", [ConfigError("x.yaml:3", "invalid YAML: oops")])
    metrics = Metrics()
    runtime = Runtime(
        store, translate_fn=fake_translate, options=TranslateOptions(controller_name=OURS),
        status_sink=LocalStatusSink(OURS, clock=lambda: T0, metrics=metrics), dataplane=False, window=0.01,
        metrics=metrics,
    )
    for text in (SEED["HTTPRoute"], SECRET, SEED["Gateway"], SEED["GatewayClass"]):
        load_into(store, text)
    admin = AdminServer(runtime, errors, "127.0.0.1:0")
    host, port = await admin.start()
    assert host == "127.0.0.1" and port != 0
    task: asyncio.Task[None] | None = None
    try:
        async with aiohttp.ClientSession(admin.url) as session:
            assert (await get(session, "/healthz"))[0] == 200
            assert (await get(session, "/readyz"))[0] == 503
            assert await get(session, "/api/ir") == (200, {"xds": {}, "infra": {}})

            task = asyncio.create_task(runtime.run())
            await runtime.wait_settled()
            assert (await get(session, "/readyz"))[0] == 200

            status, body = await get(session, "/api/objects")
            assert status == 200
            items = body["items"]
            assert [(o["kind"], o["metadata"]["name"]) for o in items] == [
                ("GatewayClass", "gateweave"), ("Gateway", "gw"), ("HTTPRoute", "route")
            ]  # kind order, no core kinds
            assert items[1]["status"]["conditions"][0]["lastTransitionTime"] == T0
            assert items[2]["status"]["parents"][0]["controllerName"] == OURS
            # the same shape `gateweave translate -o json` prints
            batch = fake_translate(store.snapshot(), runtime.translation_options())
            assert items == objects_with_status(store.decoded_objects(), batch.statuses, OURS, now=T0)

            status, body = await get(session, "/api/errors")
            assert body == {"items": [{"source": "x.yaml:3", "message": "invalid YAML: oops"}]}

            status, body = await get(session, "/api/ir")
            assert body["xds"]["default/gw"]["address"] == "127.10.0.1"
            assert body["infra"]["default/gw"]["ports"] == [{"name": "http", "port": 80, "protocol": "TCP"}]

            status, text = await get(session, "/metrics")
            assert status == 200
            assert "gateweave_translations_total 1.0" in text
            assert 'gateweave_events_total{kind="HTTPRoute"} 1.0' in text
            assert "gateweave_translation_seconds_count 1.0" in text
            assert "gateweave_status_writes_total 3.0" in text
            assert 'gateweave_publishes_total{sink="status"} 1.0' in text
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await admin.stop()


def test_objects_with_status_offline_keeps_given_status() -> None:
    store = Store()
    load_into(store, SEED["GatewayClass"])
    load_into(store, SEED["Gateway"].replace("name: gw", "name: other"))
    given = {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                             "lastTransitionTime": T0}]}
    gw = store.get(next(k for k in store if k.kind == "Gateway"))
    assert gw is not None
    gw_raw = {**gw.raw, "status": given}
    decoded, errors = decode(gw_raw, "")
    assert decoded is not None, errors
    statuses: dict[tuple[str, str, str], dict[str, Any]] = {
        ("GatewayClass", "", "gateweave"): {"conditions": [{"type": "Accepted", "status": "True",
                                                           "reason": "Accepted", "message": ""}]},
    }
    out = objects_with_status([decoded, *store.decoded_objects()[:1]], statuses, OURS)
    assert [o["kind"] for o in out] == ["GatewayClass", "Gateway"]
    assert "lastTransitionTime" not in out[0]["status"]["conditions"][0]  # now=None: left out
    assert out[1]["status"] == decoded.raw["status"]  # no computed status: kept as given


async def test_serve_end_to_end(tmp_path: Path) -> None:
    for kind, text in SEED.items():
        (tmp_path / f"{kind.lower()}.yaml").write_text(text)
    stop = asyncio.Event()
    started: list[AdminServer] = []
    settings = app.Settings(
        provider=app.FileSettings(str(tmp_path), debounce_ms=20), dataplane=None, controller_name=OURS,
        admin=app.AdminSettings("127.0.0.1:0"),
    )
    hooks = app.Hooks(stop=stop, on_started=lambda running: started.append(running.admin), translator=fake_translate)
    task = asyncio.create_task(app.run(settings, hooks))
    try:
        for _ in range(500):
            if started or task.done():
                break
            await asyncio.sleep(0.01)
        assert started, task
        async with aiohttp.ClientSession(started[0].url) as session:
            for _ in range(500):
                if (await get(session, "/readyz"))[0] == 200:
                    break
                await asyncio.sleep(0.01)
            _, body = await get(session, "/api/objects")
            assert [o["kind"] for o in body["items"]] == ["GatewayClass", "Gateway", "HTTPRoute"]
            assert all("status" in o for o in body["items"])

            (tmp_path / "broken.yaml").write_text("kind: [\n")
            for _ in range(500):
                _, errors = await get(session, "/api/errors")
                if errors["items"]:
                    break
                await asyncio.sleep(0.01)
            assert errors["items"][0]["source"] == f"{tmp_path}/broken.yaml:2"
            _, text = await get(session, "/metrics")
            assert "gateweave_config_errors 1.0" in text
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    finally:
        stop.set()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
