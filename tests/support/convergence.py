"""Shared by the order-independence and no-unnecessary-work tests: a runtime with the real
translate and recording sinks, conformance object sets as decoded objects, and the check
that what the runtime published equals ``translate(current objects)``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from conformance_objects import case_raws

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.metrics import Metrics
from gateweave.runtime import Runtime
from gateweave.status import StatusSink, merge_status
from gateweave.store import Store, key_of
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions

OURS = "gateweave.io/gateway-controller"


def without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def without_generation(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without ``metadata.generation`` (the store counts it; the input does not decide it)."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return dict(raw)
    return {**raw, "metadata": {k: v for k, v in meta.items() if k != "generation"}}


def decoded(raw: Mapping[str, Any]) -> Decoded:
    result, errors = decode(dict(raw))
    assert result is not None and not errors, errors
    return result


def case_set(case_files: Iterable[str]) -> list[Decoded]:
    """The objects of several conformance cases, united by key (the first definition wins),
    in a stable order."""
    out: dict[Key, Decoded] = {}
    for case_file in case_files:
        for raw in case_raws(case_file):
            dec, errors = decode(raw)
            assert not errors, errors
            if dec is not None:
                out.setdefault(key_of(dec), dec)
    return [out[k] for k in sorted(out)]


class RecordingSink:
    """An xDS or infra sink that applies what it is given and counts calls."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.calls = 0

    async def update(self, changed: Mapping[str, Any], removed: Sequence[str]) -> None:
        await asyncio.sleep(0)
        self.calls += 1
        self.state.update(changed)
        for name in removed:
            del self.state[name]


class Harness:
    """A store and a runtime with the real translate, recording sinks and its own metrics."""

    def __init__(self, *, window: float = 0.01, max_delay: float = 0.5) -> None:
        self.store = Store()
        self.metrics = Metrics()
        self.xds = RecordingSink()
        self.infra = RecordingSink()
        self.runtime = Runtime(
            self.store,
            options=TranslateOptions(controller_name=OURS),
            status_sink=StatusSink(OURS),
            xds_sink=self.xds,
            infra_sink=self.infra,
            dataplane=False,
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
        return {s: self.count("gateweave_publishes_total", sink=s) for s in ("status", "xds", "infra")}

    def assert_published_equals_translate(self) -> None:
        """xDS IR, infra IR and statuses published == translate(the store's objects now)."""
        want = translate(self.store.snapshot(), self.runtime.translation_options())
        assert self.runtime.published_xds == want.xds
        assert self.xds.state == want.xds
        assert self.runtime.published_infra == want.infra
        assert self.infra.state == want.infra
        sink = self.runtime.status_sink
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
    task = asyncio.create_task(h.runtime.run(), name="test-runtime")
    try:
        await h.runtime.wait_settled()
        yield h
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        h.runtime.close()
