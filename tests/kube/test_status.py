"""Statuses written through the status subresource of the API-server stand-in by
``serve(kube=...)``: only when different, merged with other controllers' entries,
conflicts retried, never twice, and never causing a translation."""

from __future__ import annotations

import asyncio
import copy
import gc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from gateweave.sinks.kubestatus import TokenBucket
from gateweave_bench.kubestatus import NOW, delivered
from tests.support.data import QUICKSTART
from tests.support.kubeapi import KubeAPI, Request, serving, settle, write_kubeconfig

OURS = "gateweave.io/gateway-controller"
THEIRS = "example.com/other-controller"


def their_entry(name: str = "their-gw") -> dict[str, Any]:
    return {
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name},
        "controllerName": THEIRS,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "observedGeneration": 1,
                "lastTransitionTime": "2020-01-01T00:00:00Z",
            }
        ],
    }


@pytest.fixture
async def api() -> AsyncIterator[KubeAPI]:
    server = KubeAPI(history=50, bookmark_interval=0.02)
    await server.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            server.put(doc)
    try:
        yield server
    finally:
        await server.stop()


def status_writes(
    api: KubeAPI, resource: str | None = None, code: int | None = 200
) -> list[Request]:
    return [
        r
        for r in api.requests(subresource="status", resource=resource)
        if r.verb in ("update", "patch") and (code is None or r.code == code)
    ]


def set_status(api: KubeAPI, kind: str, name: str, status: dict[str, Any]) -> None:
    """Another client writes a status (through the subresource, bypassing the log)."""
    obj = api.get(kind, "default", name)
    assert obj is not None
    api._update(api.rtype(kind), "default", name, {**obj, "status": status}, True, "other")


async def test_statuses_written_once_and_own_writes_do_not_translate(
    api: KubeAPI, tmp_path: Path
) -> None:
    async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, source):
        await settle(api, runtime, source)
        assert {r.resource for r in status_writes(api)} == {
            "gatewayclasses",
            "gateways",
            "httproutes",
        }
        assert len(status_writes(api)) == 3
        assert (
            runtime.translations == 1
        )  # the three status writes came back through the watch: no translation
        gw = api.get("Gateway", "default", "quickstart")
        assert gw is not None and gw["status"]["listeners"][0]["attachedRoutes"] == 1

        # a no-op update and a disconnect + resume: nothing to translate, nothing to write
        api.put(api.get("HTTPRoute", "default", "demo") or {})
        api.disconnect_watches()
        await settle(api, runtime, source)
        assert runtime.translations == 1 and len(status_writes(api)) == 3

        # a spec change: one translation, the route's and the Gateway's... only what changed
        route = api.get("HTTPRoute", "default", "demo")
        assert route is not None
        before = copy.deepcopy(route["status"])
        source.status_writer.clock = lambda: "2030-01-01T00:00:00Z"
        api.put({**route, "spec": {**route["spec"], "hostnames": ["other.example.com"]}})
        await settle(api, runtime, source)
        assert runtime.translations == 2
        assert [r.resource for r in status_writes(api)][3:] == [
            "httproutes"
        ]  # observedGeneration moved
        after = api.get("HTTPRoute", "default", "demo")["status"]  # type: ignore[index]
        cond = after["parents"][0]["conditions"][0]
        assert cond["observedGeneration"] == 2
        # unchanged condition status: lastTransitionTime kept
        assert (
            cond["lastTransitionTime"]
            == before["parents"][0]["conditions"][0]["lastTransitionTime"]
        )


