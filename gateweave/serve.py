"""``gateweave serve``: store + file provider + runtime + status sink + admin API, wired."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import structlog

from gateweave import DEFAULT_CONTROLLER_NAME, native
from gateweave.admin import DEFAULT_ADMIN_ADDRESS, AdminServer
from gateweave.metrics import Metrics
from gateweave.providers import ErrorBook
from gateweave.providers.file import FileProvider
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks import StatusSink
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.options import TranslateOptions

if TYPE_CHECKING:
    from gateweave.kube.wiring import KubeSettings, KubeSource

log = structlog.get_logger("gateweave.serve")

# Attaches the data plane to a runtime (runtime.attach(xds_sink=..., infra_sink=...), and
# reports back through runtime.set_dataplane_state) for the duration of the context.
DataplaneSetup = Callable[[Runtime], AbstractAsyncContextManager[Any]]


async def serve(
    config_dir: str,
    admin_address: str = DEFAULT_ADMIN_ADDRESS,
    controller_name: str = DEFAULT_CONTROLLER_NAME,
    dataplane: bool = True,
    *,
    address_pool: str = "127.10.0.0/16",
    dataplane_setup: DataplaneSetup | None = None,
    translate_fn: TranslateFn | None = None,
    window: float = 0.05,
    max_delay: float = 0.5,
    debounce_ms: int = 50,
    stop: asyncio.Event | None = None,
    on_started: Callable[[Runtime, AdminServer], None] | None = None,
    kube: KubeSettings | None = None,
    on_kube: Callable[[KubeSource], None] | None = None,
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set), then shut down cleanly.

    With ``dataplane=False`` nothing is published to xDS or infra sinks and translate is
    told there is no data plane (a valid Gateway counts as Programmed).

    With ``kube`` the objects come from the Kubernetes API server instead of
    ``config_dir`` (ignored), and statuses are written through the status subresource.
    """
    if kube is None and not os.path.isdir(config_dir):
        raise FileNotFoundError(f"config directory {config_dir!r} does not exist")
    stop = stop or asyncio.Event()
    metrics = Metrics()
    errors = ErrorBook()
    errors.subscribe(metrics.config_errors.set)
    store = Store()
    source: KubeSource | None = None
    status_sink: StatusSink
    if kube is not None:
        from gateweave.kube.wiring import KubeSource

        source = await KubeSource.open(kube, store, errors, controller_name, metrics)
        await source.sync()  # the first translation sees every listed object
        status_sink = source.status_writer
        if dataplane and dataplane_setup is None and kube.kube_dataplane:
            dataplane_setup = source.dataplane_setup()
        if on_kube is not None:
            on_kube(source)
    else:
        provider = FileProvider(config_dir, store, errors, debounce_ms=debounce_ms)
        await provider.refresh()  # the first translation sees the whole directory (read off the loop)
        status_sink = LocalStatusSink(controller_name, metrics=metrics)
    runtime = Runtime(
        store,
        translate_fn=translate_fn,
        # The Kubernetes data plane: listeners bind 0.0.0.0 in pods, addresses come from Services.
        options=TranslateOptions(
            controller_name=controller_name,
            address_pool=address_pool,
            address_mode="kubernetes" if kube is not None and kube.kube_dataplane and dataplane else "standalone",
        ),
        status_sink=status_sink,
        dataplane=dataplane,
        window=window,
        max_delay=max_delay,
        metrics=metrics,
        gc_freeze=True,  # the server's one runtime (see Runtime.gc_freeze)
    )
    admin = AdminServer(runtime, errors, admin_address)

    loop = asyncio.get_running_loop()
    signals: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            signals.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread: the caller stops us through ``stop``

    tasks: list[asyncio.Task[None]] = []
    try:
        await admin.start()
        log.info("admin API listening", url=admin.url)
        # Whether the translation runs compiled (gateweave.native) or from its Python sources.
        log.info("translation", compiled=native.state() == "active", native_build=native.state())
        setup: AbstractAsyncContextManager[Any] = (
            dataplane_setup(runtime) if dataplane and dataplane_setup is not None else contextlib.nullcontext()
        )
        async with setup:
            tasks = [asyncio.create_task(runtime.run(), name="gateweave-runtime")]
            if source is not None:
                tasks += [asyncio.create_task(c, name="gateweave-kubernetes") for c in source.tasks()]
            else:
                tasks.append(asyncio.create_task(provider.run(), name="gateweave-file-provider"))
            if on_started is not None:
                on_started(runtime, admin)
            stopper = asyncio.create_task(stop.wait(), name="gateweave-stop")
            done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            for task in tasks:
                if task in done and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            log.info("shutting down")
            await _cancel(tasks)
    finally:
        await _cancel(tasks)
        await admin.stop()
        runtime.close()
        if source is not None:
            await source.close()
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
