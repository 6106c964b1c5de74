"""Runtime(gc_freeze=True): once ready, what is alive is frozen for the collector, until run()
ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from typing import Any

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.ir import Result
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from tests.support.fake_translate import fake_translate


def _runtime(translate_fn: TranslateFn = fake_translate, **options: Any) -> Runtime:
    return Runtime(
        Store(),
        translate_fn=translate_fn,
        status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME),
        **options,
    )


async def _run_until_ready(runtime: Runtime) -> asyncio.Task[None]:
    task = asyncio.create_task(runtime.run())
    await runtime.wait_settled()
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_frozen_once_ready_and_unfrozen_when_run_ends() -> None:
    gc.unfreeze()
    runtime = Runtime(
        Store(),
        translate_fn=fake_translate,
        status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME),
        gc_freeze=True,
    )
    task = await _run_until_ready(runtime)
    try:
        assert runtime.ready
        assert gc.get_freeze_count() > 0  # the objects alive once ready (this test's too)
    finally:
        await _stop(task)
        runtime.close()
    assert gc.get_freeze_count() == 0


async def test_not_frozen_by_default() -> None:
    gc.unfreeze()
    runtime = Runtime(
        Store(), translate_fn=fake_translate, status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME)
    )
    task = await _run_until_ready(runtime)
    try:
        assert gc.get_freeze_count() == 0
    finally:
        await _stop(task)
        runtime.close()


async def test_freeze_waits_for_freeze_after_with_the_collector_paused() -> None:
    """With ``freeze_after`` (the Kubernetes status writer's first write), the freeze waits for
    it; the collector stays paused from the runtime's construction until the freeze, then is
    back on."""
    gc.unfreeze()
    assert gc.isenabled()
    after = asyncio.Event()
    runtime = _runtime(gc_freeze=True, freeze_after=after)
    assert not gc.isenabled()
    task = await _run_until_ready(runtime)
    try:
        assert runtime.ready and gc.get_freeze_count() == 0 and not gc.isenabled()
        after.set()
        for _ in range(100):
            if gc.get_freeze_count() > 0:
                break
            await asyncio.sleep(0.01)
        assert gc.get_freeze_count() > 0 and gc.isenabled()
    finally:
        await _stop(task)
        runtime.close()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


async def test_a_runtime_closed_unrun_gives_the_collector_back() -> None:
    runtime = _runtime(gc_freeze=True)
    assert not gc.isenabled()
    runtime.close()
    assert gc.isenabled()


async def test_a_failing_first_translation_gives_the_collector_back() -> None:
    """The collector is held only until the freeze: a translation that raises (a bug) before
    any succeeded leaves it on, not paused for as long as translations keep failing."""

    def raising(_snapshot: object, _options: object) -> Result:
        raise RuntimeError("a bug")

    runtime = _runtime(raising, gc_freeze=True)
    assert not gc.isenabled()
    task = asyncio.create_task(runtime.run())
    try:
        await runtime.wait_settled()
        assert runtime.failed_translations == 1 and not runtime.ready
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        await _stop(task)
        runtime.close()
