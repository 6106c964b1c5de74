"""The measurements of ``gateweave bench``: one row of figures per route count.

Each row is measured in a fresh process (``python -m gateweave_bench.run --measure N``),
so no figure depends on what ran before it. What each figure covers (wall-clock seconds
on one thread unless said otherwise; every timed step is repeated and the median is
reported):

* ``decode_s``: ``msgspec.json.decode`` of every object's JSON serialisation, one
  object at a time as events bring them, with the cyclic garbage collector paused - the
  floor any decoding can reach;
* ``load_s``: the same bytes through our full path, as a provider reads a batch: JSON
  decoding, then :func:`gateweave.api.decode.decode` of each freshly decoded manifest,
  handed over (``owned``: CRD schema and CEL validation, defaulting, typed conversion),
  the collector paused (as the file and Kubernetes providers pause it for a batch) until the
  JSON trees are freed (a provider keeps each object's model and its packed stored form, not
  the tree), its pass over the models kept included, cold (what the validators remember of
  earlier batches forgotten first);
* ``translate_s``: a full, cold ``translate(store.snapshot())`` of every object (the
  collector paused, as the runtime runs it);
* ``change_s`` / ``endpoints_change_s``: one HTTPRoute / one EndpointSlice changed ->
  new xDS snapshot ready, in-process: decoding the changed object, ``Store.apply``,
  ``Store.snapshot``, the runtime's translation (the incremental translator, which had
  translated the previous snapshot; its result equals a full ``translate``), the runtime's diff of
  each Gateway's xDS IR
  against what was published, then for each changed Gateway the xDS builder
  (``gateweave.xds.build``) and the ADS server's packing and versioning
  (``make_snapshot``). Not included: the runtime's coalescing window (50 ms of quiet
  by default), status writes, the gRPC push to Envoy (``event_to_envoy`` covers that);
* ``burst_translations``: translations the real :class:`~gateweave.runtime.Runtime`,
  configured as ``gateweave serve`` runs it (default lead, window and max delay, translation
  in a worker thread, ``gc_freeze``), runs for 1,000 route changes applied one by one,
  yielding to the event loop after each;
* ``rss_mb``: peak resident memory (``VmHWM``; see :func:`peak_rss_mb`) of another fresh
  process that does only the controller's work for that many routes: decode every
  object's JSON into a Store, one at a time as a provider does, translate with the
  runtime's incremental translator, build and version every Gateway's Envoy resources
  incrementally (both keep their state);
* ``event_to_envoy_p50_ms`` / ``_p99_ms``: at every route count (unless
  ``--latency-samples 0``), from :mod:`gateweave_bench.latency` (a real Envoy serving
  that many routes); the p99 at 10,000 is judged against the p99 at 1,000 of the same run;
* ``cold_start_s`` / ``yaml_floor_s``: from :mod:`gateweave_bench.filecold`: the row's
  objects written one file each, ``gateweave serve`` started on them as a command (its own
  process, host Envoys) -> every Gateway ``Programmed``, and the time to parse those files
  with the C YAML loader alone;
* ``kube_cold_start_s`` / ``kube_list_decode_s``: from :mod:`gateweave_bench.kubecold` (fresh
  processes: an API-server stand-in holding the generated objects, and ``serve`` with the
  Kubernetes provider): ``serve`` started -> its first status write, and the
  ``msgspec.json.decode`` of every list body it read at its start (the collector paused).
"""

from __future__ import annotations

import asyncio
import gc
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from gateweave import native
from gateweave.api import schemacode
from gateweave.api.decode import Decoded, decode
from gateweave.gcpause import gc_paused
from gateweave.ir import Result, XdsGateway
from gateweave.snapshot import Snapshot
from gateweave.store import Store
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.snapshot_cache import NodeSnapshot
from gateweave_bench.objects import (
    DEFAULT_SEED,
    BenchObjects,
    changed_endpoint_slice,
    changed_route,
    generate,
    referenced_slices,
)

