"""The xDS sink: each changed Gateway's xDS IR -> Envoy resources -> the ADS server.

It reports back what each Gateway's Envoy did (``report``, the runtime's
``set_dataplane_state``), which translate turns into Programmed. A Gateway counts as
acknowledged once its Envoy has ACKed a complete snapshot, and stays so while later
snapshots are in flight (so a route change does not flap Programmed); it stops being so
when Envoy disconnects or rejects the current snapshot (NACK). The same sink serves both
data planes: Envoy processes on this host and Envoy pods in Kubernetes, where each pod is
tracked the same way (``DataplaneState.running`` / ``waiting``: a pod runs the current
configuration once it ACKed a complete snapshot, until it disconnects or rejects one).

When Envoy rejects a Gateway's route tables, the sink finds the route objects responsible
(:mod:`gateweave.xds.culprits`: trials against the live Envoy, each one xDS round trip
awaited on the event loop) and hands them to ``quarantine`` (the runtime's), which translates again
without them:
one object can never freeze the others. While a search runs, the Gateway's reports wait
(a trial is not the Gateway's configuration); a newer snapshot of the Gateway ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence

import structlog

from gateweave.api.kinds import Key
from gateweave.gcpause import gc_paused
from gateweave.ir import XdsGateway
from gateweave.translate.options import DataplaneState
from gateweave.xds.culprits import find_culprits, suspects, without
from gateweave.xds.incremental import IncrementalSnapshots
from gateweave.xds.server import AdsServer, Nack, NodeStatus
from gateweave.xds.snapshot_cache import ROUTE

log = structlog.get_logger("gateweave.sinks.xds")

# The runtime's quarantine: (Gateway, the rejected xDS IR, culprit -> Envoy's message).
Quarantine = Callable[[str, XdsGateway, Mapping[Key, str]], None]


class XdsPublisher:
    """xDS sink: builds each changed Gateway's resources and hands them to the ADS server.

    Builds are incremental: each Gateway's snapshot is rebuilt from its previous one, at
    the cost of the IR objects that are new instances (the output equals a full build).
    """

    def __init__(
        self,
        server: AdsServer,
        report: Callable[[str, DataplaneState | None], None],
        quarantine: Quarantine | None = None,
        trial_timeout: float = 2.0,
    ) -> None:
        self.server = server
        self.report = report
        self.quarantine = quarantine
        self.trial_timeout = trial_timeout  # seconds a trial waits for Envoy's answer
        # Each Gateway's last build, so a change costs what changed (gateweave.xds.incremental).
        self.snapshots = IncrementalSnapshots()
        self._acked_once: set[str] = set()
        self._pods_acked: dict[
            str, set[str]
        ] = {}  # Gateway -> its pods that ACKed since connecting
        self._build_errors: dict[str, str] = {}
        # Per Gateway: the IR published (and its snapshot version), the IR its Envoy last ACKed.
        self._current: dict[str, tuple[XdsGateway, str]] = {}
        self._acked: dict[str, XdsGateway] = {}
        self._searches: dict[str, asyncio.Task[None]] = {}
        self._unexplained: dict[str, str] = {}  # snapshot version whose rejection no route explains
        # A trial waits for its snapshot version's answer: an ACK, or a NACK newer than the last
        # one seen before it was published (the previous NACK stays in the status until an ACK).
        self._waiters: dict[
            str, tuple[str, Nack | None, asyncio.Future[tuple[bool, str] | None]]
        ] = {}
        self.searches_run = 0  # (tests and tooling)
        server.on_status(self._on_status)

    def update(self, changed: Mapping[str, XdsGateway], removed: Sequence[str]) -> None:
        for name in removed:
            self._end_search(name)
            self.server.remove_snapshot(name)
            self.snapshots.forget(name)
            self._acked_once.discard(name)
            self._pods_acked.pop(name, None)
            self._build_errors.pop(name, None)
            self._current.pop(name, None)
            self._acked.pop(name, None)
            self._unexplained.pop(name, None)
            self.report(name, None)
        for name, gw in changed.items():
            self._end_search(name)
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
            self._current[name] = (gw, snapshot.version)
            self.server.publish(name, snapshot)

    def _on_status(self, node_id: str, status: NodeStatus) -> None:
        waiter = self._waiters.get(node_id)
        if waiter is not None:
            version, nack_before, future = waiter
            if status.snapshot_version == version and not future.done():
                if not status.connected:
                    future.set_result(None)
                elif status.acked:
                    future.set_result((True, ""))
                elif status.error and status.last_nack is not nack_before:
                    future.set_result((False, status.error))
            return  # a trial's outcome is not the Gateway's
        if node_id in self._searches or node_id in self._build_errors:
            return
        current = self._current.get(node_id)
        if status.acked and current is not None and status.snapshot_version == current[1]:
            self._acked[node_id] = current[0]
        if not status.connected:
            self._acked_once.discard(node_id)
        elif status.acked:
            self._acked_once.add(node_id)
        error = status.error or ""
        if error and self._rejected_routes(node_id, status):
            return  # reported once the search ends
        self.report(node_id, self._state(node_id, status, error))

    def _state(self, node_id: str, status: NodeStatus, error: str) -> DataplaneState:
        """The Gateway's state; with pods, which of them run the current configuration."""
        if not status.pods:
            self._pods_acked.pop(node_id, None)
            return DataplaneState(acked=node_id in self._acked_once and not error, error=error)
        acked = self._pods_acked.setdefault(node_id, set())
        acked &= {p.name for p in status.pods}  # a pod that disconnected starts over
        acked |= {p.name for p in status.pods if p.acked}
        running = tuple(p.name for p in status.pods if p.name in acked and p.error is None)
        waiting = tuple(p.name for p in status.pods if p.name not in running)
        rejecting = next((p for p in status.pods if p.error is not None), None)
        return DataplaneState(
            acked=not waiting and not error,
            error=error,
            running=running,
            waiting=waiting,
            rejected_by=rejecting.name if rejecting is not None and error else "",
        )

    # ------------------------------------------------------------ culprits

    def _rejected_routes(self, node_id: str, status: NodeStatus) -> bool:
        """Start a search for the route objects behind a rejection of the current snapshot's
        route tables, unless one cannot explain it; True if one started."""
        current = self._current.get(node_id)
        if (
            self.quarantine is None
            or current is None
            or status.snapshot_version != current[1]
            or status.last_nack is None
            or status.last_nack.type_url != ROUTE
            or self._unexplained.get(node_id) == current[1]
        ):
            return False
        rejected, version = current
        found = suspects(self._acked.get(node_id), rejected)
        if not found:
            self._unexplained[node_id] = version
            return False
        self.searches_run += 1
        log.info(
            "route tables rejected: finding the route objects responsible",
            gateway=node_id,
            suspects=len(found),
        )
        task = asyncio.get_running_loop().create_task(
            self._search(node_id, rejected, version, found, status.error or ""),
            name=f"gateweave-culprits-{node_id}",
        )
        self._searches[node_id] = task
        return True

    async def _search(
        self, name: str, rejected: XdsGateway, version: str, found: list[Key], message: str
    ) -> None:
        async def trial(left_out: frozenset[Key]) -> tuple[bool, str] | None:
            return await self._trial(name, without(rejected, left_out))

        try:
            search = await find_culprits(found, message, trial)
        except Exception:  # a bug: never leave the Gateway's reports waiting
            log.exception("finding the route objects responsible failed", gateway=name)
            search = None
        finally:
            if self._searches.get(name) is asyncio.current_task():  # not a newer search's entry
                del self._searches[name]
        if search is not None and search.culprits and self.quarantine is not None:
            log.warning(
                "route objects quarantined: Envoy rejects them",
                gateway=name,
                culprits=[str(k) for k in search.culprits],
                trials=search.trials,
            )
            # Envoy keeps what it ACKed last; the server serves it until the runtime publishes
            # the Gateway without the culprits (the same routes, unless the search was cut short).
            self._publish(name, without(rejected, frozenset(found) - search.accepted))
            self.quarantine(name, rejected, search.culprits)
            return
        if search is not None:
            log.info("no route object explains the rejection", gateway=name, trials=search.trials)
            self._unexplained[name] = version
        # Back to the Gateway's own snapshot: the server retries it with backoff, as for any NACK.
        self._publish(name, rejected)

    async def _trial(self, name: str, gw: XdsGateway) -> tuple[bool, str] | None:
        """Serve ``gw`` to the Gateway's Envoy: (it ACKed, its
        message if not), None if no answer.
        """
        future: asyncio.Future[tuple[bool, str] | None] = asyncio.get_running_loop().create_future()
        self._publish(name, gw, waiter=future)
        try:
            async with asyncio.timeout(self.trial_timeout):
                answer = await future
        except TimeoutError:
            return None
        finally:
            self._waiters.pop(name, None)
        if answer is not None and answer[0]:
            self._acked[name] = gw
        return answer

    def _publish(
        self,
        name: str,
        gw: XdsGateway,
        waiter: asyncio.Future[tuple[bool, str] | None] | None = None,
    ) -> None:
        with gc_paused():
            snapshot = self.snapshots.snapshot(gw)
        if waiter is not None:
            self._waiters[name] = (snapshot.version, self.server.status(name).last_nack, waiter)
        self.server.publish(name, snapshot)
        self._on_status(name, self.server.status(name))  # answered at once when nothing changed

    def _end_search(self, name: str) -> None:
        task = self._searches.pop(name, None)
        if task is not None:
            task.cancel()
        waiter = self._waiters.pop(name, None)
        if waiter is not None and not waiter[2].done():
            waiter[2].cancel()

    async def close(self) -> None:
        for name in list(self._searches):
            task = self._searches.pop(name)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
