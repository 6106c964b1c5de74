"""The processor translates on the leading edge: an event that finds it idle is translated
at once; events that arrive while it is busy are coalesced into the next translation."""

from __future__ import annotations

import asyncio
import threading
import time

from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate.options import TranslateOptions
from tests.support.fake_translate import fake_translate
from tests.support.runtime import Clock, Harness, route, running


async def _until(predicate: object, timeout: float) -> float:
    """Seconds until ``predicate()`` holds (bounded)."""
    started = time.perf_counter()
    while not predicate():  # type: ignore[operator]
        if time.perf_counter() - started > timeout:
            raise TimeoutError
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


async def test_an_event_on_an_idle_processor_is_translated_at_once() -> None:
    h = Harness(
        fake_translate, clock=Clock(), window=0.5, max_delay=2.0
    )  # the quiet window alone would wait 0.5 s
    async with running(h):
        for i in range(3):
            before = h.translations
            h.store.apply(route(f"r{i}"))
            took = await _until(lambda b=before: h.translations > b, timeout=2.0)
            assert took < 0.25, took
            await h.runtime.wait_settled()
            h.assert_converged()


async def test_events_during_a_translation_make_one_more_translation() -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow(snapshot: Snapshot, options: TranslateOptions) -> Result:
        if ("default", "first") in snapshot.http_routes and not release.is_set():
            entered.set()
            release.wait(5.0)
        return fake_translate(snapshot, options)

    h = Harness(slow, clock=Clock(), window=0.02, max_delay=1.0)
    async with running(h):
        before = h.translations
        h.store.apply(route("first"))
        await _until(entered.is_set, timeout=2.0)  # translating "first" (in a worker thread)
        for i in range(20):
            h.store.apply(route(f"later-{i}"))
            await asyncio.sleep(0.001)
        release.set()
        await h.runtime.wait_settled()
        assert h.translations - before == 2  # "first" at once, the 20 others together
        h.assert_converged()


async def test_a_busy_burst_is_translated_within_max_delay_of_its_first_event() -> None:
    h = Harness(fake_translate, clock=Clock(), window=0.05, max_delay=0.2)
    async with running(h):
        h.store.apply(route("a"))  # idle: translated at once, then the processor is idle again
        await h.runtime.wait_settled()
        before = h.translations
        started = time.perf_counter()
        first_seen: float | None = None
        for i in range(60):  # events every 10 ms for 0.6 s: never 50 ms of quiet
            h.store.apply(route(f"s{i}"))
            if first_seen is None and h.translations - before >= 2:
                first_seen = time.perf_counter() - started
            await asyncio.sleep(0.01)
        # the first is translated at once; the next ones no later than max_delay after them
        assert first_seen is not None and first_seen < 0.2 + 0.15, first_seen
        await h.runtime.wait_settled()
        h.assert_converged()
