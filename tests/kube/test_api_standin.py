"""The API-server stand-in behaves as the API server does where gateweave depends on it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml

from tests.support.kubeapi import KubeAPI

GW = "/apis/gateway.networking.k8s.io/v1"
ROUTES = f"{GW}/namespaces/default/httproutes"


def route(name: str = "r", host: str = "a.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host]},
        "status": {"parents": []},
    }


@pytest.fixture
async def api() -> AsyncIterator[KubeAPI]:
    server = KubeAPI(history=5, bookmark_interval=0.05)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def http(api: KubeAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=api.url, timeout=5, headers={"Authorization": "Bearer standin-token"}
    ) as client:
        yield client


async def test_discovery(api: KubeAPI, http: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=api.url) as anonymous:
        assert (await anonymous.get("/apis")).status_code == 401
    groups = (await http.get("/apis")).json()["groups"]
    gw = next(g for g in groups if g["name"] == "gateway.networking.k8s.io")
    assert {v["version"] for v in gw["versions"]} >= {"v1", "v1beta1"}
    names = {r["name"]: r for r in (await http.get(GW)).json()["resources"]}
    assert names["gateways"]["namespaced"] and not names["gatewayclasses"]["namespaced"]
    assert "httproutes/status" in names and "referencegrants/status" not in names
    core = {r["name"] for r in (await http.get("/api/v1")).json()["resources"]}
    assert {"services", "namespaces", "secrets", "configmaps", "serviceaccounts"} <= core
    assert (await http.get("/apis/coordination.k8s.io/v1")).json()["resources"][0][
        "name"
    ] == "leases"
    assert (await http.get("/apis/nope/v1")).status_code == 404


async def test_create_update_status_and_generation(api: KubeAPI, http: httpx.AsyncClient) -> None:
    created = (await http.post(ROUTES, json=route())).json()
    meta = created["metadata"]
    assert (
        meta["generation"] == 1
        and meta["uid"]
        and meta["creationTimestamp"] == "2026-01-01T00:00:00Z"
    )
    assert "status" not in created  # a create ignores status
    assert (await http.post(ROUTES, json=route())).status_code == 409  # AlreadyExists

    # main-resource update: status ignored, labels do not bump generation, spec does
    body = {
        **created,
        "metadata": {**meta, "labels": {"a": "b"}},
        "status": {"parents": [{"x": 1}]},
    }
    updated = (await http.put(f"{ROUTES}/r", json=body)).json()
    assert updated["metadata"]["generation"] == 1 and "status" not in updated
    assert int(updated["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    stale = await http.put(f"{ROUTES}/r", json=body)  # body still carries the old resourceVersion
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    no_rv = {
        **updated,
        "metadata": {k: v for k, v in updated["metadata"].items() if k != "resourceVersion"},
    }
    assert (
        await http.put(f"{ROUTES}/r", json=no_rv)
    ).status_code == 422  # custom resources need one
    spec_change = {**updated, "spec": {**updated["spec"], "hostnames": ["b.example.com"]}}
    bumped = (await http.put(f"{ROUTES}/r", json=spec_change)).json()
    assert bumped["metadata"]["generation"] == 2

    # status subresource: only status changes, generation does not
    st = {
        **bumped,
        "spec": {"hostnames": ["ignored.example.com"]},
        "status": {"parents": [{"y": 2}]},
    }
    written = (await http.put(f"{ROUTES}/r/status", json=st)).json()
    assert written["status"] == {"parents": [{"y": 2}]}
    assert (
        written["spec"]["hostnames"] == ["b.example.com"] and written["metadata"]["generation"] == 2
    )
    # a no-op write changes nothing, not even the resourceVersion
    again = (await http.put(f"{ROUTES}/r/status", json=written)).json()
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert [(r.verb, r.subresource, r.code) for r in api.requests(resource="httproutes")] == [
        ("create", "", 201),
        ("create", "", 409),
        ("update", "", 200),
        ("update", "", 409),
        ("update", "", 422),
        ("update", "", 200),
        ("update", "status", 200),
        ("update", "status", 200),
    ]


async def test_patches(http: httpx.AsyncClient) -> None:
    await http.post(ROUTES, json=route())
    merge = {"Content-Type": "application/merge-patch+json"}
    out = (
        await http.patch(
            f"{ROUTES}/r",
            json={"spec": {"hostnames": ["m.example.com"]}, "status": {"parents": [{"z": 1}]}},
            headers=merge,
        )
    ).json()
    assert out["spec"]["hostnames"] == ["m.example.com"] and "status" not in out
    assert out["metadata"]["generation"] == 2
    out = (
        await http.patch(
            f"{ROUTES}/r/status", json={"status": {"parents": [{"z": 1}]}}, headers=merge
        )
    ).json()
    assert out["status"] == {"parents": [{"z": 1}]} and out["metadata"]["generation"] == 2
    stale = await http.patch(
        f"{ROUTES}/r", json={"metadata": {"resourceVersion": "1"}}, headers=merge
    )
    assert stale.status_code == 409  # a resourceVersion in a patch is a precondition
    ops = [
        {"op": "test", "path": "/spec/hostnames/0", "value": "m.example.com"},
        {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}},
    ]
    out = (
        await http.patch(
            f"{ROUTES}/r",
            content=json.dumps(ops),
            headers={"Content-Type": "application/json-patch+json"},
        )
    ).json()
    assert out["metadata"]["labels"] == {"k": "v"}
    assert (
        await http.patch(f"{ROUTES}/r", content="{}", headers={"Content-Type": "text/plain"})
    ).status_code == 415


async def test_server_side_apply_ownership(http: httpx.AsyncClient) -> None:
    apply = {"Content-Type": "application/apply-patch+yaml"}
    cfg = route()
    del cfg["status"]
    cfg["metadata"]["labels"] = {"team": "a"}
    r = await http.patch(
        f"{ROUTES}/r?fieldManager=alice", content=yaml.safe_dump(cfg), headers=apply
    )
    assert r.status_code == 200 and r.json()["metadata"]["generation"] == 1
    # bob changing alice's field conflicts unless forced
    bob = {**cfg, "spec": {**cfg["spec"], "hostnames": ["bob.example.com"]}}
    r = await http.patch(f"{ROUTES}/r?fieldManager=bob", content=yaml.safe_dump(bob), headers=apply)
    assert r.status_code == 409 and "spec.hostnames" in r.json()["message"]
    # same values are shared, not conflicting
    r = await http.patch(f"{ROUTES}/r?fieldManager=bob", content=yaml.safe_dump(cfg), headers=apply)
    assert r.status_code == 200
    r = await http.patch(
        f"{ROUTES}/r?fieldManager=bob&force=true", content=yaml.safe_dump(bob), headers=apply
    )
    assert r.status_code == 200 and r.json()["spec"]["hostnames"] == ["bob.example.com"]
    # alice drops the label from her config: still owned by bob, so it stays
    alice = {**cfg, "metadata": {"name": "r", "namespace": "default"}}
    del alice["spec"]["hostnames"]
    r = await http.patch(
        f"{ROUTES}/r?fieldManager=alice", content=yaml.safe_dump(alice), headers=apply
    )
    assert r.json()["metadata"]["labels"] == {"team": "a"}
    # bob drops it too: nobody owns it, it goes
    bob2 = {**bob, "metadata": {"name": "r", "namespace": "default"}}
    r = await http.patch(
        f"{ROUTES}/r?fieldManager=bob", content=yaml.safe_dump(bob2), headers=apply
    )
    assert "labels" not in r.json()["metadata"] and r.json()["spec"]["hostnames"] == [
        "bob.example.com"
    ]
    missing = await http.patch(f"{ROUTES}/r", content=yaml.safe_dump(cfg), headers=apply)
    assert missing.status_code == 422  # fieldManager is required


async def _events(http: httpx.AsyncClient, query: str, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with http.stream("GET", f"{ROUTES}?watch=1&{query}") as resp:
        async for line in resp.aiter_lines():
            if line:
                out.append(json.loads(line))
            if len(out) >= count:
                break
    return out


async def test_list_and_watch(api: KubeAPI, http: httpx.AsyncClient) -> None:
    for i in range(3):
        await http.post(ROUTES, json=route(f"r{i}"))
    page = (await http.get(f"{ROUTES}?limit=2")).json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["r0", "r1"]
    rest = (await http.get(f"{ROUTES}?limit=2&continue={page['metadata']['continue']}")).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["r2"] and "continue" not in rest[
        "metadata"
    ]
    listed_rv = int(page["metadata"]["resourceVersion"])

    # no resourceVersion: synthetic ADDED for what exists
    added = await _events(http, "", 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in added] == [
        ("ADDED", "r0"),
        ("ADDED", "r1"),
        ("ADDED", "r2"),
    ]
    await http.delete(f"{ROUTES}/r0")
    since = await _events(http, f"resourceVersion={listed_rv}", 1)
    assert since[0]["type"] == "DELETED" and since[0]["object"]["metadata"]["name"] == "r0"
    bookmark = await _events(http, f"resourceVersion={api.rv}&allowWatchBookmarks=true", 1)
    assert bookmark[0]["type"] == "BOOKMARK" and bookmark[0]["object"]["metadata"][
        "resourceVersion"
    ] == str(api.rv)

    # history of 5 events: older resourceVersions are gone
    for i in range(6):
        await http.patch(
            f"{ROUTES}/r1",
            json={"metadata": {"labels": {"i": str(i)}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
    gone = await _events(http, f"resourceVersion={listed_rv}", 1)
    assert gone[0]["type"] == "ERROR" and gone[0]["object"]["code"] == 410
    # server-side timeout ends the stream
    async with http.stream(
        "GET", f"{ROUTES}?watch=1&resourceVersion={api.rv}&timeoutSeconds=0.2"
    ) as resp:
        assert [line async for line in resp.aiter_lines() if line] == []
    assert {r.verb for r in api.log} >= {"create", "list", "watch", "delete", "patch"}


class HeldQueue(asyncio.Queue[Any]):
    """A watch's queue whose reads wait while ``open`` is clear: what is queued stays
    unsent, as when the event loop is too busy to send it before the bookmark timer fires.
    ``reads``: the reads begun (each bookmark interval begins one)."""

    def __init__(self, open_: asyncio.Event) -> None:
        super().__init__()
        self.open = open_
        self.reads = 0

    async def get(self) -> Any:
        self.reads += 1
        await self.open.wait()
        return await super().get()


async def test_bookmarks_never_run_ahead_of_queued_events(
    api: KubeAPI, http: httpx.AsyncClient
) -> None:
    """A bookmark's resourceVersion promises every event up to it was sent on the watch: an
    event (or the end of a disconnected watch) still queued when the bookmark timer fires goes
    first. (A bookmark ahead of a queued update let the provider count as caught up before
    seeing it, and resume a disconnected watch past updates it never saw.)"""
    await http.post(ROUTES, json=route())
    query = f"resourceVersion={api.rv}&allowWatchBookmarks=true"
    async with (
        asyncio.timeout(30),  # a ceiling for a hang
        http.stream("GET", f"{ROUTES}?watch=1&{query}") as resp,
    ):
        lines = (json.loads(line) async for line in resp.aiter_lines() if line)
        assert (await anext(lines))["type"] == "BOOKMARK"  # the watch is registered
        (watcher,) = api._watchers
        opened = asyncio.Event()
        held = watcher.queue = HeldQueue(opened)

        async def queued_through_bookmark_intervals() -> None:
            reads = held.reads
            while held.reads < reads + 2:  # a whole bookmark interval with the event queued
                await asyncio.sleep(0.01)
            opened.set()

        # an update queued while the loop is busy: it comes before any bookmark
        api.put(route(host="b.example.com"))
        await queued_through_bookmark_intervals()
        event = await anext(lines)
        assert (event["type"], event["object"]["metadata"]["resourceVersion"]) == (
            "MODIFIED",
            str(api.rv),
        )
        bookmark = await anext(lines)
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["resourceVersion"] == str(api.rv)

        # an update and a disconnect queued while the loop is busy: the update, then the end
        # (no bookmark at the resourceVersion of updates a resumed watch would then miss)
        opened.clear()
        api.put(route(host="c.example.com"))
        api.disconnect_watches()
        await queued_through_bookmark_intervals()
        rest = [e async for e in lines]
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in rest] == [
        ("MODIFIED", str(api.rv))
    ]
