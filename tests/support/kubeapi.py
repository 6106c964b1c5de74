"""Running gateweave against the Kubernetes API stand-in (:mod:`gateweave_bench.kubeapi`,
which lives in the harness so that the benchmark can serve from it too; re-exported here)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from gateweave_bench.kubeapi import (
    ApiError,
    KubeAPI,
    Request,
    ResourceType,
    default_types,
    label_selector,
    write_kubeconfig,
)

__all__ = [
    "ApiError",
    "KubeAPI",
    "Request",
    "ResourceType",
    "default_types",
    "label_selector",
    "serving",
    "settle",
    "write_kubeconfig",
]


@contextlib.asynccontextmanager
async def serving(
    api: KubeAPI,
    kubeconfig: str,
    dataplane: Any = None,
    *,
    on_app: Callable[[Any], None] | None = None,
    **settings: Any,
) -> Any:
    """``gateweave serve --provider kubernetes`` in this event loop (``dataplane``: a
    ``gateweave.app.KubeDataplane``, else none; ``settings``: ``KubeSettings`` fields); yields
    (runtime, source); ``on_app`` is given the running ``gateweave.app.App`` (its admin API).
    Everything is stopped on exit."""
    from gateweave import app
    from tests.support.incremental_check import CHECK_INCREMENTAL

    stop = asyncio.Event()
    got: dict[str, Any] = {}
    started = asyncio.Event()

    def on_started(running: app.App) -> None:
        got["runtime"], got["source"] = running.runtime, running.kube
        if on_app is not None:
            on_app(running)
        started.set()

    settings.setdefault("backoff", (0.05, 0.5))
    config = app.Settings(
        provider=app.KubeSettings(kubeconfig=kubeconfig, **settings),
        dataplane=dataplane,
        admin=app.AdminSettings("127.0.0.1:0"),
        runtime=app.RuntimeSettings(check_incremental=CHECK_INCREMENTAL),
    )
    task = asyncio.create_task(app.run(config, app.Hooks(stop=stop, on_started=on_started)))
    try:
        done, _ = await asyncio.wait(
            [task, asyncio.create_task(started.wait())],
            timeout=60,  # a ceiling for a hang: starting took 12 s at load 12 on 2 cores
            return_when=asyncio.FIRST_COMPLETED,
        )
        if task in done:
            task.result()
        assert started.is_set(), "gateweave serve did not start"
        yield got["runtime"], got["source"]
    finally:
        stop.set()
        # Stopping takes well under a second; a serve still running after 10 s is a hang (a
        # task that lost its cancellation, say), and fails the test that showed it.
        done, _ = await asyncio.wait({task}, timeout=10)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=5)
            raise AssertionError(
                "gateweave serve did not stop within 10 s of being asked to"
                + ("" if task.done() else ", nor when cancelled")
            )
        task.result()


async def settle(api: KubeAPI, runtime: Any, source: Any, timeout: float = 10.0) -> None:
    """Wait until gateweave has seen everything the stand-in holds, translated it and
    written every status it wanted to (and has seen those writes too)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        target = api.rv
        while not source.provider.caught_up(target):
            if loop.time() > deadline:
                raise TimeoutError(f"the provider did not catch up with resourceVersion {target}")
            await asyncio.sleep(0.005)
        await runtime.wait_settled(max(0.1, deadline - loop.time()))
        await source.status_writer.wait_idle(max(0.1, deadline - loop.time()))
        if api.rv == target and not source.status_writer.busy:
            return
    raise TimeoutError("gateweave did not settle")