KEYS = (
    "routes",
    "objects",
    "decode_s",
    "load_s",
    "translate_s",
    "change_s",
    "endpoints_change_s",
    "burst_translations",
    "rss_mb",
    "event_to_envoy_p50_ms",
    "event_to_envoy_p99_ms",
    "cold_start_s",
    "yaml_floor_s",
    "kube_cold_start_s",
    "kube_list_decode_s",
)
BURST_EVENTS = 1000
LATENCY_ROUTES = 1000
GROWTH_ROUTES = (
    10000  # event -> Envoy p99 here is judged against LATENCY_ROUTES' p99 in the same run
)
TARGETS = {
    "load_s": "<= 5 x decode_s at 10,000 routes",
    "translate_s": "<= 3 x decode_s at 10,000 routes",
    "change_s": "<= 5% of translate_s at 10,000 routes",
    "endpoints_change_s": "<= 5% of translate_s at 10,000 routes",
    "burst_translations": "<= 2",
    "event_to_envoy_p99_ms": "< 100 at 1,000 routes; at 10,000 <= 1.5 x the p99 at 1,000",
    "rss_mb": "< 256 at 1,000 routes",
    "cold_start_s": "<= 3 x yaml_floor_s at 10,000 routes",
    "kube_cold_start_s": "<= 3 x kube_list_decode_s at 10,000 routes",
    "many_gateways": (
        "100 Gateways x 10 routes: total RSS (serve + Envoys) merged"
        " <= 1/10 of one Envoy per Gateway"
    ),
}


class BenchError(Exception):
    """The generated objects did not behave as the benchmark needs (a bug, not a slow run)."""


def _translate(snapshot: Snapshot, options: TranslateOptions) -> Result:
    """A translation as the runtime runs it: with the cyclic garbage collector paused."""
    with gc_paused():
        return translate(snapshot, options)


def _json_decode_floor(blobs: Sequence[bytes]) -> list[Any]:
    """JSON-decode every blob with the cyclic collector paused: the floor. With it on, the
    collections the decoded dicts trigger over the process's heap cost several times the
    decoding itself at 10,000 routes (0.08 s -> 0.5-0.7 s)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return [msgspec.json.decode(b) for b in blobs]
    finally:
        if enabled:
            gc.enable()


def decode_all(manifests: Sequence[Mapping[str, Any]], *, owned: bool = False) -> list[Decoded]:
    """Every manifest through our decode path (handed over when ``owned``); any rejection
    is a :class:`BenchError`."""
    out = []
    for raw in manifests:
        decoded, errors = decode(raw, "bench", owned=owned)
        if errors or decoded is None:
            raise BenchError(f"generated object rejected: {errors or raw.get('kind')}")
        out.append(decoded)
    return out


def _load(blobs: Sequence[bytes]) -> list[Any]:
    """``load_s``: a batch of manifests read as a provider reads them, cold (nothing
    remembered from an earlier batch: every repetition measures a start).

    What the load keeps is each object's model. A provider keeps the object's stored form
    too, packed (``Decoded.packed``, storage: not part of this figure), and frees its JSON
    tree once packed; so here the JSON trees are freed inside the collector's pause, as
    ``decode_s``'s are. The collector's pass over what the load keeps, when it is back on,
    falls inside the timing (as for ``translate_s``). Until 2026-12-03 the JSON trees were
    still alive at that pass: it walked every dict and list of them, a cost neither the
    providers nor ``decode_s`` have (docs/benchmarks.md, "The load's collector pass")."""
    schemacode.clear_memos()
    with gc_paused():
        return [d.model for d in decode_all([msgspec.json.decode(b) for b in blobs], owned=True)]


def _decode_one(raw: Mapping[str, Any]) -> Decoded:
    return decode_all([raw])[0]


def machine() -> dict[str, Any]:
    import platform  # (here, as cProfile in profile_translate: out of the memory probe)

    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor()
    return {
        "nproc": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        # Whether the translation ran compiled (gateweave.native "active") or from its sources.
        "translation": "compiled (mypyc)"
        if native.state() == "active"
        else f"Python sources (native build {native.state()})",
    }


# load_s and translate_s are compared with decode_s as ratios: their repetitions alternate,
# so the medians see the same machine (a shared machine's speed drifts within a minute).
PAIRED_REPEAT = 5


def _paired_medians(fns: Sequence[Callable[[], object]], repeat: int) -> list[float]:
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(max(1, repeat)):
        for fn, fn_times in zip(fns, times, strict=True):
            started = time.perf_counter()
            fn()
            fn_times.append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def load_figures(
    routes: int, seed: int = DEFAULT_SEED, repeat: int = PAIRED_REPEAT
) -> dict[str, Any]:
    """``decode_s`` and ``load_s`` alone (their repetitions alternating, as in :func:`measure`),
    for work on the load path: ``python -m gateweave_bench.run --load N``."""
    blobs = [msgspec.json.encode(raw) for raw in generate(routes, seed).manifests]
    _load(blobs)  # each kind's validator generated (a fixed cost of the process, not of a load)
    decode_s, load_s = _paired_medians(
        [lambda: _json_decode_floor(blobs), lambda: _load(blobs)], max(1, repeat)
    )
    return {
        "routes": routes,
        "decode_s": round(decode_s, 4),
        "load_s": round(load_s, 4),
        "load_over_decode": round(load_s / decode_s, 2),
        "loadavg": os.getloadavg()[0],
    }


def translate_figures(
    routes: int, seed: int = DEFAULT_SEED, repeat: int = PAIRED_REPEAT
) -> dict[str, Any]:
    """``decode_s`` and ``translate_s`` alone (their repetitions alternating, as in
    :func:`measure`), for work on the translation: ``python -m gateweave_bench.run --translate N``
    (``GATEWEAVE_NATIVE=0`` for the Python sources)."""
    objects = generate(routes, seed)
    blobs = [msgspec.json.encode(raw) for raw in objects.manifests]
    options = TranslateOptions()
    snap = Pipeline(decode_all(objects.manifests), options).store.snapshot()
    del objects
    loadavg = os.getloadavg()[0]
    decode_s, translate_s = _paired_medians(
        [lambda: _json_decode_floor(blobs), lambda: _translate(snap, options)], max(1, repeat)
    )
    return {
        "routes": routes,
        "translation": machine()["translation"],
        "decode_s": round(decode_s, 4),
        "translate_s": round(translate_s, 4),
        "translate_over_decode": round(translate_s / decode_s, 2),
        "loadavg": [loadavg, os.getloadavg()[0]],
    }


# ---------------------------------------------------------------- change -> new xDS snapshot


class Pipeline:
    """The controller's in-process path from an event to versioned Envoy resources."""

    def __init__(self, decoded: Sequence[Decoded], options: TranslateOptions) -> None:
        self.options = options
        self.store = Store()
        for d in decoded:
            self.store.apply(d)
        self.translator = IncrementalTranslator()  # what the runtime translates with
        with gc_paused():
            result = self.translator(self.store.snapshot(), options)
        self.published: dict[str, XdsGateway] = dict(result.xds)
        self.snapshots = IncrementalSnapshots()  # what the xDS publisher builds with
        self.nodes: dict[str, NodeSnapshot] = {
            name: self.snapshots.snapshot(gw) for name, gw in sorted(result.xds.items())
        }

    def change(self, raw: Mapping[str, Any]) -> list[str]:
        """Apply one changed object; the Gateways whose xDS snapshot changed."""
        decoded = _decode_one(raw)
        self.store.apply(decoded)
        with gc_paused():
            result = self.translator(self.store.snapshot(), self.options)
        changed = {n: gw for n, gw in sorted(result.xds.items()) if self.published.get(n) != gw}
        for name in self.published.keys() - result.xds.keys():
            self.nodes.pop(name, None)
            self.snapshots.forget(name)
        for name, gw in changed.items():
            self.nodes[name] = self.snapshots.snapshot(gw)
        self.published = dict(result.xds)
        return sorted(changed)


