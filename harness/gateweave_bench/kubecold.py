"""The Kubernetes provider's cold start: ``gateweave serve`` against an API server holding the
benchmark's objects, from its start to its first status write.

The API-server stand-in (:mod:`gateweave_bench.kubeapi`) runs in a process of its own
(``python -m gateweave_bench.kubecold --standin N``), filled with the objects of
:func:`gateweave_bench.objects.generate`, so that the measuring process does only what
gateweave does against a real API server. The measuring process (a fresh one,
``python -m gateweave_bench.run --kube-cold N``) then

1. reads every list body the provider will read (the same requests: each served kind, every
   namespace, 500 items a page), as bytes;
2. starts ``serve`` with the Kubernetes provider (no data plane: statuses only) and times
   it until the status sink's first successful write (``kube_cold_start_s``): loading the
   kubeconfig, discovery, the paged lists of every kind, decoding and storing each object,
   the first translation, the statuses computed and the first one written. The splits say
   where the time went: ``list`` (start -> every kind listed and stored), ``translate``
   (the first translation) and ``status`` (its end -> the first write);
3. decodes those bytes with ``msgspec.json.decode``, the collector paused, as
   ``decode_s`` does (``kube_list_decode_s``, the median of several passes): the floor.

Beside the wall times, the same splits in CPU seconds of the measuring process
(``time.process_time()``: ``serve``'s threads, which the machine's load inflates much less
than wall time), as ``cpu``. With ``GATEWEAVE_BENCH_KUBE_PROFILE=PATH`` in its environment
the measuring process also profiles the start (cProfile: the event loop's thread from the
start to the first write - discovery, the lists, decoding and storing, the statuses' merge,
the first write - and the translation's worker thread during the first translation) and
writes the two profiles, added together, to ``PATH`` (``python -m pstats PATH``).

Each cold start needs an API server that has never seen gateweave (a second start would
find every status written), so it is measured once per stand-in.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import yaml

import gateweave
from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.translate.options import TranslateOptions
from gateweave_bench.objects import DEFAULT_SEED, generate

PAGE = 500  # items per list page, as the provider asks (gateweave.kube.client.KubeClient.list)
FIRST_WRITE_TIMEOUT = 900.0
PROFILE_ENV = "GATEWEAVE_BENCH_KUBE_PROFILE"


class ColdStartError(Exception):
    """The cold start did not reach its first status write."""


# ---------------------------------------------------------------- the stand-in's process


async def _serve_standin(routes: int, seed: int, policies: float, kubeconfig: Path) -> None:
    from gateweave_bench.kubeapi import KubeAPI, write_kubeconfig

    api = KubeAPI(history=100)
    for manifest in generate(routes, seed, policies).manifests:
        api.put(manifest)
    await api.start()
    write_kubeconfig(api, str(kubeconfig))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # until the parent closes our stdin
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await api.stop()


class Standin:
    """The stand-in's process, holding the objects for ``routes`` routes, for a ``with``."""

    def __init__(self, routes: int, seed: int, policies: float) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="gateweave-kubecold-")
        self.kubeconfig = Path(self._dir.name) / "kubeconfig"
        args = ["--standin", str(routes), "--seed", str(seed), "--policies", str(policies)]
        args += ["--kubeconfig", str(self.kubeconfig)]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gateweave_bench.kubecold", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __enter__(self) -> Standin:
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            self.__exit__()
            raise ColdStartError("the API-server stand-in did not start")
        return self

    def __exit__(self, *_: object) -> None:
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        finally:
            self._dir.cleanup()


# ---------------------------------------------------------------- the measuring process


async def _list_bodies(kubeconfig: Path) -> list[bytes]:
    """The body of every list page the provider reads at its start, as served."""
    from gateweave.kube.client import KubeClient
    from gateweave.providers.kubernetes import discover

    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        paths = await discover(client)
    finally:
        await client.close()
    bodies: list[bytes] = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
        for kind in sorted(paths):
            query: dict[str, Any] = {"limit": PAGE}
            while True:
                url = server + paths[kind].collection()
                async with session.get(url, params=query) as reply:
                    reply.raise_for_status()
                    body = await reply.read()
                bodies.append(body)
                token_ = (msgspec.json.decode(body).get("metadata") or {}).get("continue")
                if not token_:
                    break
                query = {"limit": PAGE, "continue": token_}
    return bodies