async def test_other_controllers_entries_are_kept(api: KubeAPI, tmp_path: Path) -> None:
    set_status(api, "HTTPRoute", "demo", {"parents": [their_entry()]})
    async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, source):
        await settle(api, runtime, source)
        parents = api.get("HTTPRoute", "default", "demo")["status"]["parents"]  # type: ignore[index]
        assert [p["controllerName"] for p in parents] == [THEIRS, OURS]

        # the other controller rewrites its entry (a status-only change): we keep ours, no
        # translation
        translations = runtime.translations
        entry = their_entry()
        entry["conditions"][0]["reason"] = "Pending"
        set_status(api, "HTTPRoute", "demo", {"parents": [entry, parents[1]]})
        await settle(api, runtime, source)
        assert runtime.translations == translations
        # ... and if it drops ours, ours is put back (without a translation)
        set_status(api, "HTTPRoute", "demo", {"parents": [entry]})
        await settle(api, runtime, source)
        parents = api.get("HTTPRoute", "default", "demo")["status"]["parents"]  # type: ignore[index]
        assert [p["controllerName"] for p in parents] == [THEIRS, OURS]
        assert parents[0]["conditions"][0]["reason"] == "Pending"
        assert runtime.translations == translations

        # the route moves to a Gateway that is not ours: our stale entry goes, theirs stays
        route = api.get("HTTPRoute", "default", "demo")
        assert route is not None
        api.put({**route, "spec": {**route["spec"], "parentRefs": [{"name": "their-gw"}]}})
        await settle(api, runtime, source)
        parents = api.get("HTTPRoute", "default", "demo")["status"]["parents"]  # type: ignore[index]
        assert [p["controllerName"] for p in parents] == [THEIRS]


async def test_conflicting_writer_loses_no_update(api: KubeAPI, tmp_path: Path) -> None:
    fired = {"n": 0}

    def other_writer(req: Request) -> None:
        # Between our read (the watch) and our write, another controller writes its status.
        if req.resource == "httproutes" and req.subresource == "status" and fired["n"] == 0:
            fired["n"] += 1
            set_status(api, "HTTPRoute", "demo", {"parents": [their_entry()]})

    api.hooks.append(other_writer)
    async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, source):
        await settle(api, runtime, source)
        assert [r.code for r in status_writes(api, "httproutes", code=None)] == [409, 200]
        assert source.status_writer.conflicts == 1
        parents = api.get("HTTPRoute", "default", "demo")["status"]["parents"]  # type: ignore[index]
        assert [p["controllerName"] for p in parents] == [THEIRS, OURS]
        assert runtime.translations == 1


async def test_410_and_disconnects_write_no_status_twice(tmp_path: Path) -> None:
    api = KubeAPI(history=3, bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            api.put(doc)
    hold = asyncio.Event()
    hold.set()

    async def gate(req: Request) -> None:
        if req.verb == "watch":
            await hold.wait()

    api.hooks.append(gate)
    try:
        async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, source):
            await settle(api, runtime, source)
            assert len(status_writes(api)) == 3
            hold.clear()
            api.disconnect_watches()
            route = api.get("HTTPRoute", "default", "demo")
            assert route is not None
            for host in ("x1.example.com", "x2.example.com", "x3.example.com", "x4.example.com"):
                route = api.put({**route, "spec": {**route["spec"], "hostnames": [host]}})
            hold.set()
            await settle(api, runtime, source)
            assert source.provider.lists["HTTPRoute"] == 2  # the history was exceeded: listed again
            # one more write, for the route whose generation moved; nothing written twice
            assert [r.resource for r in status_writes(api)] == [
                "gateways",
                "gatewayclasses",
                "httproutes",
                "httproutes",
            ]
            status = api.get("HTTPRoute", "default", "demo")["status"]  # type: ignore[index]
            assert status["parents"][0]["conditions"][0]["observedGeneration"] == 5
    finally:
        await api.stop()


async def test_token_bucket() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=2, clock=lambda: now[0])
    await bucket.take()
    await bucket.take()
    waiter = asyncio.create_task(bucket.take())
    await asyncio.sleep(0.02)
    assert not waiter.done()  # no token left and the clock has not moved
    now[0] += 0.1
    await asyncio.wait_for(waiter, 1)


async def test_writes_are_rate_limited(api: KubeAPI, tmp_path: Path) -> None:
    for i in range(6):
        api.put(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": f"r{i}", "namespace": "default"},
                "spec": {"parentRefs": [{"name": "quickstart"}]},
            }
        )
    loop = asyncio.get_running_loop()
    async with serving(
        api, write_kubeconfig(api, str(tmp_path / "kc")), status_rate=20.0, status_burst=1
    ) as (
        runtime,
        source,
    ):
        started = loop.time()
        await settle(api, runtime, source)
        elapsed = loop.time() - started
        assert len(status_writes(api)) == 9
        assert elapsed >= 8 / 20 * 0.9  # 9 writes, 1 at once then 20/s


