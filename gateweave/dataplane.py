"""The standalone data plane: xDS IR -> Envoy resources -> ADS server; infra IR -> Envoy processes.

It plugs into the runtime as its xDS and infra sinks and reports back what each Gateway's
Envoy did (``runtime.set_dataplane_state``), which translate turns into Programmed.

A Gateway counts as acknowledged once its Envoy has ACKed a complete snapshot, and stays so
while later snapshots are in flight (so a route change does not flap Programmed); it stops
being so when Envoy disconnects or rejects the current snapshot (NACK).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import structlog

from gateweave.gcpause import gc_paused
from gateweave.infra.host import HostInfra
from gateweave.ir import InfraGateway, XdsGateway
from gateweave.runtime import Runtime
from gateweave.translate.options import DataplaneState
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.server import AdsServer, NodeStatus

log = structlog.get_logger("gateweave.dataplane")


class XdsPublisher:
    """xDS sink: builds each changed Gateway's resources and hands them to the ADS server.

    Builds are incremental: each Gateway's snapshot is rebuilt from its previous one, at
    the cost of the IR objects that are new instances (the output equals a full build).
    """

    def __init__(self, server: AdsServer, report: Callable[[str, DataplaneState | None], None]) -> None:
        self.server = server
        self.report = report
        # Each Gateway's last build, so a change costs what changed (gateweave.xds.incremental).
        self.snapshots = IncrementalSnapshots()
        self._acked_once: set[str] = set()
        self._build_errors: dict[str, str] = {}
        server.on_status(self._on_status)

    def update(self, changed: Mapping[str, XdsGateway], removed: Sequence[str]) -> None:
        for name in removed:
            self.server.remove_snapshot(name)
            self.snapshots.forget(name)
            self._acked_once.discard(name)
            self._build_errors.pop(name, None)
            self.report(name, None)
        for name, gw in changed.items():
            try:
                # The collector paused, as during translation (see gateweave.gcpause).
                with gc_paused():
                    snapshot = self.snapshots.snapshot(gw)
            except ValueError as exc:  # an IR the builder cannot map: never served, reported
                log.error("cannot build Envoy configuration", gateway=name, error=str(exc))
                self._build_errors[name] = f"cannot build Envoy configuration: {exc}"
                self.report(name, DataplaneState(acked=False, error=self._build_errors[name]))
                continue
            self._build_errors.pop(name, None)
            self.server.publish(name, snapshot)

    def _on_status(self, node_id: str, status: NodeStatus) -> None:
        if node_id in self._build_errors:
            return
        if not status.connected:
            self._acked_once.discard(node_id)
        elif status.acked:
            self._acked_once.add(node_id)
        error = status.error or ""
        self.report(node_id, DataplaneState(acked=node_id in self._acked_once and not error, error=error))


class InfraPublisher:
    """Infra sink: keeps one Envoy process per Gateway of the infra IR."""

    def __init__(self, infra: HostInfra) -> None:
        self.infra = infra
        self.desired: dict[str, InfraGateway] = {}

    async def update(self, changed: Mapping[str, InfraGateway], removed: Sequence[str]) -> None:
        for name in removed:
            self.desired.pop(name, None)
        self.desired.update(changed)
        await self.infra.reconcile(dict(self.desired))


def host_dataplane(
    *, xds_host: str = "127.0.0.1", xds_port: int = 0, work_dir: str | None = None, delta: bool = False
) -> Callable[[Runtime], AbstractAsyncContextManager[None]]:
    """A ``dataplane_setup`` for :func:`gateweave.serve.serve`: ADS server + host Envoys for its lifetime."""

    @contextlib.asynccontextmanager
    async def setup(runtime: Runtime) -> AsyncIterator[None]:
        server = AdsServer(registry=runtime.metrics.registry)
        port = await server.start(xds_host, xds_port)
        with contextlib.ExitStack() as stack:
            base = Path(work_dir) if work_dir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gateweave-")))
            infra = HostInfra(xds_host=xds_host, xds_port=port, work_dir=base, delta=delta)
            try:
                runtime.attach(
                    xds_sink=XdsPublisher(server, runtime.set_dataplane_state),
                    infra_sink=InfraPublisher(infra),
                )
                yield
            finally:
                await infra.close()
                await server.stop()

    return setup
