"""Event -> Envoy serving: how long a route change takes to reach clients through Envoy.

``serve`` runs (in this process, with a real Envoy) on a directory holding one Gateway
and ``routes`` HTTPRoutes (each its own hostname, path and file) to one backend. Once
every route answers, one route at a time is changed (the value of a response header it
sets), and a client polling that route on fresh connections (every ``--poll-ms``, 0.5 ms)
times when the new value comes back. Two sources of change are measured:

* ``file``: the route's file is rewritten; the clock starts just before the write, so the
  figure includes the file watch (debounce) delay;
* ``store``: the changed object is applied to the runtime's store directly (what the
  file provider does once it has read the file), bypassing watchfiles: the event proper.

Each sample is split by timestamps taken in the process (one monotonic clock):
``watch`` (write -> store event), ``coalesce`` (store event -> translation start: the
runtime's quiet window), ``translate``, ``publish`` (translation end -> the xDS snapshot
set: statuses, Envoy resources built and versioned), ``envoy_ack`` (snapshot set -> Envoy
ACKed it) and ``client`` (ACK -> the client saw the change; negative when the client saw
it before the ACK arrived). ``total`` is source -> client. ``envoy_cpu`` is not a time
split but the CPU time Envoy's main thread used during the sample (decoding, checking and
building the new route table, freeing the old one): what the machine's load does not
inflate. Per mode the report also gives
Envoy's own time applying RDS updates (``envoy_rds_update_ms``: its ``update_duration``
histogram, cumulative) and the bytes of the RouteConfiguration each change pushes
(``route_bytes``): what grows with the routes on Envoy's side; and the xDS responses sent
per change, by resource type (``pushes_per_change``: a route change re-sends the
RouteConfiguration alone).

Before that, the start: ``cold_start_s`` is the time from starting ``serve`` on the files
to Envoy serving the last route; ``yaml_floor_s`` the time to read and parse the same files
with the C YAML loader alone (what no start can beat); ``startup_s`` the time until every
route has answered once (the clients' pass over the routes included).

    python -m gateweave_bench.latency --routes 1000 --samples 50 [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateweave import logs
from gateweave.api.decode import decode
from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.infra.host import free_port
from gateweave.ir import Result, XdsGateway
from gateweave.snapshot import Snapshot
from gateweave.store import Change
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.translate.options import TranslateOptions
from gateweave.xds.server import NodeStatus
from gateweave.xds.snapshot_cache import ROUTE, short_type
from gateweave_bench import harness as h

GATEWAY = "default/bench"
ADDRESS = "127.40.200.1"
HEADER = "x-bench-version"
SPLITS = ("watch", "coalesce", "translate", "publish", "envoy_ack", "client", "total", "envoy_cpu")


def route_doc(i: int, version: int) -> dict[str, Any]:
    rule = h.rule(f"/r{i}", [h.backend_ref("backend", 80)], headers={HEADER: str(version)})
    return h.http_route(f"r{i:05d}", "bench", [f"r{i}.bench.test"], [rule])


@dataclass
class _Clock:
    """Timestamps the control plane leaves on its way, for the route being changed."""

    watched: Key | None = None
    event: float | None = None
    translate_start: float | None = None
    translate_end: float | None = None
    published: float | None = None
    acked: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _translator: IncrementalTranslator = field(
        default_factory=IncrementalTranslator
    )  # as the runtime's default

    def arm(self, key: Key) -> None:
        with self._lock:
            self.watched = key
            self.event = self.translate_start = self.translate_end = self.published = self.acked = (
                None
            )

    def on_change(self, change: Change) -> None:
        if change.key == self.watched and self.event is None:
            self.event = time.perf_counter()

    def translate(self, snapshot: Snapshot, options: TranslateOptions) -> Result:
        started = time.perf_counter()
        result = self._translator(snapshot, options)
        ended = time.perf_counter()
        with self._lock:
            if self.event is not None and self.translate_start is None and started >= self.event:
                self.translate_start, self.translate_end = started, ended
        return result

    def on_published(self) -> None:
        if self.translate_end is not None and self.published is None:
            self.published = time.perf_counter()

    def on_status(self, node: str, status: NodeStatus) -> None:
        if node == GATEWAY and status.acked and self.published is not None and self.acked is None:
            self.acked = time.perf_counter()


class _GcPauses:
    """Garbage collections and their pauses, inside a ``with``."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started: float | None = None

    def __enter__(self) -> _GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.pauses.append((info["generation"], (time.perf_counter() - self._started) * 1000))
            self._started = None

    def summary(self) -> dict[str, float]:
        full = [ms for gen, ms in self.pauses if gen == 2]
        return {
            "collections": len(self.pauses),
            "total_ms": round(sum(ms for _, ms in self.pauses), 1),
            "gen2_collections": len(full),
            "gen2_max_ms": round(max(full, default=0.0), 1),
        }


