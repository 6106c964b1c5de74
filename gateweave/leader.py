"""Leader election on a coordination.k8s.io/v1 Lease.

Every replica watches the API server and translates (so every replica can serve xDS);
only the leader writes status (and would manage infrastructure). The protocol is the
one client-go uses:

* the Lease names its ``holderIdentity``, ``renewTime`` and ``leaseDurationSeconds``;
* the holder renews every ``retry_period``; if it cannot renew within ``renew_deadline``
  it steps down;
* another replica takes the Lease over once it has seen the same ``(holder, renewTime)``
  for longer than the lease duration, measured on its own monotonic clock (so clock skew
  between machines does not matter); every write carries the Lease's resourceVersion, so
  two replicas cannot both win (one gets 409 Conflict);
* on shutdown the leader releases the Lease (empty holder), so a successor need not wait.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from gateweave.kube.client import KubeClient, KubeError, ResourcePath

log = structlog.get_logger("gateweave.leader")

LEASES = ResourcePath("coordination.k8s.io", "v1", "leases", True)


def micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.namespace, self.name = namespace, name
        self.identity = identity or f"{socket.gethostname()}_{os.getpid()}"
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.clock = clock
        self.leading = False
        self.transitions = 0  # times this replica became the leader
        self._observed: tuple[Any, Any] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._last_renew = 0.0

    @property
    def path(self) -> str:
        return LEASES.item(self.namespace, self.name)

    def _set_leading(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if leading:
            self.transitions += 1
        log.info("leadership changed", identity=self.identity, leading=leading)
        if self.on_change is not None:
            self.on_change(leading)

    def _spec(self, transitions: int, acquire: str | None) -> dict[str, Any]:
        now = micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One round; True when this replica holds the Lease afterwards."""
        now = self.clock()
        try:
            lease = await self.client.get(self.path)
        except KubeError as exc:
            if exc.code != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, None),
            }
            try:
                await self.client.create(LEASES.collection(self.namespace), body)
            except KubeError as err:
                if err.code == 409:
                    return False
                raise
            self._last_renew = now
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        mine = holder == self.identity
        expired = not holder or now - self._observed_at > float(
            spec.get("leaseDurationSeconds") or 0
        )
        if not mine and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        body = {**lease, "spec": self._spec(transitions, spec.get("acquireTime") if mine else None)}
        try:
            await self.client.replace(self.path, body)
        except KubeError as exc:
            if exc.code == 409:
                return False
            raise
        self._last_renew = now
        return True

    async def run(self) -> None:
        """Acquire and renew until cancelled (then release)."""
        try:
            while True:
                try:
                    held = await self.try_acquire_or_renew()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("lease round failed", error=str(exc))
                    held = self.leading and self.clock() - self._last_renew < self.renew_deadline
                self._set_leading(held)
                await asyncio.sleep(self.retry_period)
        finally:
            self._set_leading(False)

    async def release(self) -> None:
        """Give the Lease up if this replica holds it."""
        try:
            lease = await self.client.get(self.path)
        except Exception:
            return
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        body = {
            **lease,
            "spec": {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(),
            },
        }
        try:
            await self.client.replace(self.path, body)
        except Exception as exc:
            log.warning("could not release the lease", error=str(exc))
        self._set_leading(False)
