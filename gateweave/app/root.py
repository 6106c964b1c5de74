"""The composition root: ``gateweave serve`` built from one :class:`Settings`.

:func:`run` makes every part and plugs them together - the store, the provider (files or
the Kubernetes API), the translator, the processor (:class:`~gateweave.runtime.Runtime`)
with its status sink, the data plane with its xDS and infra sinks, the admin API - runs
them until SIGINT/SIGTERM (or ``hooks.stop``), then shuts everything down. Nothing else
decides which implementation of a part runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from gateweave import native
from gateweave.admin import AdminServer
from gateweave.app.dataplane import claim_state, dataplane
from gateweave.app.settings import FileSettings, KubeDataplane, Settings
from gateweave.errors import OperatorError
from gateweave.gcpause import gc_paused
from gateweave.infra import netenv
from gateweave.infra.statedir import StateDir
from gateweave.metrics import Metrics
from gateweave.providers import ErrorBook
from gateweave.providers.file import FileProvider
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks import StatusSink
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate.incremental import IncrementalTranslator

if TYPE_CHECKING:
    from gateweave.app.kube import KubeSource

log = structlog.get_logger("gateweave.app")


@dataclass(frozen=True)
class App:
    """The running parts, as :attr:`Hooks.on_started` is handed them."""

    settings: Settings
    runtime: Runtime
    admin: AdminServer
    kube: KubeSource | None  # the Kubernetes provider's parts (None: the file provider)


@dataclass(frozen=True)
class Hooks:
    """What a caller running gateweave inside its own event loop may plug in (the quickstart,
    the conformance runner, tests). The command line plugs in nothing."""

    stop: asyncio.Event | None = None  # set it to shut down (as SIGINT/SIGTERM do)
    on_started: Callable[[App], None] | None = (
        None  # once the admin API listens and the processor runs
    )
    # The translator (default: the incremental one, see RuntimeSettings.check_incremental).
    translator: TranslateFn | None = None


def translator(settings: Settings) -> TranslateFn:
    """The runtime's translator: a full translation's result for the work of what changed."""
    return IncrementalTranslator(check=settings.runtime.check_incremental)


async def run(settings: Settings, hooks: Hooks | None = None) -> None:
    """Run gateweave as ``settings`` say until stopped, then shut down cleanly."""
    hooks = hooks or Hooks()
    file = settings.provider if isinstance(settings.provider, FileSettings) else None
    if file is not None and not os.path.isdir(file.config_dir):
        what = "is not a directory" if os.path.exists(file.config_dir) else "does not exist"
        raise OperatorError(f"config directory {file.config_dir} {what}")
    state = claim_state(settings)
    try:
        await _run(settings, hooks, state)
    finally:
        if state is not None:
            state.close()


async def _run(settings: Settings, hooks: Hooks, state: StateDir | None) -> None:
    file = settings.provider if isinstance(settings.provider, FileSettings) else None
    # after the state directory's lock: a refused second serve must not replace the token
    token, token_path = settings.admin_token()
    stop = hooks.stop or asyncio.Event()
    metrics = Metrics()
    errors = ErrorBook()
    errors.subscribe(metrics.config_errors.set)
    store = Store()
    kube: KubeSource | None = None
    provider: FileProvider | None = None
    status_sink: StatusSink
    # The collector held from the first read of the objects (the file provider's read and
    # apply; the Kubernetes provider's lists once they succeeded, not the waits between its
    # retries) to the runtime's construction, which holds it to its freeze (Runtime
    # gc_freeze): back on in between, its first passes would walk every object read.
    with contextlib.ExitStack() as hold:
        if file is None:
            # Imported here: the Kubernetes client (kubernetes_asyncio) is about 43 MB resident,
            # which the file provider does not need (tests/serve/test_imports.py).
            from gateweave.app.kube import KubeSource

            kube = await KubeSource.open(settings, store, errors, metrics)
            await kube.sync(hold)  # the first translation sees every listed object
            status_sink = kube.status_writer
        else:
            hold.enter_context(gc_paused())
            provider = FileProvider(file.config_dir, store, errors, debounce_ms=file.debounce_ms)
            await provider.refresh()  # the first translation sees the whole directory
            status_sink = LocalStatusSink(settings.controller_name, metrics=metrics)
        runtime = Runtime(
            store,
            translate_fn=hooks.translator or translator(settings),
            options=settings.translate_options(),
            status_sink=status_sink,
            dataplane=settings.dataplane is not None,
            window=settings.runtime.window,
            max_delay=settings.runtime.max_delay,
            metrics=metrics,
            errors=errors,
            gc_freeze=True,  # the server's one runtime (see Runtime.gc_freeze)
            freeze_after=kube.status_writer.started if kube is not None else None,
        )
    admin = AdminServer(
        runtime,
        errors,
        settings.admin.address,
        token=token,
        token_where=token_path,
        metrics_auth=settings.admin.metrics_auth,
    )
    addresses = _watch_addresses(settings, runtime)

    loop = asyncio.get_running_loop()
    signals: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            signals.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread: the caller stops us through hooks.stop

    tasks: list[asyncio.Task[None]] = []
    try:
        try:
            await admin.start()
        except OSError as exc:
            raise OperatorError(
                f"cannot listen on the admin address {settings.admin.address}: "
                f"{exc.strerror or exc}"
            ) from None
        log.info("admin API listening", url=admin.url)
        # Whether the translation runs compiled (gateweave.native) or from its Python sources.
        log.info("translation", compiled=native.state() == "active", native_build=native.state())
        async with dataplane(settings, runtime, kube, state) as envoys:
            admin.envoys = envoys
            tasks = [asyncio.create_task(runtime.run(), name="gateweave-runtime")]
            if kube is not None:
                tasks += [asyncio.create_task(c, name="gateweave-kubernetes") for c in kube.tasks()]
            if provider is not None:
                tasks.append(asyncio.create_task(provider.run(), name="gateweave-file-provider"))
            if hooks.on_started is not None:
                hooks.on_started(App(settings, runtime, admin, kube))
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
        if addresses is not None:
            addresses.close()
        runtime.close()
        if kube is not None:
            await kube.close()
        for sig in signals:
            loop.remove_signal_handler(sig)


def _watch_addresses(settings: Settings, runtime: Runtime) -> netenv.AddressWatch | None:
    """Standalone addressing: this host's interface addresses, as a translation input kept
    current (a change schedules a translation)."""
    if isinstance(settings.dataplane, KubeDataplane):
        return None
    try:
        current = netenv.local_addresses()
        watch = netenv.AddressWatch(runtime.set_local_addresses, current)
        watch.start()
    except OSError as exc:  # no netlink (a sandbox): loopback and 0.0.0.0 / :: only
        log.warning("cannot read or watch the host's addresses", error=str(exc))
        return None
    runtime.set_local_addresses(current)
    return watch


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