def _poll(
    address: str, port: int, path: str, host: str, want: str, timeout: float, every: float = 0.0005
) -> float | None:
    """Fetch on fresh connections, ``every`` seconds apart, until the header has ``want``; when
    it did (None: never)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        reply = h.fetch_sync(address, port, path, host, timeout=1.0)
        if reply is not None and reply.headers.get(HEADER) == want:
            return time.perf_counter()
        time.sleep(every)
    return None


def yaml_floor(root: Path) -> float:
    """Seconds to read and parse every manifest file under ``root`` with the C YAML loader
    alone (libyaml's ``CSafeLoader``, the collector paused): the floor of any start."""
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    files = sorted(root.glob("*.yaml"))
    with gc_paused():
        started = time.perf_counter()
        for path in files:
            list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader))
        return time.perf_counter() - started


def envoy_rds_update_ms(admin: str) -> dict[str, float]:
    """Envoy's own time applying RDS updates (its ``rds.*.update_duration`` histogram,
    cumulative since it started: P50/P99 in ms); {} when Envoy does not report it."""
    url = f"http://{admin}/stats?filter=rds\\..*update_duration"
    try:
        with urllib.request.urlopen(url, timeout=5.0) as reply:
            text = reply.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for part in text.split():
        for q in ("P50", "P99"):
            if part.startswith(q + "("):
                cumulative = part[len(q) + 1 : -1].split(",")[-1]
                if cumulative != "nan":
                    out[q.lower()] = float(cumulative)
    return out


def xds_pushes(served: h.Served) -> dict[str, float]:
    """xDS responses sent so far, by resource type (short name): the runtime's
    ``gateweave_xds_pushes`` counter."""
    out: dict[str, float] = {}
    for metric in served.runtime.metrics.registry.collect():
        if metric.name == "gateweave_xds_pushes":
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    out[short_type(sample.labels["type_url"])] = sample.value
    return out


def main_thread_cpu_ms(pid: int | None) -> float | None:
    """CPU time Envoy's main thread (where xDS updates are applied) has used, in ms, from its
    scheduler statistics; ``None`` without them. Unlike wall times, it does not grow with the
    machine's load (what other processes run meanwhile)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def route_bytes(served: h.Served) -> int:
    """Bytes of the bench Gateway's RouteConfigurations as served (what an RDS push carries)."""
    snapshot = served.xds.server.snapshot(GATEWAY)
    if snapshot is None:
        return 0
    return sum(len(r.body.value) for r in snapshot.of(ROUTE).values())


