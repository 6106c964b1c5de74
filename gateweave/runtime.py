"""The processor: the one loop that turns store changes into published results.

It waits for a change and translates on the leading edge: an event that finds the
processor idle is translated at once (after ``lead``, a few milliseconds that let the
objects of one edit arrive together). Events that arrive while a translation (or its
publication) runs are coalesced into the next one, which waits for the burst to settle
(``window`` of quiet, at most ``max_delay`` after the first of them). Each translation
takes one snapshot of the whole store, translates it, and publishes only what changed:
each Gateway's xDS IR to the xDS sink (first: that is what a change waits for), statuses
to the status sink, each Gateway's infra IR to the infra sink. There is exactly one of
it, it never resyncs periodically, and a change that alters nothing observable publishes
nothing, so what is published is always ``translate(current objects)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import structlog

from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.ir import InfraGateway, Result, XdsGateway
from gateweave.metrics import Metrics
from gateweave.providers import ConfigError, ErrorBook
from gateweave.sinks import InfraSink, StatusSink, XdsSink
from gateweave.snapshot import Snapshot
from gateweave.store import Change, Store
from gateweave.translate.options import DataplaneState, TranslateOptions

log = structlog.get_logger("gateweave.runtime")

TranslateFn = Callable[[Snapshot, TranslateOptions], Result]
T = TypeVar("T")


def _translate_gc_paused(fn: TranslateFn, snapshot: Snapshot, options: TranslateOptions) -> Result:
    """One translation with the cyclic garbage collector paused (see gateweave.gcpause)."""
    with gc_paused():
        return fn(snapshot, options)


QUARANTINE_MESSAGE_CAP = (
    1024  # characters of Envoy's message a quarantined object's condition carries
)


@dataclass(frozen=True)
class Quarantined:
    """A route object the data plane found Envoy rejects: left out of the translation while
    its generation stays ``generation`` (editing the object releases it)."""

    generation: int
    gateway: str  # whose Envoy rejected it ("ns/name")
    message: str  # Envoy's message


def _diff(published: Mapping[str, T], current: Mapping[str, T]) -> tuple[dict[str, T], list[str]]:
    changed = {name: ir for name, ir in sorted(current.items()) if published.get(name) != ir}
    removed = sorted(published.keys() - current.keys())
    return changed, removed


class Runtime:
    def __init__(
        self,
        store: Store,
        *,
        translate_fn: TranslateFn,
        options: TranslateOptions | None = None,
        status_sink: StatusSink,
        xds_sink: XdsSink | None = None,
        infra_sink: InfraSink | None = None,
        dataplane: bool = True,
        window: float = 0.05,
        max_delay: float = 0.5,
        lead: float = 0.002,
        metrics: Metrics | None = None,
        offload: bool = True,
        gc_freeze: bool = False,
        freeze_after: asyncio.Event | None = None,
        errors: ErrorBook | None = None,
    ) -> None:
        self.store = store
        # The translator it is given: gateweave serve's is the incremental one (gateweave.app),
        # a full translation's result for the work of what changed.
        self.translate_fn = translate_fn
        self.options = options or TranslateOptions()
        self.metrics = metrics or Metrics()
        self.status_sink = status_sink
        self.xds_sink = xds_sink
        self.infra_sink = infra_sink
        self.dataplane = dataplane
        self.errors = errors  # quarantined objects are listed there too (scope "dataplane")
        self.window = window  # quiet time that ends a burst arriving while busy
        self.max_delay = max_delay  # bound from the first pending event to its translation
        self.lead = lead  # delay before translating an event that found the processor idle
        self.offload = offload  # translate in a worker thread, keeping the loop responsive
        # Once the first translation is published, move every object alive then (modules,
        # the loaded store) out of the collector's reach (gc.freeze) until run() ends: a
        # full collection then scans only what was allocated since, instead of pausing
        # the process for tens of milliseconds in the middle of a change. Process-wide:
        # for the one runtime of a server process, not for tests running many.
        # ``freeze_after``: the freeze (its full collection, most of a second at 10,000
        # routes) also waits for this event, e.g. the Kubernetes status writer's first write,
        # so that a start's first status write does not wait for it.
        # Until then the collector stays paused (from this constructor on: a server builds
        # its runtime right after loading every object), so that the objects of the start
        # are walked once, by the freeze's collection, instead of by the collections their
        # allocation would trigger on the way.
        self.gc_freeze = gc_freeze
        self.freeze_after = freeze_after
        self._freeze_due = False  # ready, and freeze_after set: freeze when not translating
        self._froze_gc = False
        self._freeze_waiter: asyncio.Task[None] | None = None
        self._gc_hold = contextlib.ExitStack()
        if gc_freeze:
            self._gc_hold.enter_context(gc_paused())

        self.last_result: Result | None = None
        # What each sink has taken (stays empty while no sink is attached).
        self.published_xds: dict[str, XdsGateway] = {}
        self.published_infra: dict[str, InfraGateway] = {}
        self.translations = 0
        self.failed_translations = 0  # translations that raised (a bug); the last one's traceback:
        self.last_translation_error = ""
        self._dataplane_states: dict[str, DataplaneState] = {}
        self._quarantine: dict[Key, Quarantined] = {}
        # An object was deleted since the last snapshot: the status sink then forgets what it
        # holds for objects that no longer exist (only a deletion makes one).
        self._deleted = False
        self._wake = asyncio.Event()
        self._wake.set()  # the first translation runs even on an empty store
        self._pending_since: float | None = time.monotonic()  # the first event not yet taken
        self._busy = True  # translating or publishing (events then wait for a quiet window)
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
        self._gc_hold.close()

    def attach(
        self, *, xds_sink: XdsSink | None = None, infra_sink: InfraSink | None = None
    ) -> None:
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
        if change.op == "deleted":
            self._deleted = True
        if change.model_changed:
            self._kick()

    def _kick(self) -> None:
        if self._pending_since is None:
            self._pending_since = time.monotonic()
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

    def quarantine(self, gateway: str, rejected: XdsGateway, culprits: Mapping[Key, str]) -> None:
        """The data plane found that ``gateway``'s Envoy rejects ``rejected`` because of these
        route objects (with Envoy's message): translate leaves each out, with a condition, until
        the object changes. Ignored unless ``rejected`` is what is published for ``gateway``."""
        if self.published_xds.get(gateway) is not rejected:
            log.info("stale quarantine report ignored", gateway=gateway)
            return
        for key, message in culprits.items():
            stored = self.store.get(key)
            if stored is None:
                continue
            cut = (
                message
                if len(message) <= QUARANTINE_MESSAGE_CAP
                else message[:QUARANTINE_MESSAGE_CAP] + " ..."
            )
            self._quarantine[key] = Quarantined(stored.generation, gateway, cut)
            log.warning(
                "quarantined",
                object=str(key),
                generation=stored.generation,
                gateway=gateway,
                envoy=cut,
            )
        self._quarantine_changed()
        self._kick()

    def _release_quarantine(self) -> None:
        """Forget quarantined objects that changed (or are gone): they are tried again."""
        released = []
        for key, q in self._quarantine.items():
            stored = self.store.get(key)
            if stored is None or stored.generation != q.generation:
                released.append(key)
        for key in released:
            del self._quarantine[key]
            log.info("released from quarantine (changed)", object=str(key))
        if released:
            self._quarantine_changed()

    def _quarantine_changed(self) -> None:
        self.metrics.quarantined.set(len(self._quarantine))
        if self.errors is not None:
            self.errors.set(
                "dataplane",
                [
                    ConfigError(
                        source=f"Envoy of Gateway {q.gateway}",
                        message=f"rejected by Envoy, left out until it changes: {q.message}",
                        kind=key.kind,
                        namespace=key.namespace,
                        name=key.name,
                    )
                    for key, q in sorted(self._quarantine.items())
                ],
            )

    def set_local_addresses(self, addresses: Iterable[str]) -> None:
        """This host's interface addresses (a translation input, see TranslateOptions);
        schedules a translation when the set changed. Call it on the runtime's loop."""
        value = tuple(sorted(set(addresses)))
        if value != self.options.local_addresses:
            self.options = msgspec.structs.replace(self.options, local_addresses=value)
            self._kick()

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Process changes until cancelled."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._settled.clear()
        if self._pending_since is not None:
            self._pending_since = time.monotonic()  # the first translation: bounded from now
        try:
            while True:
                if not self._wake.is_set():
                    self._busy = False
                await self._wake.wait()
                if self._busy:
                    await self._coalesce()  # a burst that arrived while busy: let it settle
                else:
                    await self._lead()  # the processor was idle: translate (almost) at once
                self._busy = True
                self._wake.clear()
                self._pending_since = None
                self.store.changed.clear()
                await self._translate_and_publish()
                if self.gc_freeze and self._ready and not self._froze_gc:
                    if self.freeze_after is None or self._freeze_due:
                        self._freeze_gc()
                    elif self._freeze_waiter is None:
                        self._freeze_waiter = asyncio.create_task(self._freeze_later())
                if not self._wake.is_set():
                    self._settled.set()
        finally:
            if self._freeze_waiter is not None:
                self._freeze_waiter.cancel()
            self._gc_hold.close()
            if self._froze_gc:
                gc.unfreeze()
                self._froze_gc = False

    async def _freeze_later(self) -> None:
        """Freeze once :attr:`freeze_after` is set: at once if the processor is idle, else
        after its current translation (never while a translation runs in its thread)."""
        assert self.freeze_after is not None
        await self.freeze_after.wait()
        self._freeze_due = True
        if not self._busy and not self._froze_gc:
            self._freeze_gc()

    def _freeze_gc(self) -> None:
        gc.collect()
        gc.freeze()
        self._froze_gc = True
        self._gc_hold.close()
        log.info(
            "objects of the initial state frozen for the garbage collector",
            count=gc.get_freeze_count(),
        )

    async def _lead(self) -> None:
        if self.lead > 0:
            await asyncio.sleep(self.lead)

    async def _coalesce(self) -> None:
        loop = asyncio.get_running_loop()
        first = self._pending_since if self._pending_since is not None else time.monotonic()
        deadline = loop.time() + max(0.0, first + self.max_delay - time.monotonic())
        while True:
            self._wake.clear()
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                async with asyncio.timeout(min(self.window, left)):
                    await self._wake.wait()
            except TimeoutError:
                return

    def translation_options(self) -> TranslateOptions:
        self._release_quarantine()
        return msgspec.structs.replace(
            self.options,
            dataplane=dict(self._dataplane_states) if self.dataplane else None,
            rejected={
                key: f"the Envoy of Gateway {q.gateway} rejects it: {q.message}"
                for key, q in sorted(self._quarantine.items())
            },
        )

    async def _translate_and_publish(self) -> None:
        deleted, self._deleted = self._deleted, False
        snapshot = self.store.snapshot()
        options = self.translation_options()
        self.translations += 1
        self.metrics.translations.inc()
        started = time.perf_counter()
        try:
            if self.offload:
                result = await asyncio.to_thread(
                    _translate_gc_paused, self.translate_fn, snapshot, options
                )
            else:
                result = _translate_gc_paused(self.translate_fn, snapshot, options)
        except Exception:
            # translate is total; if it raises anyway, keep what is published.
            self.metrics.translation_failures.inc()
            self.failed_translations += 1
            self.last_translation_error = traceback.format_exc(limit=3)
            log.exception("translation failed; keeping the last published result")
            self._gc_hold.close()  # no freeze before a translation succeeds: collect meanwhile
            return
        finally:
            self.metrics.translation_seconds.observe(time.perf_counter() - started)
        self.last_result = result
        await self._publish(result, deleted)
        if not self._ready:
            self._ready = True
            self.metrics.ready.set(1)
            log.info("first translation published", objects=len(self.store))

    async def _publish(self, result: Result, deleted: bool) -> None:
        # The data plane first: Envoy configuration is what a change waits for. Envoys to start
        # go before their configuration: they start, and connect to wait for it, while it is
        # built (at a start, every Envoy; the build takes most of a second at 10,000 routes).
        # An update that stops Envoys goes last, as it waits for their draining.
        infra_changed, infra_removed = _diff(self.published_infra, result.infra)
        infra_first = not infra_removed
        if infra_first:
            await self._publish_infra(result, infra_changed, infra_removed)
        xds_changed, xds_removed = _diff(self.published_xds, result.xds)
        if (xds_changed or xds_removed) and await self._send(
            "xds", self.xds_sink, xds_changed, xds_removed
        ):
            self.published_xds = dict(result.xds)
        if deleted:  # an object deleted before the snapshot: a pass over every object
            self.status_sink.retain(set(self.store.keys()))
        with gc_paused():
            written = self.status_sink.publish(result.statuses, self._stored_status)
        if written:
            self.metrics.publishes.labels(sink="status").inc()
            log.debug("statuses written", count=len(written))
        if not infra_first:
            await self._publish_infra(result, infra_changed, infra_removed)

    async def _publish_infra(
        self, result: Result, changed: Mapping[str, InfraGateway], removed: Sequence[str]
    ) -> None:
        if (changed or removed) and await self._send("infra", self.infra_sink, changed, removed):
            self.published_infra = dict(result.infra)

    async def _send(
        self, name: str, sink: Any, changed: Mapping[str, Any], removed: Sequence[str]
    ) -> bool:
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
        status = stored.status if stored is not None else None
        return status if isinstance(status, dict) else None

    # ------------------------------------------------------------ tests and tooling

    async def wait_settled(self, timeout: float = 5.0) -> None:
        """Wait until no change is pending and the last translation is published."""
        async with asyncio.timeout(timeout):
            await self._settled.wait()
