"""The runtime under test: a store, a Runtime (with its own translator, or the translate
given: the fake one of :mod:`tests.support.fake_translate`), recording sinks and its own
metrics; and the checks that what it published equals ``translate(current objects)``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.ir import Result
from gateweave.metrics import Metrics
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.sinks.statusmerge import merge_status, utc_now
from gateweave.store import Store
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from tests.support.incremental_check import incremental_translator

OURS = "gateweave.io/gateway-controller"
T0 = "2024-01-01T00:00:00Z"


class Clock:
    """The status sink's clock, set by the test."""

    def __init__(self, now: str = T0) -> None:
        self.now = now

    def __call__(self) -> str:
        return self.now


class RecordingSink:
    """An xDS or infra sink that applies what it is given and records each call
    (the names changed, sorted, and the names removed)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.calls: list[tuple[list[str], list[str]]] = []

    async def update(self, changed: Mapping[str, Any], removed: Sequence[str]) -> None:
        await asyncio.sleep(0)
        self.calls.append((sorted(changed), list(removed)))
        self.state.update(changed)
        for name in removed:
            del self.state[name]


def without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def route(
    name: str, gateway: str = "gw", status: dict[str, Any] | None = None, port: int = 8080
) -> Decoded:
    """An HTTPRoute in ``default`` attached to ``gateway``, with one backend."""
    raw: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "rules": [{"backendRefs": [{"name": "svc", "port": port}]}],
        },
    }
    if status is not None:
        raw["status"] = status
    result, errors = decode(raw, "")
    assert result is not None, errors
    return result


class Harness:
    """A store and a runtime, recording sinks and its own metrics. The runtime translates with
    ``translate_fn``, or by default as in production (the incremental translator), and what it
    publishes is checked against ``translate_fn``, or by default a full ``translate``. The
    status sink keeps time with ``clock`` when given (the wall clock otherwise)."""

    def __init__(
        self,
        translate_fn: TranslateFn | None = None,
        *,
        clock: Clock | None = None,
        dataplane: bool = False,
        window: float = 0.01,
        max_delay: float = 0.5,
    ) -> None:
        self.store = Store()
        self.clock = clock
        self.metrics = Metrics()
        self.xds = RecordingSink()
        self.infra = RecordingSink()
        self.reference: TranslateFn = translate_fn or translate
        self.status_sink = LocalStatusSink(OURS, clock=clock or utc_now, metrics=self.metrics)
        self.runtime = Runtime(
            self.store,
            translate_fn=translate_fn or incremental_translator(),
            options=TranslateOptions(controller_name=OURS),
            status_sink=self.status_sink,
            xds_sink=self.xds,
            infra_sink=self.infra,
            dataplane=dataplane,
            window=window,
            max_delay=max_delay,
            metrics=self.metrics,
        )

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.value(name, labels)

    @property
    def translations(self) -> float:
        return self.count("gateweave_translations_total")

    @property
    def status_writes(self) -> float:
        return self.count("gateweave_status_writes_total")

    def publishes(self) -> dict[str, float]:
        return {
            s: self.count("gateweave_publishes_total", sink=s) for s in ("status", "xds", "infra")
        }

    def _translate_now(self) -> Result:
        return self.reference(self.store.snapshot(), self.runtime.translation_options())

    def _assert_ir_published(self, want: Result) -> None:
        assert self.runtime.published_xds == want.xds
        assert self.xds.state == want.xds
        assert self.runtime.published_infra == want.infra
        assert self.infra.state == want.infra

    def assert_converged(self) -> None:
        """What is published equals translate(current snapshot), merged onto what was given
        (an object whose given status already equals ours needs no write)."""
        batch = self._translate_now()
        now = self.clock.now if self.clock is not None else None
        statuses = self.status_sink.statuses
        for k, computed in batch.statuses.items():
            key = Key(*k)
            stored = self.store.get(key)
            given = stored.raw.get("status") if stored is not None else None
            want = merge_status(key.kind, given, computed, OURS, now, namespace=key.namespace)
            # lastTransitionTime depends on history by design; everything else must match.
            assert without_times(statuses.get(key, given or {})) == without_times(want), key
        assert set(statuses) <= set(self.store.keys())
        self._assert_ir_published(batch)

    def assert_published_equals_translate(self) -> None:
        """xDS IR, infra IR and statuses published == translate(the store's objects now): every
        object translate reports on has our status written, no other keeps one of ours."""
        want = self._translate_now()
        self._assert_ir_published(want)
        sink = self.status_sink
        for key in self.store:
            stored = self.store.get(key)
            given = stored.raw.get("status") if stored is not None else None
            computed = want.statuses.get(key)
            if computed is None:
                # Translate does not report on it: no status of ours remains.
                assert sink.get(key) is None, f"stale status kept for {key}: {sink.get(key)}"
                continue
            expected = merge_status(key.kind, given, computed, OURS, None, namespace=key.namespace)
            got = sink.get(key)
            assert got is not None, f"no status written for {key}"
            assert without_times(got) == without_times(expected), key
        assert set(sink.statuses) <= set(self.store.keys())


@contextlib.asynccontextmanager
async def running(h: Harness) -> AsyncIterator[Harness]:
    """The harness's runtime running (and settled) for the body of the ``async with``."""
    task = asyncio.create_task(h.runtime.run(), name="test-runtime")
    try:
        await h.runtime.wait_settled()
        yield h
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        h.runtime.close()
