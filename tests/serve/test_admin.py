from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from gateweave import app
from gateweave.admin import AdminServer, loopback_host, parse_address
from gateweave.api.decode import decode
from gateweave.api.load import load_text
from gateweave.metrics import Metrics
from gateweave.output import objects_with_status
from gateweave.providers import ConfigError, ErrorBook
from gateweave.redact import redact
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.options import TranslateOptions
from gateweave_bench import harness as h
from tests.support.fake_translate import SEED, fake_translate
from tests.support.specletter_objects import certificate

OURS = "gateweave.io/gateway-controller"
T0 = "2024-01-01T00:00:00Z"
ASSET = "dashboard.js"  # a dashboard asset to fetch
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
        store,
        translate_fn=fake_translate,
        options=TranslateOptions(controller_name=OURS),
        status_sink=LocalStatusSink(OURS, clock=lambda: T0, metrics=metrics),
        dataplane=False,
        window=0.01,
        metrics=metrics,
    )
    for text in (SEED["HTTPRoute"], SECRET, SEED["Gateway"], SEED["GatewayClass"]):
        load_into(store, text)
    admin = AdminServer(runtime, errors, "127.0.0.1:0")
    host, port = await admin.start()
    assert host == "127.0.0.1" and port != 0
    task: asyncio.Task[None] | None = None
    try:
        async with aiohttp.ClientSession(admin.url, headers=admin.headers) as session:
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
                ("GatewayClass", "gateweave"),
                ("Gateway", "gw"),
                ("HTTPRoute", "route"),
            ]  # kind order, no core kinds
            assert items[1]["status"]["conditions"][0]["lastTransitionTime"] == T0
            assert items[2]["status"]["parents"][0]["controllerName"] == OURS
            # the same shape `gateweave translate -o json` prints
            batch = fake_translate(store.snapshot(), runtime.translation_options())
            assert items == objects_with_status(
                store.decoded_objects(), batch.statuses, OURS, now=T0
            )

            status, body = await get(session, "/api/errors")
            assert body == {"items": [{"source": "x.yaml:3", "message": "invalid YAML: oops"}]}

            status, body = await get(session, "/api/ir")
            assert body["xds"]["default/gw"]["address"] == "127.10.0.1"
            assert body["infra"]["default/gw"]["ports"] == [
                {"name": "http", "port": 80, "protocol": "TCP"}
            ]

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
    given = {
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": T0,
            }
        ]
    }
    gw = store.get(next(k for k in store if k.kind == "Gateway"))
    assert gw is not None
    gw_raw = {**gw.raw, "status": given}
    decoded, errors = decode(gw_raw, "")
    assert decoded is not None, errors
    statuses: dict[tuple[str, str, str], dict[str, Any]] = {
        ("GatewayClass", "", "gateweave"): {
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": ""}
            ]
        },
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
        provider=app.FileSettings(str(tmp_path), debounce_ms=20),
        dataplane=None,
        controller_name=OURS,
        admin=app.AdminSettings("127.0.0.1:0"),
    )
    hooks = app.Hooks(
        stop=stop,
        on_started=lambda running: started.append(running.admin),
        translator=fake_translate,
    )
    task = asyncio.create_task(app.run(settings, hooks))
    try:
        for _ in range(500):
            if started or task.done():
                break
            await asyncio.sleep(0.01)
        assert started, task
        async with aiohttp.ClientSession(started[0].url, headers=started[0].headers) as session:
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


# ---------------------------------------------------------------- secrets and Host


@contextlib.asynccontextmanager
async def serving_dir(
    config_dir: Path, admin: app.AdminSettings | None = None
) -> AsyncIterator[AdminServer]:
    """``app.run`` on ``config_dir`` (real translation, no data plane), once translated."""
    stop = asyncio.Event()
    started: list[AdminServer] = []
    settings = app.Settings(
        provider=app.FileSettings(str(config_dir), debounce_ms=20),
        dataplane=None,
        admin=admin or app.AdminSettings("127.0.0.1:0"),
    )
    task = asyncio.create_task(
        app.run(settings, app.Hooks(stop=stop, on_started=lambda a: started.append(a.admin)))
    )
    try:
        for _ in range(1000):
            if (started and started[0].runtime.ready) or task.done():
                break
            await asyncio.sleep(0.01)
        assert started and started[0].runtime.ready, task
        yield started[0]
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)


def tls_gateway_manifests() -> tuple[list[dict[str, Any]], bytes]:
    """A Gateway terminating HTTPS with a Secret's key and presenting a client certificate
    to backends (both keys reach the IR); returns the manifests and the listener's key."""
    cert, key = (pem.encode() for pem in certificate(("secure.test",)))
    client_cert, client_key = (pem.encode() for pem in certificate(("client.test",)))
    gw = h.gateway(
        "gw",
        "127.0.0.1",
        [
            h.listener(
                "https",
                "HTTPS",
                8443,
                hostname="secure.test",
                tls={"mode": "Terminate", "certificateRefs": [{"name": "tls-cert"}]},
            )
        ],
    )
    gw["spec"]["tls"] = {
        "backend": {"clientCertificateRef": {"kind": "Secret", "name": "client-cert"}}
    }
    route = h.http_route("secure", "gw", ["secure.test"], [h.rule("/", [h.backend_ref("svc", 80)])])
    docs = [
        h.gateway_class(),
        gw,
        *h.service("svc", 80, 8080),
        route,
        h.tls_secret("tls-cert", cert, key),
        h.tls_secret("client-cert", client_cert, client_key),
    ]
    return docs, key


