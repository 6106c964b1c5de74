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

Each cold start needs an API server that has never seen gateweave (a second start would
find every status written), so it is measured once per stand-in.
"""

from __future__ import annotations

import argparse
import asyncio
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

from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.translate.options import TranslateOptions
from gateweave_bench.objects import DEFAULT_SEED, generate

PAGE = 500  # items per list page, as the provider asks (gateweave.kube.client.KubeClient.list)
FIRST_WRITE_TIMEOUT = 900.0


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


def _decode_floor(bodies: Sequence[bytes], repeat: int) -> float:
    times = []
    for _ in range(max(1, repeat)):
        with gc_paused():
            started = time.perf_counter()
            for body in bodies:
                msgspec.json.decode(body)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


class _Clock:
    """Timestamps of the start: the first translation's start and end, the first write."""

    def __init__(self) -> None:
        self.translator = IncrementalTranslator()
        self.started: float | None = None  # serve running: every kind listed and stored
        self.translate_start: float | None = None
        self.translate_end: float | None = None
        self.written: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def translate(self, snapshot: Snapshot, options: TranslateOptions) -> Result:
        first = self.translate_start is None
        if first:
            self.translate_start = time.perf_counter()
        result = self.translator(snapshot, options)
        if first:
            self.translate_end = time.perf_counter()
        return result

    def on_write(self, _key: Key, _status: Mapping[str, Any]) -> None:
        if not self.written.done():
            self.written.set_result(time.perf_counter())


async def _cold_start(kubeconfig: Path) -> dict[str, float]:
    from gateweave import app

    clock = _Clock()
    stop = asyncio.Event()

    def on_started(running: app.App) -> None:
        clock.started = time.perf_counter()
        assert running.kube is not None
        running.kube.status_writer.on_write = clock.on_write

    settings = app.Settings(
        provider=app.KubeSettings(kubeconfig=str(kubeconfig)),
        dataplane=None,
        admin=app.AdminSettings("127.0.0.1:0", token="bench-kube-cold-start"),
    )
    hooks = app.Hooks(stop=stop, on_started=on_started, translator=clock.translate)
    started = time.perf_counter()
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
        stop.set()
        await asyncio.wait_for(task, 60)
    written = clock.written.result()
    assert clock.started is not None
    assert clock.translate_start is not None and clock.translate_end is not None
    return {
        "kube_cold_start_s": round(written - started, 4),
        "list": round(clock.started - started, 4),
        "translate": round(clock.translate_end - clock.translate_start, 4),
        "status": round(written - clock.translate_end, 4),
    }


def cold_start(kubeconfig: Path, repeat: int) -> dict[str, Any]:
    """In a fresh process: the cold start against the stand-in of ``kubeconfig``, its splits,
    and the decoding floor of the lists it read."""
    bodies = asyncio.run(_list_bodies(kubeconfig))
    figures = asyncio.run(_cold_start(kubeconfig))
    cold = figures.pop("kube_cold_start_s")
    return {
        "kube_cold_start_s": cold,
        "kube_list_decode_s": round(_decode_floor(bodies, max(5, repeat)), 4),
        "splits": figures,
        "list_bytes": sum(len(b) for b in bodies),
        "list_pages": len(bodies),
    }


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.kubecold",
        description="The API-server stand-in of the Kubernetes cold start (gateweave bench).",
    )
    parser.add_argument("--standin", type=int, metavar="ROUTES", required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--policies", type=float, default=0.0)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(_serve_standin(args.standin, args.seed, args.policies, args.kubeconfig))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
