"""Where the time goes: a full translation and a one-route change, stage by stage.

``python -m gateweave_bench.split [--routes N] [--repeat R]`` prints, for the bench's
generated objects, the median seconds of each stage (no profiler: each stage is timed
around the same calls the translation makes, so the figures add up to the real cost):

* a full translation (``translate``): context and indexes, the gateway side, the routes
  (translated and attached), Gateway statuses, the xDS IR, the infrastructure IR, freeing the
  working state, freeing the result, and the collector's pass over what the result left for
  it once the collector is back on;
* one HTTPRoute changed -> new xDS snapshot, as ``change_s`` times it: decoding the object,
  ``Store.apply``, ``Store.snapshot``, the incremental translation, the runtime's IR diff,
  the incremental xDS snapshot of the changed Gateway; the same stages for one EndpointSlice,
  one ReferenceGrant (of the shared namespace) and one team Namespace (a label) changed, and
  with ``--policies FRACTION`` (objects.py: Envoy Gateway policies for that fraction of the
  routes) one route's BackendTrafficPolicy changed.

``--lines MODULE.FUNCTION`` (repeatable) prints instead line_profiler's per-line times of those
functions over one full translation (of the Python sources: run it with
``GATEWEAVE_NATIVE=0``, compiled functions have no lines to trace).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

from gateweave.gcpause import gc_paused
from gateweave.translate import TranslateOptions, core
from gateweave_bench.objects import (
    DEFAULT_SEED,
    BenchObjects,
    changed_endpoint_slice,
    changed_grant,
    changed_namespace,
    changed_policy,
    changed_route,
    generate,
)
from gateweave_bench.run import Pipeline, decode_all

FULL = (
    "context",
    "gateway_side",
    "routes",
    "gateway_statuses",
    "xds_ir",
    "infra_ir",
    "release",
    "free_result",
    "collector",
)
CHANGE = ("decode", "store_apply", "store_snapshot", "translate", "ir_diff", "xds_snapshot")


class Laps:
    """A lap timer: ``lap(name)`` records the time since the previous lap under ``name``."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self._last
        self._last = now


def full_split(pipeline: Pipeline, repeat: int) -> dict[str, float]:
    snap = pipeline.store.snapshot()
    options = TranslateOptions()
    rows = []
    for _ in range(repeat):
        gc.collect()
        lap = Laps()
        with gc_paused():
            lap("start")
            # The stages of translate/core.py, in their order.
            ctx = core.context(snap, options)
            lap("context")
            gws = core.gateway_side(ctx)
            lap("gateway_side")
            core.route_side(ctx, gws)
            lap("routes")
            core.gateway_statuses(ctx, gws)
            lap("gateway_statuses")
            xds = core.xds_ir(ctx, gws)
            lap("xds_ir")
            infra = core.infra_ir(ctx, gws)
            lap("infra_ir")
            core.release(gws)
            del gws
            lap("release")
            result = (ctx.statuses, xds, infra)
            del ctx, xds, infra
        gc.collect(0)  # what the first young-generation pass after the pause would scan
        lap("collector")
        del result
        lap("free_result")
        rows.append(lap.laps)
    return {k: round(statistics.median(r[k] for r in rows), 4) for k in FULL}


# The changes timed: (row, objects.py's change, how many of the objects it changes there are).
CHANGES = (
    ("route_change_ms", changed_route, lambda o: len(o.route_index)),
    ("endpoints_change_ms", changed_endpoint_slice, lambda o: len(o.slice_index)),
    ("policy_change_ms", changed_policy, lambda o: len(o.policy_index)),
    ("grant_change_ms", changed_grant, lambda o: len(o.grant_index)),
    ("namespace_change_ms", changed_namespace, lambda o: len(o.namespace_index)),
)


def change_split(
    pipeline: Pipeline, objects: BenchObjects, repeat: int, change: Any = changed_route, n: int = 0
) -> dict[str, float]:
    """Median milliseconds of each stage of ``repeat`` changes made by ``change`` (one of
    objects.py's ``changed_*``) of objects spread over the ``n`` there are."""
    rows = []
    n = n or len(objects.route_index)
    for k in range(repeat):
        raw = change(objects, (k * 7919) % n, 5_000_000 + k)
        lap = Laps()
        decoded = decode_all([raw])[0]
        lap("decode")
        pipeline.store.apply(decoded)
        lap("store_apply")
        snap = pipeline.store.snapshot()
        lap("store_snapshot")
        with gc_paused():
            result = pipeline.translator(snap, pipeline.options)
        lap("translate")
        changed = {
            name: gw
            for name, gw in sorted(result.xds.items())
            if pipeline.published.get(name) != gw
        }
        lap("ir_diff")
        for name, gw in changed.items():
            pipeline.nodes[name] = pipeline.snapshots.snapshot(gw)
        pipeline.published = dict(result.xds)
        lap("xds_snapshot")
        rows.append(lap.laps)
    return {k: round(statistics.median(r[k] * 1000 for r in rows), 3) for k in CHANGE}


def line_profile(pipeline: Pipeline, names: list[str]) -> str:
    """line_profiler's report of the functions ``names`` (``package.module.function`` or
    ``package.module.Class.method``) over one full translation."""
    import importlib
    import io

    from line_profiler import LineProfiler

    from gateweave import native
    from gateweave.translate import translate

    if native.state() == "active":
        raise SystemExit("--lines traces Python code: run with GATEWEAVE_NATIVE=0")
    profiler = LineProfiler()
    for name in names:
        parts = name.split(".")
        obj: object = None
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            break
        if not callable(obj):
            raise SystemExit(f"--lines {name}: not a function")
        profiler.add_function(obj)
    snap = pipeline.store.snapshot()
    translate(snap)  # warm the memos that outlive a translation, as the timed ones find them
    with gc_paused():
        profiler.enable_by_count()
        translate(snap)
        profiler.disable_by_count()
    out = io.StringIO()
    profiler.print_stats(stream=out, output_unit=1e-3)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.split", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--routes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--policies", type=float, default=0.0, metavar="FRACTION")
    parser.add_argument("--changes", type=int, default=21, help="changes timed per kind")
    parser.add_argument("--lines", action="append", default=[], metavar="MODULE.FUNCTION")
    args = parser.parse_args(argv)
    objects = generate(args.routes, args.seed, args.policies)
    pipeline = Pipeline(decode_all(objects.manifests), TranslateOptions())
    if args.lines:
        print(line_profile(pipeline, args.lines))
        return 0
    full = full_split(pipeline, args.repeat)
    report: dict[str, Any] = {
        "routes": args.routes,
        "policies": args.policies,
        "full_translation_s": full,
    }
    for row, change, count in CHANGES:
        if count(objects):
            report[row] = change_split(pipeline, objects, args.changes, change, count(objects))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