async def test_first_status_write_goes_before_the_collectors_freeze(
    api: KubeAPI, tmp_path: Path
) -> None:
    """serve freezes the start's objects for the collector (a full collection, most of a
    second at 10,000 routes) only once the status writer made its first write, so that
    write does not wait for it; the freeze still happens."""
    gc.unfreeze()
    frozen_at_writes: list[int] = []
    api.hooks.append(
        lambda r: (
            frozen_at_writes.append(gc.get_freeze_count())
            if r.subresource == "status" and r.verb == "update"
            else None
        )
    )
    async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, source):
        await settle(api, runtime, source)
        assert len(status_writes(api)) == 3 and source.status_writer.started.is_set()
        assert frozen_at_writes[0] == 0
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_an_object_without_status_differs_as_merge_status_says() -> None:
    """The sink decides whether an object that has no status yet (e.g. a route at a cold
    start) needs a write without merging: as merge_status's result compared with no status
    would."""
    from gateweave import DEFAULT_CONTROLLER_NAME
    from gateweave.api.decode import Decoded
    from gateweave.sinks.kubestatus import KubeStatusSink
    from gateweave.sinks.statusmerge import merge_status
    from gateweave.store import Store
    from tests.support.conformance_objects import decoded

    store = Store()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            one = decoded(doc)
            raw = one.raw
            raw.pop("status", None)
            store.apply(Decoded(raw, one.model))
    sink = KubeStatusSink(None, store, lambda _kind: None, DEFAULT_CONTROLLER_NAME)  # type: ignore[arg-type]
    ours = {"controllerName": DEFAULT_CONTROLLER_NAME, "parentRef": {"name": "quickstart"}}
    cases: list[dict[str, Any]] = [{}, {"conditions": []}, {"parents": []}, {"parents": [ours]}]
    kinds = set()
    for key in store:
        assert store.get(key).status is None  # type: ignore[union-attr]
        kinds.add(key.kind)
        for desired in cases:
            merged = merge_status(
                key.kind, None, desired, DEFAULT_CONTROLLER_NAME, "now", namespace=key.namespace
            )
            assert sink._differs(key, desired, "now") == (merged != {}), (key, desired)
    assert {"GatewayClass", "Gateway", "HTTPRoute"} <= kinds


# ---------------------------------------------------------------- work per publication


class _Echo:
    """A store of the quickstart's objects, a Kubernetes status sink on it, and what the API
    server's watch would bring back after each write (the written status, in the store)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from gateweave import DEFAULT_CONTROLLER_NAME
        from gateweave.sinks import kubestatus
        from gateweave.store import Store
        from tests.support.conformance_objects import decoded

        self.store = Store()
        for doc in yaml.safe_load_all(QUICKSTART.read_text()):
            if doc:
                one = decoded(doc)
                raw = one.raw
                raw.pop("status", None)
                self.store.apply(type(one)(raw, one.model))
        self.sink = kubestatus.KubeStatusSink(
            None,  # type: ignore[arg-type]  # (publish reads the store only)
            self.store,
            lambda _kind: None,
            DEFAULT_CONTROLLER_NAME,
            clock=lambda: NOW,
        )
        self.merges = 0
        real = kubestatus.merge_status

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.merges += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(kubestatus, "merge_status", counting)

    def publish(self, computed: dict[tuple[str, str, str], Any]) -> list[Any]:
        self.merges = 0
        return self.sink.publish(computed)

    def written(self, keys: list[Any]) -> None:
        """The API server took these writes and its watch delivered them."""
        for change in delivered(self.store, self.sink, keys):
            assert change is not None and not change.model_changed


def _statuses(store: Any) -> dict[tuple[str, str, str], Any]:
    from gateweave.translate import TranslateOptions, translate

    result = translate(store.snapshot(), TranslateOptions())
    assert result.statuses
    return dict(result.statuses)


def test_statuses_that_did_not_change_are_not_merged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A publication whose computed statuses are the same objects as the last one's, for
    objects the store has not changed since, merges nothing: a change's work follows the
    statuses it changed, not the number of objects (10,005 merges per change at 10,000
    routes before)."""
    echo = _Echo(monkeypatch)
    computed = _statuses(echo.store)
    queued = echo.publish(computed)
    assert sorted(queued) == sorted(computed)  # none has a status yet
    echo.written(queued)
    # The watch brought each written status back: each object is looked at once more, and
    # found as desired.
    assert echo.publish(computed) == [] and echo.merges == len(computed)
    assert echo.publish(computed) == [] and echo.merges == 0
    # One status changes (a new object, as translate makes one): that one alone is merged.
    route = next(k for k in computed if k[0] == "HTTPRoute")
    changed = dict(computed)
    changed[route] = msgspec_copy(computed[route], "Changed")
    assert echo.publish(changed) == [route] and echo.merges == 1
    echo.written([route])
    assert echo.publish(changed) == [] and echo.merges == 1
    assert echo.publish(changed) == [] and echo.merges == 0


