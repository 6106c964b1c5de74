"""Invariant 2, order independence, with the real translate over conformance object sets.

Whatever the order of creates, updates (spec and metadata-only), deletes and re-creates,
and however the bursts split, once things settle what the runtime published (xDS IR,
infra IR, statuses) equals ``translate(current objects)``; no periodic resync exists to
get there. Exercised (a) through the store directly and (b) through real files in a
directory the file provider watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.api.decode import Decoded
from gateweave.api.kinds import Key
from gateweave.providers.file import FileProvider
from gateweave.sinks.localstatus import LocalStatusSink
from tests.support.conformance_objects import decoded
from tests.support.orders import SLEEPS_MS, Step, assert_store_holds, plans, run_on_store
from tests.support.runtime import OURS, Harness, running, without_times
from tests.support.variants import BASE, CASE_SETS, META, SPEC, Universe, universe


def test_variants_change_what_they_should() -> None:
    for name in CASE_SETS:
        for item in universe(name).items:
            base, spec, meta = (v.raw for v in item.versions)
            assert {k: v for k, v in meta.items() if k != "metadata"} == {
                k: v for k, v in base.items() if k != "metadata"
            }, item.key
            if item.key.kind in ("Gateway", "HTTPRoute", "GatewayClass", "Service"):
                assert {k: v for k, v in spec.items() if k != "metadata"} != {
                    k: v for k, v in base.items() if k != "metadata"
                }, item.key


# ---------------------------------------------------------------- (a) through the store


@pytest.mark.parametrize("name", list(CASE_SETS))
def test_any_interleaving_through_the_store_converges(name: str) -> None:
    u = universe(name)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(steps=plans(u))
    def check(steps: list[Step]) -> None:
        asyncio.run(run_on_store(u, steps))

    check()


# ---------------------------------------------------------------- (b) through watched files

FileStep = tuple[str, int, int, int]  # (op, item, version or target file, write mode)


@st.composite
def file_plans(draw: st.DrawFn, u: Universe) -> tuple[list[int], list[FileStep]]:
    """A layout (the file each object starts in) and steps: apply a version / delete /
    move to another file / rewrite a file unchanged / pause. Each step rewrites the files
    it touches, atomically or in place."""
    n = len(u.items)
    if draw(st.booleans()):
        files = n
        layout = list(range(n))  # one object per file
    else:
        files = draw(st.integers(2, 8))
        layout = draw(st.lists(st.integers(0, files - 1), min_size=n, max_size=n))
    index = (
        st.one_of(st.sampled_from(u.important), st.integers(0, n - 1))
        if u.important
        else st.integers(0, n - 1)
    )
    mode = st.sampled_from((0, 1))  # 0: atomic replace, 1: rewrite in place
    version = st.sampled_from((BASE, BASE, SPEC, META))
    creates: list[FileStep] = [
        ("apply", i, draw(version), draw(mode)) for i in draw(st.permutations(range(n)))
    ]
    extra = draw(
        st.lists(
            st.tuples(
                st.integers(0, n),
                st.one_of(
                    st.tuples(st.just("apply"), index, version, mode),
                    st.tuples(st.just("delete"), index, st.just(0), mode),
                    st.tuples(st.just("move"), index, st.integers(0, files - 1), mode),
                    st.tuples(st.just("touch"), st.integers(0, files - 1), st.just(0), mode),
                    st.tuples(st.just("sleep"), st.sampled_from(SLEEPS_MS), st.just(0), st.just(0)),
                ),
            ),
            max_size=20,
        )
    )
    steps = list(creates)
    for position, step in sorted(extra, key=lambda e: e[0], reverse=True):
        steps.insert(position, step)
    return layout, steps


class Directory:
    """The files being edited: which objects (and versions) each one holds."""

    def __init__(self, root: Path, layout: list[int]) -> None:
        self.root = root
        self.file_of = list(layout)
        self.content: dict[int, dict[int, Decoded]] = {}  # file -> item -> version

    def path(self, f: int) -> Path:
        return self.root / f"f{f:03d}.yaml"

    def write(self, f: int, mode: int) -> None:
        objects = self.content.get(f, {})
        path = self.path(f)
        if not objects:
            if mode == 0:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            else:
                path.write_text("")
            return
        text = yaml.safe_dump_all([objects[i].raw for i in sorted(objects)], sort_keys=False)
        if mode == 0:
            tmp = self.root / f".{path.name}.tmp"  # hidden: the watcher ignores it
            tmp.write_text(text)
            os.replace(tmp, path)
        else:
            path.write_text(text)

    def holding(self, item: int) -> Iterator[int]:
        return (f for f, objs in self.content.items() if item in objs)

    def step(self, u: Universe, step: FileStep) -> None:
        op, i, arg, mode = step
        if op == "apply":
            f = self.file_of[i]
            self.content.setdefault(f, {})[i] = u.items[i].versions[arg]
            self.write(f, mode)
        elif op == "delete":
            for f in list(self.holding(i)):
                del self.content[f][i]
                self.write(f, mode)
        elif op == "move":
            old, new = self.file_of[i], arg
            self.file_of[i] = new
            current = self.content.get(old, {}).get(i)
            if current is None or old == new:
                return
            # Either order: for a moment the object is in both files, or in none.
            if mode == 0:
                self.content.setdefault(new, {})[i] = current
                self.write(new, 0)
                del self.content[old][i]
                self.write(old, 0)
            else:
                del self.content[old][i]
                self.write(old, 0)
                self.content.setdefault(new, {})[i] = current
                self.write(new, 0)
        elif op == "touch":
            self.write(i, mode)

    def final(self, u: Universe) -> dict[Key, Decoded]:
        return {u.items[i].key: dec for objs in self.content.values() for i, dec in objs.items()}


async def _until(predicate: Any, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"not reached in {timeout}s: {what}"
        await asyncio.sleep(0.01)


def _store_holds(h: Harness, want: dict[Key, Decoded]) -> bool:
    try:
        assert_store_holds(h, want)
    except AssertionError:
        return False
    return True


async def _run_on_files(u: Universe, layout: list[int], steps: list[FileStep]) -> None:
    with tempfile.TemporaryDirectory(prefix="gateweave-order-") as tmp:
        directory = Directory(Path(tmp), layout)
        h = Harness(window=0.01, max_delay=0.2)
        provider = FileProvider(tmp, h.store, debounce_ms=10)
        watcher = asyncio.create_task(provider.run())
        try:
            await _until(lambda: provider.scans >= 2, 5, "the provider watching")
            async with running(h):
                for n, step in enumerate(steps):
                    if step[0] == "sleep":
                        await asyncio.sleep(step[1] / 1000)
                    else:
                        directory.step(u, step)
                    if n % 5 == 0:
                        await asyncio.sleep(0)
                want = directory.final(u)
                await _until(
                    lambda: _store_holds(h, want), 10, "the store holding the files' objects"
                )
                await h.runtime.wait_settled(timeout=10)
                assert not provider.errors.all(), provider.errors.all()
                h.assert_published_equals_translate()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


FILE_SETS = ("union", "attached-routes", "backendtls")


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_sequence_of_file_edits_converges(data: st.DataObject) -> None:
    u = universe(data.draw(st.sampled_from(FILE_SETS), label="case set"))
    layout, steps = data.draw(file_plans(u), label="plan")
    asyncio.run(_run_on_files(u, layout, steps))


# ---------------------------------------------------------------- statuses translate stops
# reporting


async def test_objects_translate_stops_reporting_on_keep_no_status_of_ours() -> None:
    """A Gateway whose GatewayClass goes away (or stops being ours) is no longer ours to
    report on: its status of ours is withdrawn, not left behind stale."""
    u = universe("attached-routes")
    h = Harness()
    for item in u.items:
        h.store.apply(item.versions[BASE])
    gc = next(it for it in u.items if it.key.kind == "GatewayClass")
    gateways = [it.key for it in u.items if it.key.kind == "Gateway"]
    async with running(h):
        assert all(h.runtime.status_sink.get(k) is not None for k in gateways)
        h.store.apply(gc.versions[SPEC])  # another controller's class now
        await h.runtime.wait_settled()
        h.assert_published_equals_translate()
        assert all(h.runtime.status_sink.get(k) is None for k in gateways)
        assert h.runtime.status_sink.get(gc.key) is None
        assert h.xds.state == {} and h.infra.state == {}
        routes = [k for k in h.store if k.kind == "HTTPRoute"]
        for k in routes:  # routes are still reported on: no parent entry of ours
            status = h.runtime.status_sink.get(k)
            assert status is not None and status["parents"] == [], (k, status)

        h.store.apply(gc.versions[BASE])
        await h.runtime.wait_settled()
        h.assert_published_equals_translate()
        assert all(h.runtime.status_sink.get(k) is not None for k in gateways)

        h.store.delete(gc.key)
        await h.runtime.wait_settled()
        h.assert_published_equals_translate()
        assert all(h.runtime.status_sink.get(k) is None for k in gateways)


async def test_withdrawn_status_keeps_the_given_one_and_other_controllers_entries() -> None:
    """What an object came with stays: a Gateway's given status comes back when ours is
    withdrawn; on a policy only our ancestor entries go."""
    u = universe("backendtls")
    h = Harness()
    policy = next(it for it in u.items if it.key.kind == "BackendTLSPolicy")
    theirs = {
        "ancestorRef": {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "namespace": "x",
            "name": "y",
        },
        "controllerName": "example.com/other",
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    gateway = next(it for it in u.items if it.key.kind == "Gateway")
    given_gw = {
        "conditions": [
            {
                "type": "Accepted",
                "status": "Unknown",
                "reason": "Pending",
                "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ]
    }
    for item in u.items:
        raw = item.versions[BASE].raw
        if item is policy:
            raw = {**raw, "status": {"ancestors": [theirs]}}
        elif item is gateway:
            raw = {**raw, "status": given_gw}
        h.store.apply(decoded(raw))
    gc = next(it for it in u.items if it.key.kind == "GatewayClass")
    async with running(h):
        status = h.runtime.status_sink.get(policy.key)
        assert status is not None and len(status["ancestors"]) > 1
        assert status["ancestors"][0]["controllerName"] == "example.com/other"
        assert h.runtime.status_sink.get(gateway.key) not in (None, given_gw)
        writes = h.status_writes
        h.store.delete(gc.key)
        await h.runtime.wait_settled()
        h.assert_published_equals_translate()
        assert h.status_writes > writes
        assert h.runtime.status_sink.get(gateway.key) is None  # shown as given again
        stored = h.store.get(policy.key)
        assert stored is not None
        # Still reported on (no ancestor of ours): only the other controller's entry is left.
        assert without_times(h.runtime.status_sink.get(policy.key)) == without_times(
            stored.raw["status"]
        )


def test_the_sink_withdraws_only_its_own_entries_from_unreported_routes() -> None:
    """The sink's side of it, for routes translate stops reporting on altogether."""
    theirs: dict[str, Any] = {
        "parentRef": {"name": "x"},
        "controllerName": "example.com/other",
        "conditions": [],
    }
    ours: dict[str, Any] = {
        "parentRef": {"name": "gw"},
        "controllerName": OURS,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": ""}],
    }
    shared, alone = ("HTTPRoute", "ns", "shared"), ("HTTPRoute", "ns", "alone")
    given = {Key(*shared): {"parents": [theirs]}}
    sink = LocalStatusSink(OURS, clock=lambda: "2024-01-01T00:00:00Z")
    computed = {shared: {"parents": [ours]}, alone: {"parents": [ours]}}
    assert sink.publish(computed, given.get) == [Key(*alone), Key(*shared)]
    stored = sink.get(Key(*shared))
    assert stored is not None
    assert [e["controllerName"] for e in stored["parents"]] == ["example.com/other", OURS]
    writes = sink.writes
    assert sink.publish({}, given.get) == [Key(*alone), Key(*shared)]
    assert sink.writes == writes + 2
    assert sink.get(Key(*alone)) is None  # nothing left: shown as it came (no status)
    assert sink.get(Key(*shared)) is None  # back to exactly what it came with
    assert sink.publish({}, given.get) == []

    given[Key(*shared)] = {"parents": [theirs, ours]}  # it came with a stale entry of ours
    assert sink.publish(computed, given.get) == [Key(*alone), Key(*shared)]
    assert sink.publish({}, given.get) == [Key(*alone), Key(*shared)]
    assert sink.get(Key(*shared)) == {"parents": [theirs]}