def _time_changes(
    pipeline: Pipeline, events: Sequence[dict[str, Any]], what: str, *, one: bool
) -> float:
    """Median seconds per change; each must change one Gateway's snapshot (``one``) or at least
    one.
    """
    times = []
    for raw in events:
        started = time.perf_counter()
        changed = pipeline.change(raw)
        times.append(time.perf_counter() - started)
        if not changed or (one and len(changed) != 1):
            raise BenchError(f"a {what} change changed the snapshots of {changed or 'no Gateway'}")
    return statistics.median(times)


# ---------------------------------------------------------------- the runtime under a burst


async def _burst(decoded: Sequence[Decoded], events: Sequence[Decoded], timeout: float) -> int:
    from gateweave import DEFAULT_CONTROLLER_NAME
    from gateweave.runtime import Runtime
    from gateweave.sinks.localstatus import LocalStatusSink

    store = Store()
    for d in decoded:
        store.apply(d)
    # as `gateweave serve` runs it
    runtime = Runtime(
        store,
        translate_fn=IncrementalTranslator(),
        status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME),
        dataplane=False,
        gc_freeze=True,
    )
    task = asyncio.get_running_loop().create_task(runtime.run())
    try:
        await runtime.wait_settled(timeout)
        before = runtime.translations
        for d in events:
            store.apply(d)
            await asyncio.sleep(0)
        await runtime.wait_settled(timeout)
        return runtime.translations - before
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        runtime.close()


