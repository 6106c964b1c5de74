"""The Kubernetes status sink: statuses written through the ``status`` subresource.

The runtime hands it every computed status (:meth:`KubeStatusSink.publish`, the
:class:`~gateweave.sinks.StatusSink` protocol, as the standalone
:class:`~gateweave.sinks.localstatus.LocalStatusSink`). For each object it merges the
computed status into the status the API server has (as the watch delivered it into the
store) with :func:`~gateweave.sinks.statusmerge.merge_status` - other controllers' route
parent entries are kept, our stale ones removed, ``lastTransitionTime`` of unchanged
conditions kept - and queues a write only when the result differs. A worker task writes
the queue:

* ``PUT .../<name>/status`` with the object's ``metadata.resourceVersion``, so a write
  never overwrites a status it has not seen; on 409 Conflict it re-reads the object,
  merges again and retries (bounded), and skips the write if the fresh status already
  is the merged one;
* rate-limited by a token bucket (``rate`` writes/s, ``burst``);
* after a write, until the watch delivers it, the written status (and its
  resourceVersion) stands in for the store's stale one, so the same status is never
  written twice;
* a status-only change seen by the watch (ours or another writer's) is checked again
  against the desired status, without a translation: it never wakes the processor (the
  store reports status-only changes as ``model_changed=False``);
* an object whose computed status is the very object the last publication was given
  (translate hands out the same one while the status does not change), and that the store
  has not changed since, is skipped: neither converted nor merged again, the answer would be
  the one already acted on. So a change's work here follows the statuses it changed, not
  the number of objects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import msgspec
import structlog

from gateweave.api.kinds import Key
from gateweave.kube.client import KubeClient, KubeError, ResourcePath
from gateweave.metrics import Metrics
from gateweave.sinks.statusmerge import (
    Status,
    StatusWrites,
    merge_status,
    not_the_same,
    owned_list,
    utc_now,
)
from gateweave.store import Change, Store

log = structlog.get_logger("gateweave.sinks.kubestatus")


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self.tokens = float(self.burst)
        self.stamp = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    async def take(self) -> None:
        while True:
            self._refill()
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


def _rv(raw: Mapping[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


def _newer_or_same(rv: str, than: str) -> bool:
    # resourceVersions are opaque, but an API server's are etcd revisions; when both are
    # integers (always, in practice) order them, else trust the store.
    try:
        return int(rv) >= int(than)
    except ValueError:
        return True


class KubeStatusSink(StatusWrites):
    def __init__(
        self,
        client: KubeClient,
        store: Store,
        paths: Callable[[str], ResourcePath | None],
        controller_name: str,
        *,
        rate: float = 20.0,
        burst: int = 50,
        max_attempts: int = 5,
        retry_delay: float = 1.0,
        clock: Callable[[], str] = utc_now,
        on_write: Callable[[Key, Status], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        super().__init__(controller_name, clock=clock, on_write=on_write, metrics=metrics)
        self.client = client
        self.store = store
        self.paths = paths
        self.bucket = TokenBucket(rate, burst)
        self.max_attempts = max_attempts
        self.retry_delay = retry_delay
        self.conflicts = 0
        self.failures = 0
        self.enabled = True  # False while not the leader: statuses are computed, not written
        self._desired: dict[Key, dict[str, Any]] = {}
        # For keys of ``_desired``: the computed status it was converted from, while the
        # stored object has not changed since (any change of the key forgets it: _on_change).
        self._computed: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._echo: dict[Key, tuple[str, Status]] = {}  # our last write until the watch shows it
        self._pending: set[Key] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        # Set once the first publication's first write is made (or tried), or found nothing
        # it may write: the runtime's gc.freeze waits for it (Runtime.freeze_after).
        self.started = asyncio.Event()
        self._published = False
        self._unsubscribe = store.subscribe(self._on_change)

    # ------------------------------------------------------------ what the API server has

    def _current(self, key: Key) -> tuple[Status | None, str, dict[str, Any] | None]:
        """(status, resourceVersion, object) as far as we know the API server has them."""
        stored = self.store.get(key)
        if stored is None:
            return None, "", None
        raw = stored.raw  # (unpacked once)
        rv = _rv(raw)
        status = raw.get("status")
        echo = self._echo.get(key)
        if echo is not None:
            if _newer_or_same(rv, echo[0]):
                del self._echo[key]
            else:
                return echo[1], echo[0], raw
        return (status if isinstance(status, dict) else None), rv, raw

    def _status(self, key: Key) -> tuple[bool, Status | None]:
        """(whether the object is stored, its status as in :meth:`_current`), without
        unpacking the stored object unless a write of ours is not confirmed yet."""
        if key in self._echo:
            current, _, obj = self._current(key)
            return obj is not None, current
        stored = self.store.get(key)
        status = stored.status if stored is not None else None
        return stored is not None, (status if isinstance(status, dict) else None)

    def get(self, key: Key) -> Status | None:
        return self._status(key)[1]

    # ------------------------------------------------------------ the sink interface

    def publish(
        self,
        computed: Mapping[tuple[str, str, str], Mapping[str, Any]],
        stored: Callable[[Key], Mapping[str, Any] | None] = lambda _key: None,
    ) -> list[Key]:
        """Remember the computed statuses; queue a write for each that changes the stored one."""
        now = self.clock()
        queued: list[Key] = []
        last = self._computed
        # Skipped: the same computed status object as last time, for an object the store has
        # not changed since; whether it differs from the stored status was decided then (and a
        # write queued if so).
        desired_now: dict[Key, dict[str, Any]] = {}
        for k in not_the_same(computed, last):
            status = computed[k]
            last[k] = status
            desired_now[Key(*k)] = msgspec.to_builtins(status)
        for key in self._desired.keys() - computed.keys():
            # No longer reported on (e.g. its parent is no longer ours): withdraw our
            # route/policy entries; any other status is left as it is.
            shared = owned_list(key.kind)
            if shared is None:
                self._forget(key)
            else:
                last.pop(key, None)
                desired_now[key] = {shared: []}
        for key in sorted(desired_now):
            desired = desired_now[key]
            self._desired[key] = desired
            if self._differs(key, desired, now):
                self._pending.add(key)
                queued.append(key)
        self._published = True
        if queued:
            self._idle.clear()
            self._wake.set()
        else:
            self.started.set()
        return queued

    def retain(self, keys: Collection[Key]) -> None:
        for key in [k for k in self._desired if k not in keys]:
            self._forget(key)

    def _forget(self, key: Key) -> None:
        self._desired.pop(key, None)
        self._computed.pop(key, None)
        self._echo.pop(key, None)
        self._pending.discard(key)

    def _differs(self, key: Key, desired: dict[str, Any], now: str | None) -> bool:
        stored, current = self._status(key)
        if not stored:
            return False
        if current is None:
            # What merge_status makes of no status (an object's first, e.g. at a cold start):
            # the computed one stamped, plus an empty shared list for a route or policy. It
            # differs from none unless both are empty.
            return bool(desired) or owned_list(key.kind) is not None
        merged = merge_status(
            key.kind, current, desired, self.controller_name, now, namespace=key.namespace
        )
        return merged != dict(current or {})

    def _on_change(self, change: Change) -> None:
        # The stored object changed: the next publication looks at its status again.
        self._computed.pop(change.key, None)
        if change.op == "deleted":
            self._forget(change.key)
        elif (
            not change.model_changed
            and change.key in self._desired
            and self._differs(change.key, self._desired[change.key], None)
        ):
            # Someone else changed the status (ours are recognised as no difference).
            self._pending.add(change.key)
            self._idle.clear()
            self._wake.set()

    # ------------------------------------------------------------ writing

    async def run(self) -> None:
        """Write queued statuses until cancelled."""
        try:
            while True:
                if not self._pending or not self.enabled:
                    self._idle.set()
                    if self._published:
                        self.started.set()
                    await self._wake.wait()
                    self._wake.clear()
                    continue
                key = min(self._pending)
                self._pending.discard(key)
                await self.bucket.take()
                try:
                    await self._write(key)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.failures += 1
                    log.warning("status write failed; will retry", object=str(key), error=str(exc))
                    asyncio.get_running_loop().call_later(self.retry_delay, self._requeue, key)
                self.started.set()
        finally:
            self._unsubscribe()

    def _requeue(self, key: Key) -> None:
        if key in self._desired:
            self._pending.add(key)
            self._idle.clear()
            self._wake.set()

    def kick(self) -> None:
        """Re-check every desired status (e.g. after becoming the leader)."""
        self._pending |= set(self._desired)
        if self._pending:
            self._idle.clear()
        self._wake.set()

    async def wait_idle(self, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            await self._idle.wait()

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    async def _write(self, key: Key) -> None:
        desired = self._desired.get(key)
        path = self.paths(key.kind)
        if desired is None or path is None:
            return
        current, rv, obj = self._current(key)
        for _ in range(self.max_attempts):
            if obj is None:
                return
            merged = merge_status(
                key.kind,
                current,
                desired,
                self.controller_name,
                self.clock(),
                namespace=key.namespace,
            )
            if merged == dict(current or {}):
                return
            body = {
                **obj,
                "apiVersion": path.api_version,
                "kind": key.kind,
                "metadata": {**(obj.get("metadata") or {}), "resourceVersion": rv},
                "status": merged,
            }
            try:
                written = await self.client.replace(
                    path.item(key.namespace, key.name, "status"), body
                )
            except KubeError as exc:
                if exc.code == 404:
                    return  # deleted meanwhile; the watch will tell the store
                if exc.code != 409:
                    raise
                self.conflicts += 1
                fresh = await self._read(path, key)
                if fresh is None:
                    return
                obj, rv = fresh, _rv(fresh)
                status = fresh.get("status")
                current = status if isinstance(status, dict) else None
                continue
            self._echo[key] = (_rv(written), merged)
            self._count_write(key, merged)
            return
        raise KubeError(409, f"{key}: still conflicting after {self.max_attempts} attempts")

    async def _read(self, path: ResourcePath, key: Key) -> dict[str, Any] | None:
        try:
            return await self.client.get(path.item(key.namespace, key.name))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise
