"""The processor: the one loop that turns store changes into published results.

It waits for a change, lets a burst settle (``window`` of quiet, at most ``max_delay``
after the first event), takes one snapshot of the whole store, translates it, and
publishes only what changed: statuses to the status sink, each Gateway's xDS IR to the
xDS sink, each Gateway's infra IR to the infra sink. There is exactly one of it, it
never resyncs periodically, and a change that alters nothing observable publishes
nothing, so what is published is always ``translate(current objects)``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import msgspec
import structlog

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.ir import InfraGateway, Result, XdsGateway
from gateweave.metrics import Metrics
from gateweave.snapshot import Snapshot
from gateweave.status import StatusSink
from gateweave.store import Change, Store
from gateweave.translate import translate
from gateweave.translate.options import DataplaneState, TranslateOptions

log = structlog.get_logger("gateweave.runtime")

TranslateFn = Callable[[Snapshot, TranslateOptions], Result]
T = TypeVar("T")


def _translate_gc_paused(fn: TranslateFn, snapshot: Snapshot, options: TranslateOptions) -> Result:
    """One translation with the cyclic garbage collector paused (see gateweave.gcpause)."""
    with gc_paused():
        return fn(snapshot, options)


class XdsSink(Protocol):
    """Takes each Gateway's xDS IR: ``changed`` (new or different) and ``removed`` names."""

    def update(self, changed: Mapping[str, XdsGateway], removed: Sequence[str]) -> Awaitable[None] | None: ...


class InfraSink(Protocol):
    """Takes each Gateway's infrastructure IR: ``changed`` and ``removed`` names."""

    def update(self, changed: Mapping[str, InfraGateway], removed: Sequence[str]) -> Awaitable[None] | None: ...


def _diff(published: Mapping[str, T], current: Mapping[str, T]) -> tuple[dict[str, T], list[str]]:
    changed = {name: ir for name, ir in sorted(current.items()) if published.get(name) != ir}
    removed = sorted(published.keys() - current.keys())
    return changed, removed


class Runtime:
    def __init__(
        self,
        store: Store,
        *,
        translate_fn: TranslateFn = translate,
        options: TranslateOptions | None = None,
        status_sink: StatusSink | None = None,
        xds_sink: XdsSink | None = None,
        infra_sink: InfraSink | None = None,
        dataplane: bool = True,
        window: float = 0.05,
        max_delay: float = 0.5,
        metrics: Metrics | None = None,
        offload: bool = True,
    ) -> None:
        self.store = store
        self.translate_fn = translate_fn
        self.options = options or TranslateOptions()
        self.metrics = metrics or Metrics()
        self.status_sink = status_sink or StatusSink(
            self.options.controller_name or DEFAULT_CONTROLLER_NAME, metrics=self.metrics
        )
        if self.status_sink.metrics is None:
            self.status_sink.metrics = self.metrics
        self.xds_sink = xds_sink
        self.infra_sink = infra_sink
        self.dataplane = dataplane
        self.window = window
        self.max_delay = max_delay
        self.offload = offload  # translate in a worker thread, keeping the loop responsive

        self.last_result: Result | None = None
        # What each sink has taken (stays empty while no sink is attached).
        self.published_xds: dict[str, XdsGateway] = {}
        self.published_infra: dict[str, InfraGateway] = {}
        self.translations = 0
        self._dataplane_states: dict[str, DataplaneState] = {}
        self._wake = asyncio.Event()
        self._wake.set()  # the first translation runs even on an empty store
        self._settled = asyncio.Event()
        self._ready = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._unsubscribe = store.subscribe(self._on_change)

    # ------------------------------------------------------------ state

    @property
    def ready(self) -> bool:
        """True once the first translation has been published."""
        return self._ready

    @property
    def dataplane_states(self) -> Mapping[str, DataplaneState]:
        return dict(self._dataplane_states)

    def close(self) -> None:
        self._unsubscribe()

    def attach(self, *, xds_sink: XdsSink | None = None, infra_sink: InfraSink | None = None) -> None:
        """Plug in data-plane sinks (at any time): each new sink is sent everything on
        the next translation, which this schedules."""
        if xds_sink is not None:
            self.xds_sink = xds_sink
            self.published_xds = {}
        if infra_sink is not None:
            self.infra_sink = infra_sink
            self.published_infra = {}
        self._kick()

    # ------------------------------------------------------------ inputs

    def _on_change(self, change: Change) -> None:
        self.metrics.events.labels(kind=change.key.kind).inc()
        if change.model_changed:
            self._kick()

    def _kick(self) -> None:
        self._settled.clear()
        self._wake.set()

    def set_dataplane_state(self, gateway: str, state: DataplaneState | None) -> None:
        """The data plane's report for one Gateway ("ns/name"); None forgets it.
        Schedules a translation only when the report changed. Thread-safe."""
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.set_dataplane_state, gateway, state)
            return
        if self._dataplane_states.get(gateway) == state:
            return
        if state is None:
            del self._dataplane_states[gateway]
        else:
            self._dataplane_states[gateway] = state
        if self.dataplane:
            self._kick()

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Process changes until cancelled."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._settled.clear()
        while True:
            await self._wake.wait()
            await self._coalesce()
            self._wake.clear()
            self.store.changed.clear()
            await self._translate_and_publish()
            if not self._wake.is_set():
                self._settled.set()

    async def _coalesce(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_delay
        while True:
            self._wake.clear()
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=min(self.window, left))
            except TimeoutError:
                return

    def translation_options(self) -> TranslateOptions:
        return msgspec.structs.replace(
            self.options, dataplane=dict(self._dataplane_states) if self.dataplane else None
        )

    async def _translate_and_publish(self) -> None:
        snapshot = self.store.snapshot()
        options = self.translation_options()
        self.translations += 1
        self.metrics.translations.inc()
        started = time.perf_counter()
        try:
            if self.offload:
                result = await asyncio.to_thread(_translate_gc_paused, self.translate_fn, snapshot, options)
            else:
                result = _translate_gc_paused(self.translate_fn, snapshot, options)
        except Exception:
            # translate is total; if it raises anyway, keep what is published.
            self.metrics.translation_failures.inc()
            log.exception("translation failed; keeping the last published result")
            return
        finally:
            self.metrics.translation_seconds.observe(time.perf_counter() - started)
        self.last_result = result
        await self._publish(result)
        if not self._ready:
            self._ready = True
            self.metrics.ready.set(1)
            log.info("first translation published", objects=len(self.store))

    async def _publish(self, result: Result) -> None:
        self.status_sink.retain(set(self.store.keys()))
        written = self.status_sink.publish(result.statuses, self._stored_status)
        if written:
            self.metrics.publishes.labels(sink="status").inc()
            log.debug("statuses written", count=len(written))
        xds_changed, xds_removed = _diff(self.published_xds, result.xds)
        if (xds_changed or xds_removed) and await self._send("xds", self.xds_sink, xds_changed, xds_removed):
            self.published_xds = dict(result.xds)
        infra_changed, infra_removed = _diff(self.published_infra, result.infra)
        if (infra_changed or infra_removed) and await self._send(
            "infra", self.infra_sink, infra_changed, infra_removed
        ):
            self.published_infra = dict(result.infra)

    async def _send(self, name: str, sink: Any, changed: Mapping[str, Any], removed: Sequence[str]) -> bool:
        """Hand a change to a sink; True when it took it (``published_*`` then follows)."""
        if sink is None:
            return False
        try:
            outcome = sink.update(changed, removed)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("sink failed", sink=name)
            return False
        self.metrics.publishes.labels(sink=name).inc()
        log.debug("published", sink=name, changed=sorted(changed), removed=list(removed))
        return True

    def _stored_status(self, key: Key) -> Mapping[str, Any] | None:
        stored = self.store.get(key)
        status = stored.raw.get("status") if stored is not None else None
        return status if isinstance(status, dict) else None

    # ------------------------------------------------------------ tests and tooling

    async def wait_settled(self, timeout: float = 5.0) -> None:
        """Wait until no change is pending and the last translation is published."""
        await asyncio.wait_for(self._settled.wait(), timeout)