def burst_translations(
    objects: BenchObjects, decoded: Sequence[Decoded], events: int = BURST_EVENTS
) -> int:
    changes = [_decode_one(changed_route(objects, i, 1_000_000 + i)) for i in range(events)]
    return asyncio.run(_burst(decoded, changes, timeout=600.0))


# ---------------------------------------------------------------- memory (a fresh process)


def _child(
    args: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Any:
    """Run ``python -m gateweave_bench.run ARGS`` (stderr passes through); its JSON answer.
    ``env``/``cwd``: the child's environment and working directory (``python -m`` puts the
    latter first on the path, before PYTHONPATH)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gateweave_bench.run", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise BenchError(
            f"`python -m gateweave_bench.run {' '.join(args)}` failed (exit {proc.returncode})"
        )
    return json.loads(proc.stdout)


def controller_rss_mb(routes: int, seed: int, policies: float = 0.0) -> float:
    """Peak RSS (MB) of a fresh process doing the controller's work for ``routes`` routes."""
    args = ["--rss", str(routes), "--seed", str(seed), "--policies", str(policies)]
    return float(_child(args, timeout=900)["rss_mb"])


def kube_cold_start(
    routes: int, seed: int, repeat: int, policies: float
) -> tuple[dict[str, float | None], str]:
    """``kube_cold_start_s`` and ``kube_list_decode_s`` (:mod:`gateweave_bench.kubecold`: the
    stand-in in a process of its own, ``serve`` in a fresh one) and a note with the splits;
    a failed start loses only these figures (None, and why in the note)."""
    from gateweave_bench.kubecold import ColdStartError, Standin

    figures: dict[str, float | None] = dict.fromkeys(("kube_cold_start_s", "kube_list_decode_s"))
    try:
        with Standin(routes, seed, policies) as standin:
            args = ["--kube-cold", str(standin.kubeconfig), "--repeat", str(repeat)]
            answer = _child(args, timeout=1800)
    except (ColdStartError, BenchError, subprocess.SubprocessError, OSError) as exc:
        return figures, f"failed: {type(exc).__name__}: {exc}"
    for key in figures:
        figures[key] = float(answer[key])
    splits = ", ".join(f"{name} {seconds} s" for name, seconds in answer["splits"].items())
    cpu = ", ".join(f"{name} {seconds} s" for name, seconds in answer["cpu"].items())
    return figures, (
        f"start -> first status write: {splits}; CPU seconds: {cpu}; "
        f"{answer['list_pages']} list pages, {answer['list_bytes']:,} bytes"
    )


def _measure_in_child(
    routes: int, seed: int, repeat: int, latency_samples: int, policies: float
) -> tuple[dict[str, Any], dict[str, str]]:
    args = [
        "--policies",
        str(policies),
        "--measure",
        str(routes),
        "--seed",
        str(seed),
        "--repeat",
        str(repeat),
        "--latency-samples",
        str(latency_samples),
    ]
    answer = _child(args, timeout=3600)
    return dict(answer["row"]), answer["notes"]


class ControllerState(NamedTuple):
    """What a controller keeps between events after taking in every object (the memory
    probe's subject): the store, the incremental translator (its state for the next change),
    the result it published, and every Gateway's versioned Envoy resources."""

    store: Store
    translator: IncrementalTranslator
    result: Result
    snapshots: IncrementalSnapshots
    nodes: dict[str, NodeSnapshot]


def controller_state(
    routes: int, seed: int, policies: float, stage: Callable[[str], None] = lambda _: None
) -> ControllerState:
    """The controller's work for ``routes`` routes, as ``rss_mb`` measures it; ``stage(name)``
    is called after each step (``objects``, ``store``, ``translation``, ``xds``)."""
    # The generated objects reach the controller as a provider hands them over: each one's
    # JSON (as the API server sends it; the generated dicts freed first), decoded and stored
    # one at a time (the file provider and watch events: no object's dict outlives its apply).
    blobs = [msgspec.json.encode(m) for m in generate(routes, seed, policies).manifests]
    blobs.reverse()
    stage("objects")
    store = Store()
    while blobs:
        store.apply(decode_all([msgspec.json.decode(blobs.pop())], owned=True)[0])
    stage("store")
    # As the runtime does it: the incremental translator and xDS snapshots, which keep their
    # state for the next change.
    translator = IncrementalTranslator()
    result = translator(store.snapshot(), TranslateOptions())
    stage("translation")
    snapshots = IncrementalSnapshots()
    nodes = {name: snapshots.snapshot(gw) for name, gw in sorted(result.xds.items())}
    if not nodes:
        raise BenchError("no Gateway was translated")
    stage("xds")
    return ControllerState(store, translator, result, snapshots, nodes)


def _rss_child(routes: int, seed: int, policies: float) -> dict[str, float]:
    state = controller_state(routes, seed, policies)
    rss = peak_rss_mb()  # (what the controller keeps, alive while measured)
    del state
    return {"rss_mb": rss}


def vm_mb(field: str) -> float | None:
    """A ``Vm*`` figure of /proc/self/status (``VmRSS``, ``VmHWM``...) in MB; None without one."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except (OSError, ValueError):
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process image in MB.

    ``VmHWM`` from /proc/self/status where there is one: ``ru_maxrss`` also counts the
    memory of the process that forked this one before its ``exec`` (Linux keeps the
    larger of the two), which would charge the parent's size to a fresh child.
    """
    hwm = vm_mb("VmHWM")
    if hwm is not None:
        return hwm
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


# ---------------------------------------------------------------- event -> Envoy (another module)


def file_cold_start(routes: int, seed: int, policies: float) -> tuple[dict[str, float | None], str]:
    """``cold_start_s`` and ``yaml_floor_s`` (:mod:`gateweave_bench.filecold`; None: not
    measured) and a note (why not)."""
    from gateweave_bench import filecold

    figures: dict[str, float | None] = dict.fromkeys(("cold_start_s", "yaml_floor_s"))
    try:
        outcome = filecold.measure(routes, seed, policies)
    except Exception as exc:  # a failed serve must not lose the other figures
        return figures, f"failed: {type(exc).__name__}: {exc}"
    figures["cold_start_s"] = outcome["cold_start_s"]
    figures["yaml_floor_s"] = outcome["yaml_floor_s"]
    return figures, ""


def event_to_envoy(routes: int, samples: int) -> tuple[dict[str, float | None], str]:
    """The figures of :mod:`gateweave_bench.latency` (event_to_envoy p50/p99 ms; None: not
    measured) and a note (why not, or the file mode's figures)."""
    figures: dict[str, float | None] = dict.fromkeys(
        ("event_to_envoy_p50_ms", "event_to_envoy_p99_ms")
    )
    try:
        from gateweave_bench import latency  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return figures, "missing: gateweave_bench.latency is not present"
    measure = getattr(latency, "measure_event_to_envoy", None)
    if measure is None:
        return figures, "missing: gateweave_bench.latency has no measure_event_to_envoy"
    try:
        outcome = measure(routes, samples)
    except Exception as exc:  # a failed Envoy run must not lose the other figures
        return figures, f"failed: {type(exc).__name__}: {exc}"
    p50, p99, note = _percentiles(outcome)
    figures["event_to_envoy_p50_ms"], figures["event_to_envoy_p99_ms"] = p50, p99
    return figures, note


def _percentiles(outcome: Any) -> tuple[float | None, float | None, str]:
    """Reads the latency module's report: per mode (``store``: the event applied to the
    store; ``file``: a manifest file rewritten) a ``summary`` whose ``total`` has p50/p99
    in ms. The figure is the ``store`` mode's; the ``file`` mode's goes in the note.
    Also accepts a flat mapping with p50_ms/p99_ms or a sequence of samples in seconds."""
    if isinstance(outcome, Mapping) and isinstance(outcome.get("store"), Mapping):
        total = outcome["store"].get("summary", {}).get("total", {})
        note = f"store event -> Envoy serving ({total.get('n', '?')} samples)"
        file_total = (outcome.get("file") or {}).get("summary", {}).get("total")
        if file_total:
            note += (
                f"; file rewrite -> Envoy serving (incl. watch debounce): p50 {file_total['p50']} "
                f"ms, p99 {file_total['p99']} ms"
            )
        if "p50" in total and "p99" in total:
            return float(total["p50"]), float(total["p99"]), note
    if isinstance(outcome, Mapping):
        p50 = outcome.get("p50_ms", outcome.get("event_to_envoy_p50_ms"))
        p99 = outcome.get("p99_ms", outcome.get("event_to_envoy_p99_ms"))
        if p50 is not None and p99 is not None:
            return float(p50), float(p99), ""
    if hasattr(outcome, "p50_ms") and hasattr(outcome, "p99_ms"):
        return float(outcome.p50_ms), float(outcome.p99_ms), ""
    if (
        isinstance(outcome, Sequence)
        and outcome
        and all(isinstance(x, int | float) for x in outcome)
    ):
        ordered = sorted(float(x) * 1000 for x in outcome)
        pick = lambda q: ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]  # noqa: E731
        return pick(0.5), pick(0.99), "percentiles of the returned samples (taken as seconds)"
    return None, None, f"unrecognised result from measure_event_to_envoy: {type(outcome).__name__}"


