"""The Kubernetes status sink's work per change: ``python -m gateweave_bench.kubestatus N``.

A store holding the benchmark's objects for ``N`` routes, a
:class:`~gateweave.sinks.kubestatus.KubeStatusSink` on it (no API server: a publication only
decides what to write), and every status it asks for written back into the store as the
API server's watch would deliver it. Then, alternating, with the collector paused as the
runtime publishes:

* ``unchanged_ms``: a publication of the same computed statuses (a change that changed no
  status, e.g. an endpoint moved);
* ``route_change_ms``: one route's spec changed (``objects.changed_route``: a new header
  value, so a new generation and a new status), translated incrementally, then published;
  only the publication is timed. Its one write is delivered back before the next change.

Each figure is the median of ``--changes`` publications, in milliseconds; the answer is
JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.sinks.kubestatus import KubeStatusSink
from gateweave.sinks.statusmerge import merge_status
from gateweave.store import Change, Store
from gateweave.translate import TranslateOptions
from gateweave.translate.incremental import IncrementalTranslator
from gateweave_bench.objects import DEFAULT_SEED, changed_route, generate

NOW = "2026-01-01T00:00:00Z"


def _decoded(raw: Mapping[str, Any]) -> Decoded:
    one, errors = decode(raw, "bench")
    if errors or one is None:
        raise SystemExit(f"generated object rejected: {errors}")
    return one


def delivered(store: Store, sink: KubeStatusSink, keys: Iterable[Key]) -> list[Change | None]:
    """What the API server's watch brings back after the sink's writes of ``keys`` (its
    statuses merged at :data:`NOW`, a new resourceVersion), applied to ``store``: the store's
    changes, in order (tests/kube/test_status.py uses it too)."""
    changes: list[Change | None] = []
    for key in map(Key._make, keys):
        stored = store.get(key)
        if stored is None:
            changes.append(None)
            continue
        raw = stored.raw
        meta = raw["metadata"]
        raw["status"] = merge_status(
            key.kind,
            raw.get("status"),
            sink._desired[key],
            sink.controller_name,
            NOW,
            namespace=key.namespace,
        )
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 1) + 1)
        changes.append(store.apply(Decoded(raw, stored.model), authoritative=True))
    return changes


def measure(routes: int, seed: int = DEFAULT_SEED, changes: int = 15) -> dict[str, Any]:
    objects = generate(routes, seed)
    store = Store()
    for raw in objects.manifests:
        store.apply(_decoded(raw), authoritative=True)
    options = TranslateOptions()
    translator = IncrementalTranslator()
    with gc_paused():
        result = translator(store.snapshot(), options)
    sink = KubeStatusSink(
        None,  # type: ignore[arg-type]  # (a publication reads the store only)
        store,
        lambda _kind: None,
        DEFAULT_CONTROLLER_NAME,
        clock=lambda: NOW,
    )
    delivered(store, sink, sink.publish(result.statuses))
    sink.publish(result.statuses)  # each delivered object looked at once more
    unchanged: list[float] = []
    changed: list[float] = []
    for i in range(changes):
        with gc_paused():
            started = time.perf_counter()
            sink.publish(result.statuses)
            unchanged.append(time.perf_counter() - started)
        store.apply(_decoded(changed_route(objects, i, 1_000 + i)), authoritative=True)
        with gc_paused():
            result = translator(store.snapshot(), options)
            started = time.perf_counter()
            queued = sink.publish(result.statuses)
            changed.append(time.perf_counter() - started)
        if len(queued) != 1:
            raise SystemExit(f"a route's change queued {len(queued)} status writes, not 1")
        delivered(store, sink, queued)
    return {
        "routes": routes,
        "statuses": len(result.statuses),
        "unchanged_ms": round(statistics.median(unchanged) * 1000, 3),
        "route_change_ms": round(statistics.median(changed) * 1000, 3),
        "loadavg": os.getloadavg()[0],
    }


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateweave_bench.kubestatus")
    parser.add_argument("routes", type=int)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--changes", type=int, default=15)
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(measure(args.routes, args.seed, max(1, args.changes))) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
