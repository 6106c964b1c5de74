"""Invariant 3, no unnecessary work, with the real translate over a conformance object set,
counted by the runtime's own metrics: a burst costs one translation (two at most), and an
event that changes nothing observable publishes nothing and writes no status."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from gateweave.api.decode import Decoded
from gateweave.api.kinds import Key
from gateweave.providers.file import FileProvider
from gateweave.sinks.statusmerge import Status
from gateweave.store import key_of
from tests.support.conformance_objects import case_set, decoded
from tests.support.runtime import Harness, running

CASE = ("GatewayWithAttachedRoutes.yaml", "HTTPRouteMultipleGateways.yaml")
INFRA = "gateway-conformance-infra"


def objects() -> list[Decoded]:
    return case_set(CASE)


def a_route() -> Decoded:
    return next(d for d in objects() if d.model.kind == "HTTPRoute")


def renamed(dec: Decoded, name: str) -> Decoded:
    """A copy of ``dec`` named ``name`` (built directly: decoding 1,000 copies is slow)."""
    meta = dec.model.metadata
    raw = {**dec.raw, "metadata": {**dec.raw["metadata"], "name": name}}
    model = msgspec.structs.replace(dec.model, metadata=msgspec.structs.replace(meta, name=name))
    return Decoded(raw, model)


def with_labels(dec: Decoded, labels: dict[str, str]) -> Decoded:
    raw = dict(dec.raw)
    raw["metadata"] = {
        **raw["metadata"],
        "labels": {**(raw["metadata"].get("labels") or {}), **labels},
    }
    return decoded(raw)


async def loaded(h: Harness) -> None:
    for dec in objects():
        h.store.apply(dec)
    await h.runtime.wait_settled()


def secret(name: str, value: str) -> Decoded:
    return decoded(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": INFRA},
            "type": "Opaque",
            "data": {"key": value},
        }
    )


class Counts:
    """The runtime's counters (and the sinks' calls) at one moment."""

    def __init__(self, h: Harness) -> None:
        self.translations = h.translations
        self.publishes = h.publishes()
        self.status_writes = h.status_writes
        self.sink_calls = (len(h.xds.calls), len(h.infra.calls))


def assert_nothing_published(h: Harness, before: Counts) -> None:
    assert h.publishes() == before.publishes
    assert h.status_writes == before.status_writes
    assert (len(h.xds.calls), len(h.infra.calls)) == before.sink_calls


async def test_a_burst_of_1000_events_costs_at_most_two_translations() -> None:
    h = Harness(window=0.05, max_delay=0.5)
    route = a_route()
    burst = [renamed(route, f"burst-{i:04d}") for i in range(1000)]
    async with running(h):
        await loaded(h)
        before = Counts(h)
        events = h.count("gateweave_events_total", kind="HTTPRoute")
        for i, dec in enumerate(burst):
            h.store.apply(dec)
            if i % 50 == 0:
                await asyncio.sleep(0)  # the loop runs between events, as with a real provider
        await h.runtime.wait_settled(timeout=30)
        assert h.count("gateweave_events_total", kind="HTTPRoute") - events == 1000
        assert h.translations - before.translations <= 2
        h.assert_published_equals_translate()
        status = h.runtime.status_sink.get(Key("HTTPRoute", INFRA, "burst-0999"))
        assert status is not None and status["parents"], status


async def test_an_httproute_with_no_gateway_publishes_no_xds_nor_infra() -> None:
    h = Harness()
    route = a_route()
    for dec in objects():
        if dec.model.kind not in ("Gateway", "HTTPRoute"):
            h.store.apply(dec)
    async with running(h):
        h.store.apply(route)
        await h.runtime.wait_settled()
        assert h.runtime.status_sink.get(key_of(route)) is not None  # it is reported on
        assert h.publishes()["xds"] == 0 and h.publishes()["infra"] == 0
        assert h.xds.calls == [] and h.infra.calls == [] and h.runtime.published_xds == {}

    # Among Gateways: a route whose parent does not exist changes no Gateway's config.
    h = Harness()
    async with running(h):
        await loaded(h)
        before = Counts(h)
        raw = renamed(route, "orphan").raw
        raw = {**raw, "spec": {**raw["spec"], "parentRefs": [{"name": "no-such-gateway"}]}}
        h.store.apply(decoded(raw))
        await h.runtime.wait_settled()
        assert h.publishes()["xds"] == before.publishes["xds"]
        assert h.publishes()["infra"] == before.publishes["infra"]
        assert (len(h.xds.calls), len(h.infra.calls)) == before.sink_calls
        assert h.status_writes == before.status_writes + 1  # only the orphan's own status
        h.assert_published_equals_translate()


async def test_an_unreferenced_secret_publishes_nothing() -> None:
    h = Harness()
    async with running(h):
        await loaded(h)
        before = Counts(h)
        for step in (
            lambda: h.store.apply(secret("nobody-uses-me", "djE=")),
            lambda: h.store.apply(secret("nobody-uses-me", "djI=")),
            lambda: h.store.delete(Key("Secret", INFRA, "nobody-uses-me")),
        ):
            assert step() is not None
            await h.runtime.wait_settled()
        assert h.translations > before.translations  # the runtime cannot know: it translates
        assert_nothing_published(h, before)
        h.assert_published_equals_translate()


async def test_a_metadata_only_change_publishes_nothing() -> None:
    h = Harness()
    async with running(h):
        await loaded(h)
        before = Counts(h)
        for dec in objects():
            if dec.model.kind == "HTTPRoute":
                change = h.store.apply(
                    with_labels(dec, {"team": "a", "gateweave.test/touched": "yes"})
                )
                assert change is not None and change.model_changed
                stored = h.store.get(key_of(dec))
                assert stored is not None and stored.generation == 1  # metadata: no new generation
        await h.runtime.wait_settled()
        assert h.translations == before.translations + 1
        assert_nothing_published(h, before)
        h.assert_published_equals_translate()


async def test_our_own_status_writes_never_cause_a_translation() -> None:
    """Statuses written back into the store (as the API server would store them) are
    status-only changes: stored, never translated."""
    h = Harness()
    loop = asyncio.get_running_loop()
    fed_back: list[Key] = []

    def store_status(key: Key, status: Status) -> None:
        stored = h.store.get(key)
        if stored is None:
            return
        change = h.store.apply(Decoded({**stored.raw, "status": status}, stored.model))
        assert change is None or not change.model_changed
        fed_back.append(key)

    def on_write(key: Key, status: Status) -> None:
        loop.call_soon(store_status, key, status)  # later, as a watch event would come

    h.status_sink.on_write = on_write
    async with running(h):
        await loaded(h)
        await asyncio.sleep(
            0.2
        )  # let the written statuses come back, and anything they would cause
        await h.runtime.wait_settled()
        assert fed_back and h.status_writes >= len(fed_back)
        translations = h.translations
        assert translations <= 2  # the empty store, then the objects
        version = h.store.resource_version

        # A real change: one more translation, whose status writes come back too.
        another = renamed(a_route(), "another")
        h.store.apply(another)
        await h.runtime.wait_settled()
        await asyncio.sleep(0.2)
        await h.runtime.wait_settled()
        assert h.translations == translations + 1
        assert h.store.resource_version > version + 1  # the route, and statuses stored back
        stored = h.store.get(key_of(another))
        assert stored is not None and stored.raw["status"] == h.runtime.status_sink.get(
            key_of(another)
        )


# ---------------------------------------------------------------- files


@contextlib.asynccontextmanager
async def watched_directory(h: Harness, root: Path) -> AsyncIterator[FileProvider]:
    provider = FileProvider(str(root), h.store, debounce_ms=20)
    task = asyncio.create_task(provider.run())
    try:
        await until(lambda: provider.scans >= 2)
        yield provider
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_rewriting_a_file_with_identical_content_publishes_nothing() -> None:
    with tempfile.TemporaryDirectory(prefix="gateweave-noop-") as tmp:
        root = Path(tmp)
        objs = objects()
        texts = {}
        for i in range(0, len(objs), 10):  # several objects per file
            texts[root / f"part-{i:03d}.yaml"] = yaml.safe_dump_all(
                [d.raw for d in objs[i : i + 10]], sort_keys=False
            )
        for path, text in texts.items():
            path.write_text(text)
        h = Harness()
        async with watched_directory(h, root) as provider, running(h):
            assert len(h.store) == len(objs)
            before = Counts(h)
            assert before.status_writes > 0 and len(h.xds.calls) == 1
            version = h.store.resource_version
            for n, (path, text) in enumerate(texts.items()):
                if n % 2:
                    path.write_text(text)  # in place: a new mtime
                else:
                    tmp_path = root / f".{path.name}.tmp"
                    tmp_path.write_text(text)
                    os.replace(tmp_path, path)  # a new inode
            scans = provider.scans
            await until(lambda: provider.scans > scans)  # the watcher saw the rewrites
            await asyncio.sleep(0.2)  # and anything that follows
            await h.runtime.wait_settled()
            assert h.store.resource_version == version  # not even a store change
            assert h.translations == before.translations
            assert_nothing_published(h, before)


async def test_only_a_deletion_makes_the_status_sink_look_over_every_object() -> None:
    """Forgetting the statuses of objects that no longer exist is a pass over every object: it
    runs after a deletion, not for a change; the deleted route's status is then gone."""
    h = Harness()
    passes: list[int] = []
    retain = h.status_sink.retain

    def counted(keys: Any) -> None:
        passes.append(len(keys))
        retain(keys)

    h.status_sink.retain = counted  # type: ignore[method-assign]
    route = a_route()
    other = renamed(route, "other")
    async with running(h):
        await loaded(h)
        h.store.apply(other)
        await h.runtime.wait_settled()
        assert h.status_sink.get(key_of(other)) is not None
        raw = other.raw
        changed = {**raw, "metadata": {**raw["metadata"], "labels": {"changed": "yes"}}}
        h.store.apply(decoded(changed))
        await h.runtime.wait_settled()
        assert passes == []
        h.store.delete(key_of(other))
        await h.runtime.wait_settled()
        assert passes == [len(h.store)]
        assert h.status_sink.get(key_of(other)) is None
        h.assert_published_equals_translate()