# ---------------------------------------------------------------- one row, all rows


def measure(
    routes: int,
    *,
    seed: int = DEFAULT_SEED,
    repeat: int = 3,
    latency_samples: int = 100,
    policies: float = 0.0,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every figure for ``routes`` routes (and Envoy Gateway policies for the fraction
    ``policies`` of them, objects.py), and notes on the event -> Envoy figure and the
    Kubernetes cold start."""
    objects = generate(routes, seed, policies)
    blobs = [msgspec.json.encode(raw) for raw in objects.manifests]
    row: dict[str, Any] = dict.fromkeys(KEYS)
    row["routes"] = routes
    row["objects"] = len(objects.manifests)

    log(f"[{routes}] decode, load and translate")
    decoded = decode_all(objects.manifests)
    options = TranslateOptions()
    pipeline = Pipeline(decoded, options)
    snap = pipeline.store.snapshot()
    row["decode_s"], row["load_s"], row["translate_s"] = _paired_medians(
        [
            lambda: _json_decode_floor(blobs),
            lambda: _load(blobs),
            lambda: _translate(snap, options),
        ],
        max(PAIRED_REPEAT, repeat),
    )

    log(f"[{routes}] change")
    n_changes = max(21, repeat)  # cheap now (incremental): a steadier median
    step = max(1, routes // n_changes)
    row["change_s"] = _time_changes(
        pipeline,
        [changed_route(objects, k * step, k + 1) for k in range(n_changes)],
        "route",
        one=True,
    )
    slices = referenced_slices(objects)
    sstep = max(1, len(slices) // n_changes)
    row["endpoints_change_s"] = _time_changes(
        pipeline,
        [
            changed_endpoint_slice(objects, slices[(k * sstep) % len(slices)], k + 1)
            for k in range(n_changes)
        ],
        "EndpointSlice",
        one=False,
    )
    del pipeline

    log(f"[{routes}] burst of {BURST_EVENTS} events")
    row["burst_translations"] = burst_translations(objects, decoded)
    del decoded
    log(f"[{routes}] memory (fresh process)")
    row["rss_mb"] = controller_rss_mb(routes, seed, policies)

    notes: dict[str, str] = {}
    log(f"[{routes}] Kubernetes cold start (fresh processes)")
    kube, notes["kube_cold_start"] = kube_cold_start(routes, seed, repeat, policies)
    row.update(kube)
    log(f"[{routes}] cold start of serve on the objects as files (its own process)")
    cold, notes["cold_start"] = file_cold_start(routes, seed, policies)
    row.update(cold)
    if latency_samples > 0:
        log(f"[{routes}] event -> Envoy ({latency_samples} samples)")
        outcome, notes["event_to_envoy"] = event_to_envoy(routes, latency_samples)
        row.update(outcome)
    for key in ("decode_s", "load_s", "translate_s", "change_s", "endpoints_change_s"):
        row[key] = round(row[key], 4)
    return row, {what: note for what, note in notes.items() if note}


def run_bench(
    routes: Sequence[int],
    *,
    seed: int = DEFAULT_SEED,
    repeat: int = 3,
    latency_samples: int = 100,
    gateways: int = 100,
    policies: float = 0.0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every row, each measured in a fresh process so that no figure depends on what ran
    before it (heap size, caches, collector state); then, unless ``gateways`` is 0, the many
    Gateways row (:mod:`gateweave_bench.gateways`: that many Gateways x 10 routes, serve and
    its Envoys in their own processes)."""
    rows = []
    notes: dict[str, str] = {}
    for n in routes:
        log(f"[{n}] measuring in a fresh process")
        row, row_notes = _measure_in_child(n, seed, repeat, latency_samples, policies)
        rows.append(row)
        for what, note in row_notes.items():
            notes[f"{what} at {n} routes"] = note
    if latency_samples <= 0:
        notes["event_to_envoy"] = "not measured (--latency-samples 0)"
    many = None
    if gateways > 0:
        from gateweave_bench.gateways import ROUTES_PER_GATEWAY, measure

        many = measure(gateways, ROUTES_PER_GATEWAY, log=log)
    else:
        notes["many_gateways"] = "not measured (--gateways 0)"
    checks = check_targets(rows)
    if many is not None and many["merged_rss_ratio"] is not None:
        total = many["gateways"] * many["routes_per_gateway"]
        checks.append(
            {
                "target": "merged / unmerged total RSS",
                "routes": total,
                "value": many["merged_rss_ratio"],
                "limit": 0.1,
                "ok": many["merged_rss_ratio"] <= 0.1,
            }
        )
    return {
        "machine": machine(),
        "seed": seed,
        "policies": policies,
        "repeat": repeat,
        "results": rows,
        "many_gateways": many,
        "targets": TARGETS,
        "checks": checks,
        "notes": notes,
    }


def check_targets(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each target of :data:`TARGETS` judged on the rows it applies to (those measured)."""
    by_routes = {row["routes"]: row for row in rows}
    out: list[dict[str, Any]] = []

    def add(
        target: str, routes: int | None, value: float | None, limit: float, *, strict: bool = False
    ) -> None:
        if value is None:
            return
        ok = value < limit if strict else value <= limit
        out.append(
            {"target": target, "routes": routes, "value": round(value, 4), "limit": limit, "ok": ok}
        )

    big = by_routes.get(10000)
    if big is not None and big.get("decode_s") and big.get("load_s"):
        add("load_s / decode_s", 10000, big["load_s"] / big["decode_s"], 5.0)
    if big is not None and big.get("decode_s") and big.get("translate_s"):
        add("translate_s / decode_s", 10000, big["translate_s"] / big["decode_s"], 3.0)
        for key in ("change_s", "endpoints_change_s"):
            if big.get(key) is not None:
                add(f"{key} / translate_s", 10000, big[key] / big["translate_s"], 0.05)
    for row in rows:
        if row.get("burst_translations") is not None:
            add("burst_translations", row["routes"], float(row["burst_translations"]), 2)
    one_k = by_routes.get(LATENCY_ROUTES)
    if one_k is not None:
        add(
            "event_to_envoy_p99_ms",
            LATENCY_ROUTES,
            one_k.get("event_to_envoy_p99_ms"),
            100,
            strict=True,
        )
        add("rss_mb", LATENCY_ROUTES, one_k.get("rss_mb"), 256, strict=True)
    p99_1k = one_k.get("event_to_envoy_p99_ms") if one_k is not None else None
    p99_big = big.get("event_to_envoy_p99_ms") if big is not None else None
    if p99_1k and p99_big is not None:
        add("event_to_envoy_p99_ms growth", GROWTH_ROUTES, p99_big / p99_1k, 1.5)
    if big is not None and big.get("yaml_floor_s") and big.get("cold_start_s") is not None:
        add("cold_start_s / yaml_floor_s", 10000, big["cold_start_s"] / big["yaml_floor_s"], 3.0)
    if big is not None and big.get("kube_list_decode_s") and big.get("kube_cold_start_s"):
        add(
            "kube_cold_start_s / kube_list_decode_s",
            10000,
            big["kube_cold_start_s"] / big["kube_list_decode_s"],
            3.0,
        )
    return out


def profile_translate(routes: int, seed: int = DEFAULT_SEED, top: int = 25) -> str:
    """cProfile of one translation of ``routes`` routes: the top entries by own time and by
    cumulative time.
    """
    import cProfile  # (here: out of the memory probe's process)
    import pstats

    decoded = decode_all(generate(routes, seed).manifests)
    store = Store()
    for d in decoded:
        store.apply(d)
    snap = store.snapshot()
    options = TranslateOptions()
    translate(snap, options)  # warm caches shared across translations (certificates, regexes)
    prof = cProfile.Profile()
    prof.enable()
    translate(snap, options)
    prof.disable()
    out = io.StringIO()
    if native.state() == "active":
        out.write(
            "note: the translation ran compiled, so its functions do not appear in this profile; "
            "run with GATEWEAVE_NATIVE=0 for a per-function profile of the Python sources\n"
        )
    for order in ("tottime", "cumulative"):
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats(order).print_stats(top)
    return out.getvalue()


def format_table(report: Mapping[str, Any]) -> str:
    rows = report["results"]
    width = max([len(k) for k in KEYS] + [8])
    lines = [f"{'':{width}}" + "".join(f"{row['routes']:>14,}" for row in rows)]
    for key in KEYS[1:]:
        cells = []
        for row in rows:
            value = row[key]
            if value is None:
                cells.append(f"{'-':>14}")
            elif isinstance(value, float):
                cells.append(f"{value:>14.4f}" if key.endswith("_s") else f"{value:>14.1f}")
            else:
                cells.append(f"{value:>14,}")
        lines.append(f"{key:{width}}" + "".join(cells))
    m = report["machine"]
    lines.append("")
    lines.append(
        f"machine: {m['nproc']} CPUs, {m['cpu'] or 'unknown CPU'}, Python {m['python']}; seed "
        f"{report['seed']}, median of {report['repeat']}"
    )
    lines.append(f"translation: {m.get('translation', 'unknown')}")
    if report.get("policies"):
        lines.append(f"policies: for a fraction {report['policies']} of the routes (objects.py)")
    for what, note in report["notes"].items():
        lines.append(f"{what}: {note}")
    many = report.get("many_gateways")
    if many:
        lines.append(
            f"{many['gateways']} Gateways x {many['routes_per_gateway']} routes (serve + Envoys, "
            "total RSS; "
            "start -> every Gateway Programmed):"
        )
        for mode in ("unmerged", "merged"):
            row = many[mode]
            lines.append(
                f"  {mode:8} {row['envoys']:4} Envoys  {row['rss_mb']:9.1f} MB  "
                f"{row['programmed_s']:7.1f} s"
            )
    checks = report.get("checks") or []
    if checks:
        lines.append("")
        for check in checks:
            verdict = "met" if check["ok"] else "NOT MET"
            lines.append(
                f"{verdict:8} {check['target']} at {check['routes']:,} routes: {check['value']} "
                f"(target {TARGETS_BY_CHECK.get(check['target'], check['limit'])})"
            )
    return "\n".join(lines)


TARGETS_BY_CHECK = {
    "load_s / decode_s": "<= 5",
    "translate_s / decode_s": "<= 3",
    "change_s / translate_s": "<= 0.05",
    "endpoints_change_s / translate_s": "<= 0.05",
    "burst_translations": "<= 2",
    "event_to_envoy_p99_ms": "< 100",
    "event_to_envoy_p99_ms growth": "<= 1.5 x the p99 at 1,000 routes",
    "cold_start_s / yaml_floor_s": "<= 3",
    "kube_cold_start_s / kube_list_decode_s": "<= 3",
    "rss_mb": "< 256",
    "merged / unmerged total RSS": "<= 0.1",
}


def _log_to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str]) -> int:
    """The fresh processes of ``gateweave bench``: ``--measure N`` (one row), ``--rss N``
    (the memory probe) or ``--kube-cold KUBECONFIG`` (the Kubernetes cold start against the
    stand-in of that kubeconfig); ``--load N``, ``decode_s`` and ``load_s`` alone;
    ``--translate N``, ``decode_s`` and ``translate_s`` alone; the
    answer is JSON on stdout, progress and logs go to stderr."""
    import argparse

    from gateweave import logs

    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.run", description="Use `gateweave bench`."
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--measure", type=int, metavar="N")
    what.add_argument("--rss", type=int, metavar="N")
    what.add_argument("--kube-cold", metavar="KUBECONFIG")
    what.add_argument("--load", type=int, metavar="N")
    what.add_argument("--translate", type=int, metavar="N")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--policies", type=float, default=0.0)
    args = parser.parse_args(argv)
    # stdout carries the answer: every log goes to stderr. (The memory probe configures
    # logging too: the controller does, and structlog, with the rich it loads, is part of
    # its memory.)
    logs.configure("warning")
    try:
        if args.rss is not None:
            answer: dict[str, Any] = _rss_child(args.rss, args.seed, args.policies)
        elif args.load is not None:
            answer = load_figures(args.load, args.seed, max(PAIRED_REPEAT, args.repeat))
        elif args.translate is not None:
            answer = translate_figures(args.translate, args.seed, max(PAIRED_REPEAT, args.repeat))
        elif args.kube_cold is not None:
            from gateweave_bench.kubecold import cold_start

            answer = cold_start(Path(args.kube_cold), args.repeat)
        else:
            row, notes = measure(
                args.measure,
                seed=args.seed,
                repeat=args.repeat,
                latency_samples=args.latency_samples,
                policies=args.policies,
                log=_log_to_stderr,
            )
            answer = {"row": row, "notes": notes}
    except BenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