def msgspec_copy(status: Any, message: str) -> dict[str, Any]:
    """``status`` as plain data, every condition's message replaced."""
    plain = msgspec.to_builtins(status)
    for parent in plain.get("parents") or []:
        for cond in parent.get("conditions") or []:
            cond["message"] = message
    return dict(plain)


@pytest.mark.parametrize("how", ["recreated", "spec-updated", "status-cleared"])
def test_an_object_changed_in_the_store_is_looked_at_again(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The skip holds only while the stored object is unchanged: an object deleted and
    created again (without a status), or updated with its status cleared by someone else,
    gets its status written again though translate hands out the same status object."""
    from gateweave.api.decode import Decoded

    echo = _Echo(monkeypatch)
    computed = _statuses(echo.store)
    echo.written(echo.publish(computed))
    echo.publish(computed)
    assert echo.publish(computed) == []
    route = next(k for k in computed if k[0] == "HTTPRoute")
    key = next(k for k in echo.store if tuple(k) == route)
    stored = echo.store.get(key)
    assert stored is not None and stored.status
    raw, model = stored.raw, stored.model
    raw.pop("status")
    if how == "recreated":
        echo.store.delete(key)
        echo.store.apply(Decoded(raw, model))
    elif how == "spec-updated":
        raw["metadata"] = {**raw["metadata"], "labels": {"touched": "yes"}}
        echo.store.apply(Decoded(raw, model))
    else:
        change = echo.store.apply(Decoded(raw, model))
        assert change is not None and not change.model_changed
    queued = echo.publish(computed)
    assert queued == [key] and echo.merges <= 1


def test_a_withdrawn_status_reported_again_is_written_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A route no longer reported on has our entries withdrawn; reported again with the very
    status object it had before, it gets them back."""
    echo = _Echo(monkeypatch)
    computed = _statuses(echo.store)
    echo.written(echo.publish(computed))
    echo.publish(computed)
    route = next(k for k in computed if k[0] == "HTTPRoute")
    without = {k: v for k, v in computed.items() if k != route}
    queued = echo.publish(without)
    assert [tuple(k) for k in queued] == [route]
    key = queued[0]
    assert echo.sink._desired[key] == {"parents": []}
    echo.written(queued)
    assert echo.store.get(key).status == {"parents": []}  # type: ignore[union-attr]
    echo.publish(without)
    queued = echo.publish(computed)
    assert [tuple(k) for k in queued] == [route]
    echo.written(queued)
    assert echo.store.get(key).status["parents"]  # type: ignore[union-attr]


def test_a_status_withdrawn_before_its_first_write_is_desired_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reported, withdrawn before any write was made (nothing to withdraw: no store change),
    then reported again with the same status object: the write queued is the status, not the
    withdrawal."""
    echo = _Echo(monkeypatch)
    computed = _statuses(echo.store)
    route = next(k for k in computed if k[0] == "HTTPRoute")
    assert route in echo.publish(computed)
    echo.publish({k: v for k, v in computed.items() if k != route})
    echo.publish(computed)
    key = next(k for k in echo.sink._desired if tuple(k) == route)
    assert echo.sink._desired[key] == msgspec.to_builtins(computed[route])
    echo.written([key])
    assert echo.store.get(key).status["parents"]  # type: ignore[union-attr]
