"""Where the memory goes: the work of ``gateweave bench``'s memory probe (``rss_mb``), step by
step.

``python -m gateweave_bench.memory [--routes N] [--seed S] [--policies F] [--trace] [--top K]``
runs in this process what the probe runs (:func:`gateweave_bench.run.controller_state`) and
prints JSON:

* ``stages``: after each step (``objects``: the generated objects as JSON bytes; ``store``:
  each decoded and stored; ``translation``: the incremental translator's first result;
  ``xds``: every Gateway's versioned Envoy resources), the resident memory (``VmRSS``) and
  its peak so far (``VmHWM``), in MB. Without ``--trace`` the last ``VmHWM`` is ``rss_mb``.
* with ``--trace`` (tracemalloc: several times slower, and its own bookkeeping inflates the
  resident figures, so compare those only between runs without it), in MB of Python heap:
  ``traced`` per step; ``holders``, what each part of the kept state holds alone (freed by
  dropping it; dropped in the order xDS snapshots, result, translator, store, so what two
  share is charged to the later; ``left``: what outlives them all, the memos of modules);
  ``lines`` and ``files``, the top allocation sites of what is kept after the last step.
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from typing import Any

from gateweave_bench.objects import DEFAULT_SEED
from gateweave_bench.run import ControllerState, controller_state, vm_mb

MB = 1024 * 1024


def _traced_mb() -> float:
    return round(tracemalloc.get_traced_memory()[0] / MB, 2)


def _parts(state: ControllerState) -> dict[str, list[Any]]:
    """The kept state in the order :func:`_holders` drops it."""
    return {
        "xds_snapshots": [state.snapshots, state.nodes],
        "result": [state.result],
        "translator": [state.translator],
        "store": [state.store],
    }


def _holders(parts: dict[str, list[Any]]) -> dict[str, float]:
    """MB freed by dropping each of ``parts`` in turn (emptied: hold no other reference)."""
    out: dict[str, float] = {}
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for name in list(parts):
        del parts[name]
        gc.collect()
        now = tracemalloc.get_traced_memory()[0]
        out[name] = round((before - now) / MB, 3)
        before = now
    out["left"] = round(before / MB, 3)
    return out


def _top(snapshot: tracemalloc.Snapshot, by: str, top: int) -> list[dict[str, Any]]:
    stats = snapshot.statistics(by)
    return [
        {
            "where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}"
            if by == "lineno"
            else s.traceback[0].filename,
            "mb": round(s.size / MB, 2),
            "blocks": s.count,
        }
        for s in stats[:top]
    ]


def breakdown(
    routes: int, seed: int = DEFAULT_SEED, policies: float = 0.0, *, trace: bool, top: int = 25
) -> dict[str, Any]:
    """The figures described in the module's docstring."""
    stages: dict[str, dict[str, float | None]] = {}

    def stage(name: str) -> None:
        figures = {"rss_mb": vm_mb("VmRSS"), "peak_mb": vm_mb("VmHWM")}
        if trace:
            figures["traced_mb"] = _traced_mb()
        stages[name] = figures

    if trace:
        tracemalloc.start()
    stage("start")
    state = controller_state(routes, seed, policies, stage)
    out: dict[str, Any] = {"routes": routes, "traced": trace, "stages": stages}
    if trace:
        kept = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        out["lines"] = _top(kept, "lineno", top)
        out["files"] = _top(kept, "filename", top)
        del kept
        parts = _parts(state)
        del state
        out["holders"] = _holders(parts)
        tracemalloc.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.memory", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--routes", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--policies", type=float, default=0.0)
    parser.add_argument("--trace", action="store_true", help="tracemalloc: holders and sites")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    report = breakdown(args.routes, args.seed, args.policies, trace=args.trace, top=args.top)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
