"""Runtime(gc_freeze=True): once ready, what is alive is frozen for the collector, until run()
ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from tests.support.fake_translate import fake_translate


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