def _decode_floor(bodies: Sequence[bytes], repeat: int) -> tuple[float, float]:
    """The median (wall, CPU) seconds of decoding ``bodies``."""
    walls, cpus = [], []
    for _ in range(max(1, repeat)):
        with gc_paused():
            wall, cpu = _now()
            for body in bodies:
                msgspec.json.decode(body)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def _now() -> tuple[float, float]:
    """(wall, CPU seconds of this process)."""
    return time.perf_counter(), time.process_time()


class _Collections:
    """The cyclic collector's passes during the start (``gc.callbacks``): how many of each
    generation, and their wall seconds, until :meth:`stop`."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.full: list[tuple[float, float]] = []  # each full pass: (its start, its seconds)
        self._zero = self._began = time.perf_counter()
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        self.count[info["generation"]] += 1
        self.seconds[info["generation"]] += took
        if info["generation"] == 2:
            self.full.append((round(self._began - self._zero, 3), round(took, 3)))

    def stop(self) -> dict[str, Any]:
        gc.callbacks.remove(self._callback)
        seconds = [round(s, 4) for s in self.seconds]
        return {"count": self.count, "seconds": seconds, "full_at": self.full}


class _Clock:
    """Timestamps (wall, CPU) of the start: every kind listed, the first translation's start
    and end, the first write; with ``profile``, the first translation profiled apart (it
    runs in a worker thread, which the loop thread's profiler does not see)."""

    def __init__(self, profile: bool) -> None:
        self.translator = IncrementalTranslator()
        self.started: tuple[float, float] | None = None  # every kind listed and stored
        self.translate_start: tuple[float, float] | None = None
        self.translate_end: tuple[float, float] | None = None
        self.written: asyncio.Future[tuple[float, float]] = (
            asyncio.get_running_loop().create_future()
        )
        self.profile = cProfile.Profile() if profile else None

    def translate(self, snapshot: Snapshot, options: TranslateOptions) -> Result:
        first = self.translate_start is None
        if not first:
            return self.translator(snapshot, options)
        self.translate_start = _now()
        if self.profile is not None:
            self.profile.enable()
        try:
            return self.translator(snapshot, options)
        finally:
            if self.profile is not None:
                self.profile.disable()
            self.translate_end = _now()

    def on_write(self, _key: Key, _status: Mapping[str, Any]) -> None:
        if not self.written.done():
            self.written.set_result(_now())


async def _cold_start(kubeconfig: Path, profile: Path | None = None) -> dict[str, Any]:
    from gateweave import app

    clock = _Clock(profile is not None)
    stop = asyncio.Event()
    loop_profile = cProfile.Profile() if profile is not None else None

    def on_started(running: app.App) -> None:
        clock.started = _now()
        assert running.kube is not None
        running.kube.status_writer.on_write = clock.on_write

    settings = app.Settings(
        provider=app.KubeSettings(kubeconfig=str(kubeconfig)),
        dataplane=None,
        admin=app.AdminSettings("127.0.0.1:0", token="bench-kube-cold-start"),
    )
    hooks = app.Hooks(stop=stop, on_started=on_started, translator=clock.translate)
    if loop_profile is not None:
        loop_profile.enable()
    collections = _Collections()
    started = _now()
    task = asyncio.create_task(app.run(settings, hooks))
    try:
        waiters: list[asyncio.Future[Any]] = [task, clock.written]
        done, _ = await asyncio.wait(
            waiters, timeout=FIRST_WRITE_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if task in done:
            task.result()  # raises what serve raised
            raise ColdStartError("serve returned before its first status write")
        if clock.written not in done:
            raise ColdStartError(f"no status written within {FIRST_WRITE_TIMEOUT} s")
    finally:
        gc_passes = collections.stop()
        if loop_profile is not None:
            loop_profile.disable()
        stop.set()
        await asyncio.wait_for(task, 60)
    written = clock.written.result()
    assert clock.started is not None
    assert clock.translate_start is not None and clock.translate_end is not None
    if profile is not None:
        assert loop_profile is not None and clock.profile is not None
        stats = pstats.Stats(loop_profile)
        stats.add(clock.profile)
        stats.dump_stats(str(profile))

    def splits(at: int) -> dict[str, float]:
        assert clock.started is not None
        assert clock.translate_start is not None and clock.translate_end is not None
        return {
            "total": round(written[at] - started[at], 4),
            "list": round(clock.started[at] - started[at], 4),
            "translate": round(clock.translate_end[at] - clock.translate_start[at], 4),
            "status": round(written[at] - clock.translate_end[at], 4),
        }

    return {"wall": splits(0), "cpu": splits(1), "gc": gc_passes}


def cold_start(kubeconfig: Path, repeat: int) -> dict[str, Any]:
    """In a fresh process: the cold start against the stand-in of ``kubeconfig``, its splits
    (wall and CPU seconds), and the decoding floor of the lists it read."""
    bodies = asyncio.run(_list_bodies(kubeconfig))
    profile = os.environ.get(PROFILE_ENV)
    figures = asyncio.run(_cold_start(kubeconfig, Path(profile) if profile else None))
    wall = figures["wall"]
    decode_wall, decode_cpu = _decode_floor(bodies, max(5, repeat))
    return {
        "kube_cold_start_s": wall.pop("total"),
        "kube_list_decode_s": round(decode_wall, 4),
        "splits": wall,
        "cpu": {**figures["cpu"], "decode": round(decode_cpu, 4)},
        "gc": figures["gc"],
        "list_bytes": sum(len(b) for b in bodies),
        "list_pages": len(bodies),
        "gateweave": str(Path(gateweave.__file__).parent.parent),  # the tree measured
    }


def _run_child(kubeconfig: Path, tree: Path | None, repeat: int) -> dict[str, Any]:
    """``python -m gateweave_bench.run --kube-cold`` in a fresh process, importing gateweave
    from ``tree`` (a source checkout) when given, this harness either way. (Run in ``tree``:
    ``python -m`` puts the working directory first on the path, before PYTHONPATH.)"""
    env = dict(os.environ)
    cwd = None
    if tree is not None:
        harness = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([str(tree), harness])
        cwd = str(tree)
    from gateweave_bench.run import _child

    args = ["--kube-cold", str(kubeconfig), "--repeat", str(repeat)]
    answer: dict[str, Any] = _child(args, timeout=1800, env=env, cwd=cwd)
    return answer


def compare(
    routes: int, runs: int, trees: Sequence[Path | None], seed: int, repeat: int
) -> list[dict[str, Any]]:
    """``runs`` cold starts of each tree, the trees alternating, each against a fresh
    stand-in (of this harness); one record per start with the load average after it."""
    out = []
    for run in range(runs):
        for tree in trees:
            with Standin(routes, seed, 0.0) as standin:
                answer = _run_child(standin.kubeconfig, tree, repeat)
            record = {"run": run, "tree": str(tree or "."), **answer, "load": os.getloadavg()}
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()
            out.append(record)
    return out


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.kubecold",
        description="The Kubernetes cold start of gateweave bench: the API-server stand-in "
        "(--standin), or cold starts of source trees alternating (--routes), one JSON line "
        "each.",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--standin", type=int, metavar="ROUTES")
    what.add_argument("--routes", type=int, metavar="ROUTES")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--policies", type=float, default=0.0)
    parser.add_argument("--kubeconfig", type=Path, help="where the stand-in writes its own")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="passes of the decoding floor")
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="a source checkout to import gateweave from (repeat to alternate several; "
        "default: this process's gateweave)",
    )
    args = parser.parse_args(argv)
    if args.standin is not None:
        if args.kubeconfig is None:
            parser.error("--standin needs --kubeconfig")
        asyncio.run(_serve_standin(args.standin, args.seed, args.policies, args.kubeconfig))
        return 0
    compare(args.routes, args.runs, args.tree or [None], args.seed, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