def _split(start: float, clock: _Clock, seen: float, watch: bool) -> dict[str, float]:
    ms: dict[str, float] = {}

    def put(name: str, a: float | None, b: float | None) -> None:
        if a is not None and b is not None:
            ms[name] = (b - a) * 1000

    if watch:
        put("watch", start, clock.event)
    put("coalesce", clock.event, clock.translate_start)
    put("translate", clock.translate_start, clock.translate_end)
    put("publish", clock.translate_end, clock.published)
    put("envoy_ack", clock.published, clock.acked)
    put("client", clock.acked, seen)
    put("total", start, seen)
    return ms


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per split: p50, p99, max and mean in ms (over the samples that have it)."""
    out: dict[str, dict[str, float]] = {}
    for name in SPLITS:
        values = [s[name] for s in samples if name in s]
        if values:
            out[name] = {
                "p50": round(_percentile(values, 0.50), 2),
                "p99": round(_percentile(values, 0.99), 2),
                "max": round(max(values), 2),
                "mean": round(statistics.fmean(values), 2),
                "n": len(values),
            }
    return out


async def _sample(
    served: h.Served,
    clock: _Clock,
    root: Path,
    port: int,
    mode: str,
    i: int,
    version: int,
    timeout: float,
    poll: float,
) -> dict[str, float]:
    """Change route ``i`` to ``version`` (its file, or the store) and time it to the client."""
    doc = route_doc(i, version)
    clock.arm(Key("HTTPRoute", "default", doc["metadata"]["name"]))
    await asyncio.sleep(0.05)
    process = served.infra.process(GATEWAY)
    pid = process.pid if process is not None else None
    cpu_before = main_thread_cpu_ms(pid)
    poller = asyncio.create_task(
        asyncio.to_thread(
            _poll, ADDRESS, port, f"/r{i}", f"r{i}.bench.test", str(version), timeout, poll
        )
    )
    if mode == "file":
        start = time.perf_counter()
        h.write_manifests(root / f"route-{i:05d}.yaml", [doc])
    else:
        decoded, errors = decode(doc, f"bench:r{i}")
        if decoded is None:
            raise ValueError(errors)
        start = time.perf_counter()
        served.runtime.store.apply(decoded, source=f"bench:r{i}")
    seen = await poller
    if seen is None:
        raise TimeoutError(f"{mode} change of r{i} not served within {timeout} s")
    await served.runtime.wait_settled(timeout)
    await asyncio.sleep(0.05)  # a late ACK still lands in this sample's clock
    split = _split(start, clock, seen, mode == "file")
    cpu_after = main_thread_cpu_ms(pid)
    if cpu_before is not None and cpu_after is not None:
        split["envoy_cpu"] = cpu_after - cpu_before
    return split


async def _measure(
    routes: int,
    samples: int,
    modes: Sequence[str],
    window: float,
    debounce_ms: int,
    timeout: float,
    gc_freeze: bool,
    poll: float,
) -> dict[str, Any]:
    backend = h.NameServer("backend")
    port = free_port(ADDRESS)
    clock = _Clock()
    report: dict[str, Any] = {
        "routes": routes,
        "samples": samples,
        "window_ms": window * 1000,
        "debounce_ms": debounce_ms,
        "poll_ms": poll * 1000,
        "gateway": f"{ADDRESS}:{port}",
    }
    try:
        with tempfile.TemporaryDirectory(prefix="gateweave-bench-") as tmp:
            root = Path(tmp)
            h.write_manifests(
                root / "base.yaml",
                [
                    h.gateway_class(),
                    h.gateway("bench", ADDRESS, [h.listener("http", "HTTP", port)]),
                    *h.service("backend", 80, backend.port),
                ],
            )
            for i in range(routes):
                h.write_manifests(root / f"route-{i:05d}.yaml", [route_doc(i, 0)])
            report["yaml_floor_s"] = round(yaml_floor(root), 4)
            started = time.perf_counter()
            # (reading, checking and translating the routes at start grows with their number)
            async with h.running_serve(
                root,
                translator=clock.translate,
                window=window,
                debounce_ms=debounce_ms,
                start_timeout=10.0 + routes / 100,
            ) as served:
                served.runtime.store.subscribe(clock.on_change)
                publisher = served.xds
                update = publisher.update

                def publish(changed: Mapping[str, XdsGateway], removed: Sequence[str]) -> None:
                    update(changed, removed)
                    clock.on_published()

                publisher.update = publish  # type: ignore[method-assign]
                publisher.server.on_status(clock.on_status)

                # Cold start: serve started on the files -> Envoy serves the last route.
                last = routes - 1
                got = await asyncio.to_thread(
                    _poll,
                    ADDRESS,
                    port,
                    f"/r{last}",
                    f"r{last}.bench.test",
                    "0",
                    timeout + routes / 100,
                )
                if got is None:
                    raise TimeoutError(
                        f"route r{last} not served within {timeout + routes / 100} s of the start"
                    )
                report["cold_start_s"] = round(got - started, 3)
                # Every route answers (one pass, in order).
                for i in range(routes):
                    got = await asyncio.to_thread(
                        _poll, ADDRESS, port, f"/r{i}", f"r{i}.bench.test", "0", timeout
                    )
                    if got is None:
                        raise TimeoutError(f"route r{i} not served within {timeout} s")
                report["startup_s"] = round(time.perf_counter() - started, 2)
                if gc_freeze:
                    gc.collect()
                    gc.freeze()  # what is alive now is never scanned again
                report["gc_freeze"] = gc_freeze
                translations = served.runtime.translations

                version = 0
                for mode in modes:
                    measured: list[dict[str, float]] = []
                    pushed = xds_pushes(served)
                    with _GcPauses() as pauses:
                        for n in range(samples):
                            version += 1
                            i = (n * 7919) % routes  # spread over the routes
                            measured.append(
                                await _sample(
                                    served, clock, root, port, mode, i, version, timeout, poll
                                )
                            )
                    admin = served.infra.admin_addresses().get(GATEWAY, "")
                    report[mode] = {
                        "summary": summarize(measured),
                        "gc": pauses.summary(),
                        # Envoy's own RDS update time (cumulative) and what one push carries
                        "envoy_rds_update_ms": await asyncio.to_thread(envoy_rds_update_ms, admin),
                        "route_bytes": route_bytes(served),
                        # xDS responses sent per change, by type (what each change re-sends)
                        "pushes_per_change": {
                            kind: round((count - pushed.get(kind, 0.0)) / samples, 2)
                            for kind, count in xds_pushes(served).items()
                            if count > pushed.get(kind, 0.0)
                        },
                        "samples": measured,
                    }
                report["translations"] = served.runtime.translations - translations
    finally:
        backend.close()
    return report


def measure_event_to_envoy(
    routes: int = 1000,
    samples: int = 50,
    *,
    modes: Sequence[str] = ("store", "file"),
    window: float = 0.05,
    debounce_ms: int = 50,
    timeout: float = 30.0,
    gc_freeze: bool = False,
    poll: float = 0.0005,
) -> dict[str, Any]:
    """Run the benchmark (its own event loop, Envoy and backend); the report as a dict:
    per mode (``store``, ``file``) a ``summary`` (split -> p50/p99/max/mean ms) and the
    raw ``samples``. ``gc_freeze``: ``gc.freeze()`` once every route is served (an
    experiment: full collections then skip the objects of the initial load). ``poll``: the
    seconds between the client's fetches of a changed route (each on a fresh connection,
    answered by Envoy's workers, which share the CPUs with its main thread applying the
    change)."""
    for mode in modes:
        if mode not in ("store", "file"):
            raise ValueError(f"unknown mode {mode!r}")
    try:
        return asyncio.run(
            _measure(routes, samples, modes, window, debounce_ms, timeout, gc_freeze, poll)
        )
    finally:
        if gc_freeze:
            gc.unfreeze()


def _table(report: Mapping[str, Any], out: Callable[[str], None]) -> None:
    out(
        f"{report['routes']} routes, {report['samples']} samples per mode; window "
        f"{report['window_ms']:.0f} ms, "
        f"file debounce {report['debounce_ms']} ms; client polls every "
        f"{report['poll_ms']:g} ms; cold start (last route served) "
        f"{report['cold_start_s']} s, "
        f"YAML floor {report['yaml_floor_s']} s; startup (all routes served) {report['startup_s']} "
        "s" + ("; gc.freeze() after startup" if report.get("gc_freeze") else "")
    )
    for mode in ("store", "file"):
        if mode not in report:
            continue
        source = "store event" if mode == "store" else "file write"
        out(f"\n{mode}: {source} -> client sees the change through Envoy (ms)")
        out(f"  {'split':<10} {'p50':>8} {'p99':>8} {'max':>8} {'mean':>8}")
        for name, s in report[mode]["summary"].items():
            out(
                f"  {name:<10} {s['p50']:>8.1f} {s['p99']:>8.1f} {s['max']:>8.1f} {s['mean']:>8.1f}"
            )
        rds = report[mode].get("envoy_rds_update_ms") or {}
        out(
            f"  Envoy's RDS update (its update_duration, cumulative): p50 {rds.get('p50', '-')} "
            f"ms, p99 {rds.get('p99', '-')} ms; RouteConfiguration pushed: "
            f"{report[mode].get('route_bytes', 0):,} bytes"
        )
        pushes = report[mode].get("pushes_per_change") or {}
        out(
            "  xDS responses sent per change: "
            + (", ".join(f"{kind} {n:g}" for kind, n in sorted(pushes.items())) or "none")
        )
        g = report[mode]["gc"]
        out(
            f"  gc: {g['collections']} collections, {g['total_ms']:.0f} ms in all; "
            f"{g['gen2_collections']} full ones, the longest {g['gen2_max_ms']:.0f} ms"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.latency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--mode", choices=("both", "store", "file"), default="both")
    parser.add_argument(
        "--window", type=float, default=0.05, help="the runtime's quiet window, seconds"
    )
    parser.add_argument("--debounce-ms", type=int, default=50, help="the file provider's debounce")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--poll-ms",
        type=float,
        default=0.5,
        help="milliseconds between the client's fetches of the changed route",
    )
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() once every route is served"
    )
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    parser.add_argument("--log-level", default="warning", choices=logs.LEVELS)
    args = parser.parse_args(argv)
    logs.configure(args.log_level)
    modes = ("store", "file") if args.mode == "both" else (args.mode,)
    report = measure_event_to_envoy(
        args.routes,
        args.samples,
        modes=modes,
        window=args.window,
        debounce_ms=args.debounce_ms,
        timeout=args.timeout,
        gc_freeze=args.gc_freeze,
        poll=args.poll_ms / 1000,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _table(report, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
