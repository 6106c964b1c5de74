"""The Kubernetes provider against the API-server stand-in: discovery, list+watch, resume,
410 Gone, reconnects, namespace scope, and what reaches the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateweave.api.kinds import Key
from gateweave.kube.client import KubeClient
from gateweave.providers import ErrorBook
from gateweave.providers.kubernetes import KubernetesProvider
from gateweave.store import Change, Store
from tests.support.kubeapi import (
    ApiError,
    KubeAPI,
    Request,
    ResourceType,
    default_types,
    write_kubeconfig,
)


def route(name: str, ns: str = "default", host: str = "a.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host]},
    }


def gwclass(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": "gateweave.io/gateway-controller"},
    }


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


def same_as_api(
    api: KubeAPI, store: Store, kinds: tuple[str, ...] = ("HTTPRoute", "GatewayClass")
) -> bool:
    for kind in kinds:
        t = api.rtype(kind)
        want = {
            Key(
                kind,
                o["metadata"].get("namespace", "") if t.namespaced else "",
                o["metadata"]["name"],
            ): o["metadata"]["resourceVersion"]
            for o in api.objects(kind)
        }
        have = {
            k: s.raw["metadata"].get("resourceVersion") for k, s in store.items() if k.kind == kind
        }
        if want != have:
            return False
    return True


@contextlib.asynccontextmanager
async def running(
    api: KubeAPI, tmp_path: Path, **kw: Any
) -> AsyncIterator[tuple[KubernetesProvider, Store]]:
    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    store = Store()
    provider = KubernetesProvider(client, store, kw.pop("errors", None), backoff=(0.02, 0.2), **kw)
    task = asyncio.create_task(provider.run())
    try:
        await asyncio.wait_for(provider.synced.wait(), 5)
        yield provider, store
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()


@pytest.fixture
async def api() -> AsyncIterator[KubeAPI]:
    server = KubeAPI(history=4, bookmark_interval=0.02)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_store_follows_the_api_with_real_metadata(api: KubeAPI, tmp_path: Path) -> None:
    api.put(gwclass("gc"))
    api.put(route("r1"))
    async with running(api, tmp_path) as (provider, store):
        assert provider.paths["HTTPRoute"].version == "v1" and same_as_api(api, store)
        changes: list[Change] = []
        store.subscribe(changes.append)
        api.advance(3600)
        api.put(route("r2"))
        api.put(route("r1", host="b.example.com"))
        api.put(route("r1", host="c.example.com"))
        await wait_for(lambda: same_as_api(api, store))
        r1 = store.get(Key("HTTPRoute", "default", "r1"))
        assert r1 is not None and r1.model.metadata.generation == 3 == r1.generation
        r2 = store.get(Key("HTTPRoute", "default", "r2"))
        assert r2 is not None and r2.model.metadata.creation_timestamp == "2026-01-01T01:00:00Z"
        assert r2.model.metadata.uid == api.get("HTTPRoute", "default", "r2")["metadata"]["uid"]  # type: ignore[index]

        # a status-only change (what our own status writes look like) changes no model
        changes.clear()
        obj = api.get("HTTPRoute", "default", "r1")
        assert obj is not None
        api._update(
            api.rtype("HTTPRoute"), "default", "r1", {**obj, "status": {"parents": []}}, True, "x"
        )
        await wait_for(lambda: same_as_api(api, store))
        assert [(c.op, c.model_changed) for c in changes] == [("updated", False)]
        assert store.get(Key("HTTPRoute", "default", "r1")).raw["status"] == {"parents": []}  # type: ignore[union-attr]

        api.remove("HTTPRoute", "default", "r2")
        await wait_for(lambda: same_as_api(api, store))
        assert provider.lists["HTTPRoute"] == 1  # followed by watching alone


async def test_discovery_picks_the_served_version(tmp_path: Path) -> None:
    types = [t for t in default_types() if t.kind not in ("HTTPRoute", "TLSRoute")]
    types.append(
        ResourceType(
            "gateway.networking.k8s.io",
            ("v1beta1",),
            "HTTPRoute",
            "httproutes",
            True,
            True,
            True,
            custom=True,
        )
    )
    api = KubeAPI(types=types, bookmark_interval=0.02)
    await api.start()
    try:
        api.put({**route("old"), "apiVersion": "gateway.networking.k8s.io/v1beta1"})
        async with running(api, tmp_path) as (provider, store):
            assert provider.paths["HTTPRoute"].version == "v1beta1"
            assert "TLSRoute" not in provider.paths  # CRD not installed: not watched
            assert Key("HTTPRoute", "default", "old") in store
            watched = {(r.group, r.resource) for r in api.requests(verb="watch")}
            assert ("gateway.networking.k8s.io", "tlsroutes") not in watched
    finally:
        await api.stop()


async def test_forced_disconnects_resume_without_relisting(api: KubeAPI, tmp_path: Path) -> None:
    async with running(api, tmp_path) as (provider, store):
        for i in range(6):
            await wait_for(lambda: api.watch_count == len(provider.paths))
            api.put(route(f"r{i}"))
            assert api.disconnect_watches() == len(provider.paths)
        api.remove("HTTPRoute", "default", "r0")
        await wait_for(lambda: same_as_api(api, store))
        assert provider.lists["HTTPRoute"] == 1
        assert len(api.requests(verb="watch", resource="httproutes")) > 2  # it did reconnect


async def test_410_gone_relists_and_reconciles(api: KubeAPI, tmp_path: Path) -> None:
    api.put(route("stays"))
    api.put(route("goes"))
    hold = asyncio.Event()

    async def block_watches(req: Request) -> None:
        if req.verb == "watch" and req.resource == "httproutes":
            await hold.wait()

    async with running(api, tmp_path) as (provider, store):
        await wait_for(lambda: api.watch_count >= len(provider.paths))
        api.hooks.append(block_watches)
        api.disconnect_watches()
        await asyncio.sleep(0.05)
        # while the provider cannot watch, more happens than the history keeps
        api.remove("HTTPRoute", "default", "goes")
        for i in range(6):
            api.put(route(f"new{i}"))
        api.put(route("stays", host="z.example.com"))
        hold.set()
        await wait_for(lambda: same_as_api(api, store))
        assert provider.lists["HTTPRoute"] == 2  # listed again after 410
        assert Key("HTTPRoute", "default", "goes") not in store
        stays = store.get(Key("HTTPRoute", "default", "stays"))
        assert stays is not None and stays.model.spec.hostnames == ("z.example.com",)


async def test_errors_are_retried_with_backoff(api: KubeAPI, tmp_path: Path) -> None:
    failures = {"left": 3}

    def flaky(req: Request) -> None:
        if req.verb == "watch" and req.resource == "httproutes" and failures["left"] > 0:
            failures["left"] -= 1
            raise ApiError(500, "InternalError", "etcd is having a bad day")

    api.hooks.append(flaky)
    async with running(api, tmp_path) as (_provider, store):
        api.put(route("later"))
        await wait_for(lambda: Key("HTTPRoute", "default", "later") in store)
        assert failures["left"] == 0
        assert [r.code for r in api.requests(verb="watch", resource="httproutes")][:4] == [
            500,
            500,
            500,
            200,
        ]


async def test_namespace_scope(api: KubeAPI, tmp_path: Path) -> None:
    api.put(gwclass("gc"))
    api.put(route("mine", "a"))
    api.put(route("theirs", "b"))
    async with running(api, tmp_path, namespace="a") as (_provider, store):
        api.put(route("mine2", "a"))
        api.put(route("theirs2", "b"))
        await wait_for(lambda: Key("HTTPRoute", "a", "mine2") in store)
        await asyncio.sleep(0.05)
        assert sorted(k.name for k in store if k.kind == "HTTPRoute") == ["mine", "mine2"]
        assert Key("GatewayClass", "", "gc") in store  # cluster-scoped kinds stay cluster-wide
        scopes = {(r.resource, r.namespace) for r in api.requests() if r.verb in ("list", "watch")}
        assert ("httproutes", "a") in scopes and ("gatewayclasses", "") in scopes
        assert not any(
            ns == "" for res, ns in scopes if res in ("httproutes", "services", "secrets")
        )


async def test_forbidden_kind_is_reported_and_retried(api: KubeAPI, tmp_path: Path) -> None:
    allowed = {"now": False}

    def rbac(req: Request) -> None:
        if (
            req.resource == "gatewayclasses"
            and req.verb in ("list", "watch")
            and not allowed["now"]
        ):
            raise ApiError(403, "Forbidden", "gatewayclasses is forbidden")

    api.hooks.append(rbac)
    api.put(gwclass("gc"))
    errors = ErrorBook()
    async with running(api, tmp_path, errors=errors) as (_provider, store):
        assert any("forbidden" in str(e) for e in errors.all())
        assert Key("GatewayClass", "", "gc") not in store
        allowed["now"] = True
        await wait_for(lambda: Key("GatewayClass", "", "gc") in store)
        assert not errors.all()


async def test_pages_ask_for_the_next_page_before_handing_one_over(
    api: KubeAPI, tmp_path: Path
) -> None:
    """KubeClient.pages: the next page is requested before a page is handed over, so the API
    server prepares it while the caller works on this one."""
    for i in range(5):
        api.put(route(f"r{i}"))
    lists: list[Request] = []
    api.hooks.append(lambda r: lists.append(r) if r.verb == "list" else None)

    def asked(n: int) -> Callable[[], bool]:
        return lambda: len(lists) == n

    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    collection = "/apis/gateway.networking.k8s.io/v1/httproutes"
    try:
        names: list[str] = []
        async with contextlib.aclosing(client.pages(collection, limit=2)) as pages:
            async for page, _ in pages:
                names += [o["metadata"]["name"] for o in page]
                # while this page is held, the next one (if any) reaches the API server
                await wait_for(asked(min((len(names) + 1) // 2 + 1, 3)))
        assert names == [f"r{i}" for i in range(5)] and len(lists) == 3
        # KubeClient.list: the pages joined, as one unpaged list
        assert await client.list(collection, limit=2) == await client.list(collection, limit=0)

        # leaving early closes the request in flight: no error, nothing left running
        lists.clear()
        async with contextlib.aclosing(client.pages(collection, limit=2)) as pages:
            async for page, _ in pages:
                assert [o["metadata"]["name"] for o in page] == ["r0", "r1"]
                break
        assert len(lists) <= 2
    finally:
        await client.close()


async def test_a_list_of_many_pages_reaches_the_store_at_once(api: KubeAPI, tmp_path: Path) -> None:
    """The pages of a list are decoded as they come (the loop runs between them), but the
    store takes the whole list in one step: no translation sees it half applied."""
    for i in range(7):
        api.put(route(f"r{i}"))
    lists: list[Request] = []
    api.hooks.append(lambda r: lists.append(r) if r.verb == "list" else None)
    turns = 0

    async def tick() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    ticker = asyncio.create_task(tick())
    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    store = Store()
    at: list[int] = []
    store.subscribe(lambda change: at.append(turns))
    provider = KubernetesProvider(client, store, list_page=2)
    try:
        await provider.sync()
        routes = [r for r in lists if r.resource == "httproutes"]
        assert len(routes) == 4  # 7 routes, 2 a page
        assert same_as_api(api, store) and len(at) == 7
        assert len(set(at)) == 1  # every object stored in one turn of the loop
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        await client.close()
