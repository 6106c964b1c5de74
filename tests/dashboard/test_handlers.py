"""The dashboard's routes on the admin server: the page and its assets come from the package
with nothing external, GET only, and /api/graph answers 304 while nothing changed."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import aiohttp

from gateweave.admin import AdminServer
from gateweave.api.load import load_text
from gateweave.metrics import Metrics
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.options import TranslateOptions
from tests.support.conformance_objects import decoded
from tests.support.data import QUICKSTART
from tests.support.incremental_check import incremental_translator

OURS = "gateweave.io/gateway-controller"
SECRET = """
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: default}
type: kubernetes.io/tls
stringData: {tls.crt: "-----BEGIN CERTIFICATE-----", tls.key: "-----BEGIN PRIVATE KEY-----"}
"""


def load(store: Store, text: str, source: str) -> None:
    for obj in load_text(text, source).objects:
        store.apply(decoded(obj.raw), source=obj.source)


@contextlib.asynccontextmanager
async def admin_on(store: Store) -> AsyncIterator[tuple[Runtime, aiohttp.ClientSession]]:
    metrics = Metrics()  # one for the runtime and its status sink, as gateweave.app wires them
    runtime = Runtime(
        store,
        translate_fn=incremental_translator(),
        options=TranslateOptions(controller_name=OURS),
        status_sink=LocalStatusSink(OURS, metrics=metrics),
        dataplane=False,
        window=0.01,
        metrics=metrics,
    )
    admin = AdminServer(runtime, address="127.0.0.1:0")
    await admin.start()
    task = asyncio.create_task(runtime.run())
    try:
        await runtime.wait_settled()
        async with aiohttp.ClientSession(admin.url, headers=admin.headers) as session:
            yield runtime, session
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await admin.stop()


async def test_page_and_assets_are_the_packages_own() -> None:
    store = Store()
    async with admin_on(store) as (_, session):
        async with session.get("/") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            csp = resp.headers["Content-Security-Policy"]
            page = await resp.text()
        assert (
            "default-src 'none'" in csp
            and "connect-src 'self'" in csp
            and "script-src 'self'" in csp
        )
        assets = re.findall(r'(?:href|src)="(dashboard/[^"]+)"', page)
        assert sorted(assets) == ["dashboard/dashboard.css", "dashboard/dashboard.js"]
        texts = [page]
        for path, kind in (
            ("/dashboard/dashboard.js", "text/javascript"),
            ("/dashboard/dashboard.css", "text/css"),
        ):
            async with session.get(path) as resp:
                assert resp.status == 200 and resp.content_type == kind
                texts.append(await resp.text())
        # nothing from elsewhere: the only URL in the page is SVG's namespace name
        assert {u for t in texts for u in re.findall(r"https?://[^\s\"'`)]+", t)} == {
            "http://www.w3.org/2000/svg"
        }
        async with session.get("/dashboard/other.js") as resp:
            assert resp.status == 404
        async with session.post("/api/graph") as resp:
            assert resp.status == 405  # read-only


async def test_graph_answers_304_until_something_changes() -> None:
    store = Store()
    load(store, QUICKSTART.read_text(), str(QUICKSTART))
    async with admin_on(store) as (runtime, session):
        async with session.get("/api/graph") as resp:
            assert resp.status == 200
            etag = resp.headers["ETag"]
            body = await resp.json()
        assert {n["kind"] for n in body["nodes"]} >= {
            "GatewayClass",
            "Gateway",
            "Listener",
            "HTTPRoute",
            "Service",
        }
        async with session.get("/api/graph", headers={"If-None-Match": etag}) as resp:
            assert resp.status == 304
        route = next(
            d.raw
            for d in load_text(QUICKSTART.read_text(), "q.yaml").objects
            if d.raw["kind"] == "HTTPRoute"
        )
        store.apply(
            decoded({**route, "metadata": {**route["metadata"], "name": "second"}}),
            source="second.yaml",
        )
        await asyncio.sleep(0.05)
        await runtime.wait_settled()
        async with session.get("/api/graph", headers={"If-None-Match": etag}) as resp:
            assert resp.status == 200 and resp.headers["ETag"] != etag
            ids = {n["id"] for n in (await resp.json())["nodes"]}
        assert "HTTPRoute/default/second" in ids


async def test_one_object_with_its_status_and_never_a_secret() -> None:
    store = Store()
    load(store, QUICKSTART.read_text() + SECRET, str(QUICKSTART))
    async with admin_on(store) as (_, session):
        async with session.get(
            "/api/object", params={"kind": "HTTPRoute", "namespace": "default", "name": "demo"}
        ) as resp:
            route = await resp.json()
        assert (
            route["metadata"]["name"] == "demo"
            and route["status"]["parents"][0]["controllerName"] == OURS
        )
        async with session.get(
            "/api/object", params={"kind": "GatewayClass", "name": "gateweave"}
        ) as resp:
            assert (await resp.json())["status"]["conditions"][0]["status"] == "True"
        for params in (
            {"kind": "Secret", "namespace": "default", "name": "tls"},
            {"kind": "HTTPRoute", "namespace": "default", "name": "absent"},
            {},
        ):
            async with session.get("/api/object", params=params) as resp:
                assert resp.status == 404, params
                assert "PRIVATE KEY" not in await resp.text()
