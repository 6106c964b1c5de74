"""Envoy acknowledgements shared across controller replicas (Kubernetes, leader election).

Every replica serves xDS; an Envoy pod is connected to one of them, so its ACK or NACK is
known there only, while the Lease holder alone writes status. Each replica therefore
publishes what its connected pods did, per Gateway, in a ConfigMap of its own
(``gateweave-acks-<identity>`` in the Lease's namespace), and reads the others' reports.
The state a Gateway's status is computed from (the runtime's ``set_dataplane_state``) is
the merge of every live report, so every replica computes the same Programmed:

* a Gateway with no pod connected anywhere keeps this replica's own report (not acked);
* otherwise it is acknowledged only when every replica with pods of it connected says
  they all ACKed, and rejected as soon as one of them reports a NACK (with its message).

A report is live while it changes: its writer rewrites it at least every third of the
lease duration, and a reader drops it once it has seen the same resourceVersion for longer
than the lease duration (on its own monotonic clock, as the Lease itself). A replica that
stops leaves its report behind on purpose: while its pods reconnect to the others, the
Gateways it served keep their state, so a failover flips no Programmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import structlog

from gateweave.kube.client import KubeClient, KubeError, ResourcePath
from gateweave.translate.options import DataplaneState

log = structlog.get_logger("gateweave.sinks.sharedacks")

CONFIGMAPS = ResourcePath("", "v1", "configmaps", True)
PREFIX = "gateweave-acks-"


class PodsReport(msgspec.Struct, frozen=True):
    """One replica's view of one Gateway: its connected pods and what they did."""

    pods: int = 0
    acked: bool = False
    error: str = ""
    running: tuple[str, ...] = ()  # by name, when the pods' node ids name them
    waiting: tuple[str, ...] = ()
    rejected_by: str = ""


Reports = dict[str, PodsReport]  # Gateway ("ns/name") -> report


def report_name(identity: str) -> str:
    """The ConfigMap of replica ``identity`` (a DNS subdomain)."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", identity.lower()).strip("-.") or "replica"
    return (PREFIX + cleaned)[:253]


def merge(
    own: DataplaneState, reports: list[PodsReport], was_acked: bool = False
) -> DataplaneState:
    """A Gateway's state from every replica's report of it (this replica's included), given
    whether it counted as acknowledged before: a pod that has just connected (a new pod, or
    one moving from a replica that went away) and not answered yet keeps it so, as on one
    replica; a NACK anywhere ends it."""
    connected = [r for r in reports if r.pods > 0]
    if not connected:
        return own
    rejecting = next((r for r in connected if r.error), None)
    error = own.error or (rejecting.error if rejecting is not None else "")
    rejected_by = (
        own.rejected_by if own.error else (rejecting.rejected_by if rejecting is not None else "")
    )
    settled = all(r.acked for r in connected) or (was_acked and any(r.acked for r in connected))
    # A named pod runs the configuration if a report says so (one moving between replicas
    # is waiting on the new one while the old one's report still stands).
    running = sorted({p for r in connected for p in r.running})
    waiting = sorted({p for r in connected for p in r.waiting} - set(running))
    return DataplaneState(
        acked=not error and settled,
        error=error,
        running=tuple(running),
        waiting=tuple(waiting),
        rejected_by=rejected_by,
    )


class SharedAcks:
    """Sits between the xDS sink's reports and the runtime: ``report`` takes this replica's
    state of a Gateway, ``publish`` gets the merged state; ``run`` exchanges the reports."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        identity: str,
        publish: Callable[[str, DataplaneState | None], None],
        pods: Callable[[str], int],
        lease_duration: float = 15.0,
        period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = report_name(identity)
        self.identity = identity
        self.publish = publish
        self.pods = pods  # Gateway -> how many of its Envoy pods are connected here
        self.lease_duration = lease_duration
        self.period = period
        self.clock = clock
        self._own: dict[str, DataplaneState] = {}
        self._mine: Reports = {}
        self._others: dict[
            str, tuple[str, float, Reports]
        ] = {}  # name -> (resourceVersion, seen at, reports)
        self._merged: dict[str, DataplaneState] = {}
        self._written: Reports | None = None
        self._written_at = 0.0
        self._beat = 0
        self._wake = asyncio.Event()

    # ------------------------------------------------------------ local side

    def report(self, gateway: str, state: DataplaneState | None) -> None:
        """The xDS sink's report for ``gateway`` on this replica (None: forget it)."""
        if state is None:
            self._own.pop(gateway, None)
            self._mine.pop(gateway, None)
        else:
            self._own[gateway] = state
            self._mine[gateway] = PodsReport(
                pods=self.pods(gateway),
                acked=state.acked,
                error=state.error,
                running=state.running,
                waiting=state.waiting,
                rejected_by=state.rejected_by,
            )
        self._recompute({gateway})
        self._wake.set()

    def _recompute(self, gateways: set[str]) -> None:
        now = self.clock()
        live = [
            reports
            for rv, seen, reports in self._others.values()
            if now - seen <= self.lease_duration
        ]
        for gw in sorted(gateways):
            own = self._own.get(gw)
            before = self._merged.get(gw)
            merged = (
                None
                if own is None
                else merge(
                    own,
                    [r[gw] for r in [self._mine, *live] if gw in r],
                    was_acked=before is not None and before.acked,
                )
            )
            if before == merged:
                continue
            if merged is None:
                self._merged.pop(gw, None)
            else:
                self._merged[gw] = merged
            self.publish(gw, merged)

    # ------------------------------------------------------------ exchange

    async def run(self) -> None:
        """Write this replica's report when it changes (and as a heartbeat), read the others'."""
        while True:
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("sharing Envoy acknowledgements failed", error=str(exc))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.period):
                    await self._wake.wait()
            self._wake.clear()

    async def _round(self) -> None:
        now = self.clock()
        if self._mine != self._written or now - self._written_at >= self.lease_duration / 3:
            await self._write(dict(self._mine))
            self._written_at = now
        items, _ = await self.client.list(CONFIGMAPS.collection(self.namespace))
        seen: set[str] = set()
        for item in items:
            meta = item.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name.startswith(PREFIX) or name == self.name:
                continue
            seen.add(name)
            rv = str(meta.get("resourceVersion") or "")
            known = self._others.get(name)
            if known is None or known[0] != rv:
                self._others[name] = (rv, now, _decode(item.get("data") or {}))
        for name in set(self._others) - seen:
            del self._others[name]
        self._recompute(set(self._own))

    async def _write(self, reports: Reports) -> None:
        self._beat += 1
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gateweave"},
            },
            "data": {
                "replica": self.identity,
                "beat": str(self._beat),
                "gateways": msgspec.json.encode(reports).decode(),
            },
        }
        try:
            current = await self.client.get(CONFIGMAPS.item(self.namespace, self.name))
        except KubeError as exc:
            if exc.code != 404:
                raise
            await self.client.create(CONFIGMAPS.collection(self.namespace), body)
        else:
            body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get(
                "resourceVersion"
            )
            await self.client.replace(CONFIGMAPS.item(self.namespace, self.name), body)
        self._written = reports


def _decode(data: Mapping[str, Any]) -> Reports:
    """Another replica's reports; a malformed one counts as empty (and is logged)."""
    try:
        raw = json.loads(str(data.get("gateways") or "{}"))
        return msgspec.convert(raw, Reports)
    except (ValueError, msgspec.ValidationError) as exc:
        log.warning(
            "malformed acknowledgement report ignored", replica=data.get("replica"), error=str(exc)
        )
        return {}