async def test_no_endpoint_returns_a_private_key(tmp_path: Path) -> None:
    docs, key = tls_gateway_manifests()
    h.write_manifests(tmp_path / "gw.yaml", docs)
    key_line = key.decode().splitlines()[1]  # the start of the key material itself
    async with serving_dir(tmp_path) as admin:
        # an error message that quoted a key, cut short as long messages are
        admin.errors.set("file:z", [ConfigError("z.yaml:1", "bad value " + key.decode()[:120])])
        async with aiohttp.ClientSession(admin.url, headers=admin.headers) as session:
            bodies: dict[str, bytes] = {}
            for route in admin.app.router.routes():
                info = route.resource.get_info() if route.resource is not None else {}
                path = info.get("path") or info["formatter"].format(
                    kind="Gateway", namespace="default", name="gw", asset=ASSET
                )
                if path == "/api/object":
                    path += "?kind=Gateway&namespace=default&name=gw"
                async with session.get(path) as resp:
                    # no data plane here: no access log to show (404)
                    assert resp.status == (404 if path.startswith("/api/logs/") else 200), path
                    if resp.content_type == "text/event-stream":  # a stream: its first event
                        async with asyncio.timeout(10):
                            bodies[path] = await resp.content.readuntil(b"\n\n")
                    else:
                        bodies[path] = await resp.read()
            assert "/api/explain/Gateway/default/gw" in bodies and "/api/ir" in bodies
            ir = msgspec.json.decode(bodies["/api/ir"])
            tls = json.dumps(ir["xds"]["default/gw"])
            assert (
                "default/tls-cert" in tls and "BEGIN CERTIFICATE" in tls
            )  # the TLS config is there ...
            assert "[redacted private key]" in tls  # ... with its keys blanked
            assert b"[redacted private key]" in bodies["/api/errors"]
            for path, body in bodies.items():
                assert b"PRIVATE KEY-----" not in body and key_line.encode() not in body, path


@contextlib.asynccontextmanager
async def serving_dir_of_nothing() -> AsyncIterator[AdminServer]:
    with tempfile.TemporaryDirectory() as tmp:
        async with serving_dir(Path(tmp)) as admin:
            yield admin


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:19000",
        "10.0.0.1",
        "[2001:db8::1]:80",
        "localhost.evil.example",
        "127.0.0.1.evil.example",
    ],
)
async def test_a_non_loopback_host_header_is_refused(host: str) -> None:
    async with (
        serving_dir_of_nothing() as admin,
        aiohttp.ClientSession(admin.url, headers=admin.headers) as session,
    ):
        for path in ("/api/ir", "/api/objects", "/healthz"):
            async with session.get(path, headers={"Host": host}) as resp:
                assert resp.status == 421, (host, path)
                assert "redacted" not in await resp.text()


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:19000", "127.0.0.1", "127.3.4.5:80", "[::1]:19000", "::1"]
)
async def test_loopback_host_headers_are_served(host: str) -> None:
    async with (
        serving_dir_of_nothing() as admin,
        aiohttp.ClientSession(admin.url, headers=admin.headers) as session,
        session.get("/api/ir", headers={"Host": host}) as resp,
    ):
        assert resp.status == 200, host


def test_the_bind_address_is_a_valid_host() -> None:
    assert loopback_host("192.0.2.7:19000", "192.0.2.7")
    assert loopback_host("[2001:db8::7]:19000", "2001:db8::7")
    assert not loopback_host("192.0.2.8:19000", "192.0.2.7")
    # bound to every address: the one the connection came in on (a kubelet's probe at the pod IP)
    assert loopback_host("10.1.2.3:19000", "0.0.0.0", "10.1.2.3")
    assert not loopback_host("evil.example:19000", "0.0.0.0", "10.1.2.3")


def test_redact_blanks_every_key_and_keeps_json_valid() -> None:
    _, key = certificate(("a.test",))
    _, rsa_key = certificate(("b.test",), algorithm="rsa")
    cut = key[:100]  # a key cut short in a message
    body = json.dumps(
        {"a": key, "b": "kept", "c": cut, "d": [rsa_key, "-----BEGIN CERTIFICATE-----"]}
    ).encode()
    out = json.loads(redact(body))
    assert out == {
        "a": "[redacted private key]\n",
        "b": "kept",
        "c": "[redacted private key]",
        "d": ["[redacted private key]\n", "-----BEGIN CERTIFICATE-----"],
    }
    text = f"key:\n{key}tail\n".encode()  # raw text (not JSON)
    assert redact(text) == b"key:\n[redacted private key]\ntail\n"
    traditional = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"
    assert redact(traditional.encode()) == b"[redacted private key]"


def test_redact_blanks_htpasswd_hashes_and_api_keys() -> None:
    users = "alice:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\nbob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
    out = json.loads(redact(json.dumps({"users": users}).encode()))
    assert out == {"users": "alice:{SHA}[redacted]\nbob:{SHA}[redacted]"}
    keys = json.dumps(
        {
            "credentials": [
                {"client": "c1", "api_key": 's3"cret'},
                {"api_key": "two", "client": "c2"},
            ]
        }
    )
    assert json.loads(redact(keys.encode())) == {
        "credentials": [
            {"client": "c1", "api_key": "[redacted]"},
            {"api_key": "[redacted]", "client": "c2"},
        ]
    }
