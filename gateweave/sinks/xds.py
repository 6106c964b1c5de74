"""The xDS sink: each changed Gateway's xDS IR -> Envoy resources -> the ADS server.

It reports back what each Gateway's Envoy did (``report``, the runtime's
``set_dataplane_state``), which translate turns into Programmed. A Gateway counts as
acknowledged once its Envoy has ACKed a complete snapshot, and stays so while later
snapshots are in flight (so a route change does not flap Programmed); it stops being so
when Envoy disconnects or rejects the current snapshot (NACK). The same sink serves both
data planes: Envoy processes on this host and Envoy pods in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import structlog

from gateweave.gcpause import gc_paused
from gateweave.ir import XdsGateway
from gateweave.translate.options import DataplaneState
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.server import AdsServer, NodeStatus

log = structlog.get_logger("gateweave.sinks.xds")


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
