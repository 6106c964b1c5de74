"""Runtime(gc_freeze=True): once ready, what is alive is frozen for the collector, until run()
ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from typing import Any

import pytest

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave import runtime as runtime_module
from gateweave.api.decode import decode
from gateweave.api.load import load_text
from gateweave.ir import Result
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.options import DataplaneState
from tests.support.fake_translate import SEED, fake_translate
from tests.support.runtime import RecordingSink


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


def _with_a_dataplane() -> Runtime:
    """A freezing runtime with a data plane and an xDS sink, its store holding one Gateway of
    ours ("default/gw"), whose Envoy has not answered yet."""
    runtime = _runtime(gc_freeze=True, dataplane=True, xds_sink=RecordingSink())
    for kind in ("GatewayClass", "Gateway"):
        (item,) = load_text(SEED[kind], "seed.yaml").objects
        decoded, errors = decode(item.raw)
        assert decoded is not None, errors
        runtime.store.apply(decoded)
    return runtime


async def _frozen_soon() -> bool:
    for _ in range(100):
        if gc.get_freeze_count() > 0:
            return True
        await asyncio.sleep(0.01)
    return False


async def test_with_a_dataplane_the_freeze_waits_for_every_envoys_answer() -> None:
    """The freeze's collection blocks the loop that serves the Envoys' xDS streams: with a
    data plane, it waits until each Gateway published to it has its Envoy's answer."""
    gc.unfreeze()
    runtime = _with_a_dataplane()
    task = await _run_until_ready(runtime)
    try:
        assert list(runtime.published_xds) == ["default/gw"]
        await asyncio.sleep(0.1)
        assert gc.get_freeze_count() == 0 and not gc.isenabled()
        runtime.set_dataplane_state("default/gw", DataplaneState(acked=True))
        assert await _frozen_soon() and gc.isenabled()
    finally:
        await _stop(task)
        runtime.close()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


async def test_an_envoy_that_cannot_run_answers_too() -> None:
    gc.unfreeze()
    runtime = _with_a_dataplane()
    task = await _run_until_ready(runtime)
    try:
        await asyncio.sleep(0.05)
        assert gc.get_freeze_count() == 0
        runtime.set_dataplane_state("default/gw", DataplaneState(error="envoy exited (1)"))
        assert await _frozen_soon()
    finally:
        await _stop(task)
        runtime.close()


async def test_the_wait_for_the_dataplane_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Envoy that never answers (a pod not scheduled) holds the freeze only so long."""
    monkeypatch.setattr(runtime_module, "FREEZE_DATAPLANE_WAIT", 0.2)
    gc.unfreeze()
    runtime = _with_a_dataplane()
    task = await _run_until_ready(runtime)
    try:
        assert gc.get_freeze_count() == 0
        assert await _frozen_soon()
        assert runtime.dataplane_states == {}
    finally:
        await _stop(task)
        runtime.close()
