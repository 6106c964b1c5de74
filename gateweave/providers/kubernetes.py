"""The Kubernetes provider: list and watch the API server, keep the store equal to it.

For every kind the store holds (:data:`gateweave.api.kinds.KINDS`) it

1. discovers which group/version the API server serves (Gateway API CRDs may be installed
   at v1 only, v1beta1 only, or not at all; a kind that is not served is not watched);
2. lists it (paged) and reconciles the store: listed objects are applied, stored objects
   of that kind that the list lacks are deleted;
3. watches from the list's resourceVersion, with bookmarks (so a quiet kind still moves its
   resourceVersion forward), applying ADDED/MODIFIED and deleting on DELETED;
4. when the watch ends (server timeout, forced disconnect, network error) resumes from the
   last resourceVersion seen, with exponential backoff on errors; on 410 Gone (history
   window exceeded) lists again (2.).

Objects are decoded as stored (:attr:`gateweave.api.decode.Decoding.STORED`: defaulted and
pruned, never refused for their content: the API server validated each against the schema
of the version it was written in, and reading it in another version must not drop it) and
applied with
``authoritative=True``: the store keeps the API server's generation, creationTimestamp and
uid. A watch event whose only change is ``status`` (e.g. our own status write) changes no
model, so the store does not wake the processor - except for a Service, whose status (its
load-balancer addresses, written by Kubernetes) is part of its model: a Gateway's addresses.

Namespace mode (``namespace=...``): namespaced kinds are listed and watched in that
namespace only; the cluster-scoped kinds (GatewayClass, Namespace) are still read
cluster-wide, which needs a ClusterRole for them. If that is forbidden the error is
reported (admin API ``/api/errors``) and retried; the kind counts as synced (empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

from gateweave.api.decode import Decoded, Decoding, ObjectError, decode
from gateweave.api.kinds import KINDS, Key, KindInfo
from gateweave.gcpause import gc_paused
from gateweave.kube.client import Gone, KubeClient, KubeError, ResourcePath
from gateweave.providers import ConfigError, ErrorBook
from gateweave.store import Store

log = structlog.get_logger("gateweave.providers.kubernetes")

DecodeFn = Callable[[Any, str], tuple[Decoded | None, list[ObjectError]]]


def decode_stored(raw: Any, source: str) -> tuple[Decoded | None, list[ObjectError]]:
    """An object as the API server stored it: defaulted and pruned, not validated again.
    ``raw`` is handed over (freshly decoded from a list or watch event, not used again but
    for its resourceVersion), so it is defaulted in place instead of copied."""
    return decode(raw, source, mode=Decoding.STORED, owned=True)


# Objects of a list page decoded between two turns of the event loop (see list_kind).
LIST_CHUNK = 50


@dataclass(frozen=True, slots=True)
class _Listed:
    """An object read from the API server, decoded (or refused: ``decoded`` None, and why)."""

    key: Key
    source: str
    decoded: Decoded | None
    errors: list[ObjectError]


_RETRYABLE = (KubeError, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError)


@dataclass
class Backoff:
    initial: float = 0.2
    maximum: float = 10.0
    _next: float = 0.0

    def reset(self) -> None:
        self._next = 0.0

    def delay(self) -> float:
        self._next = self.initial if self._next == 0.0 else min(self.maximum, self._next * 2)
        return self._next * random.uniform(0.8, 1.2)


async def discover(
    client: KubeClient, kinds: Mapping[str, KindInfo] = KINDS
) -> dict[str, ResourcePath]:
    """For each kind, the first of its versions (in kinds.py order) that the server serves."""
    served: dict[tuple[str, str], dict[str, bool]] = {}  # (group, version) -> plural -> namespaced

    async def resources(group: str, version: str) -> dict[str, bool]:
        if (group, version) not in served:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = await client.get(path)
            except KubeError as exc:
                if exc.code != 404:
                    raise
                listing = {}
            served[(group, version)] = {
                str(r.get("name")): bool(r.get("namespaced"))
                for r in listing.get("resources") or []
                if isinstance(r, dict)
            }
        return served[(group, version)]

    groups = await client.get("/apis")
    versions_of = {
        str(g.get("name")): {str(v.get("version")) for v in g.get("versions") or []}
        for g in groups.get("groups") or []
        if isinstance(g, dict)
    }
    found: dict[str, ResourcePath] = {}
    for kind, info in kinds.items():
        for version in info.versions:
            if info.group and version not in versions_of.get(info.group, set()):
                continue
            listed = await resources(info.group, version)
            if info.plural in listed:
                found[kind] = ResourcePath(info.group, version, info.plural, listed[info.plural])
                break
    return found


class KubernetesProvider:
    """Keeps ``store`` equal to what the API server holds."""

    def __init__(
        self,
        client: KubeClient,
        store: Store,
        errors: ErrorBook | None = None,
        *,
        namespace: str | None = None,
        kinds: Mapping[str, KindInfo] = KINDS,
        backoff: tuple[float, float] = (0.2, 10.0),
        watch_timeout: int = 300,
        decode_fn: DecodeFn = decode_stored,
        list_page: int = 500,
    ) -> None:
        self.client = client
        self.store = store
        self.errors = errors if errors is not None else ErrorBook()
        self.namespace = namespace or ""
        self.kinds = kinds
        self.backoff = backoff
        self.watch_timeout = watch_timeout
        self.decode_fn = decode_fn
        self.list_page = list_page  # objects per list request
        self.paths: dict[str, ResourcePath] = {}
        self.synced = asyncio.Event()
        self.seen: dict[str, int] = {}  # highest resourceVersion seen per kind
        self.lists: dict[str, int] = {}  # completed lists per kind (re-lists after 410 included)
        self._rv: dict[str, str] = {}
        self._rejected: dict[str, set[Key]] = {}

    # ------------------------------------------------------------ helpers

    def path(self, kind: str) -> ResourcePath | None:
        return self.paths.get(kind)

    def _scope(self, kind: str) -> str:
        path = self.paths[kind]
        return self.namespace if path.namespaced else ""

    def caught_up(self, resource_version: int) -> bool:
        """True when every watched kind has seen ``resource_version`` (tests, readiness)."""
        return bool(self.paths) and all(
            self.seen.get(k, -1) >= resource_version for k in self.paths
        )

    def _see(self, kind: str, rv: Any) -> None:
        if rv in (None, ""):
            return
        self._rv[kind] = str(rv)
        with contextlib.suppress(ValueError):
            self.seen[kind] = max(self.seen.get(kind, -1), int(rv))

    def _decode(self, kind: str, raw: Any) -> _Listed | None:
        """``raw`` decoded (or why not), not yet stored."""
        if not isinstance(raw, dict):
            return None
        meta = raw.get("metadata") or {}
        key = Key(
            kind,
            str(meta.get("namespace") or "") if self.paths[kind].namespaced else "",
            str(meta.get("name") or ""),
        )
        source = (
            f"kubernetes:{kind}/{key.namespace}/{key.name}"
            if key.namespace
            else f"kubernetes:{kind}/{key.name}"
        )
        try:
            decoded, errs = self.decode_fn(raw, source)
        except Exception as exc:  # a bug in decoding must not stop the provider
            log.exception("decoding failed", source=source)
            decoded, errs = (
                None,
                [
                    ObjectError(
                        source=source,
                        kind=kind,
                        namespace=key.namespace,
                        name=key.name,
                        message=f"internal error while decoding: {exc!r}",
                    )
                ],
            )
        return _Listed(key, source, decoded, errs)

    def _store(self, listed: _Listed) -> Key:
        """Store a decoded object; a refused one is deleted and its errors reported."""
        key = listed.key
        if listed.decoded is None:
            scope = f"kube:{key.kind}/{key.namespace}/{key.name}"
            self.errors.set(
                scope,
                [
                    ConfigError(e.source, e.message, e.kind, e.namespace, e.name)
                    for e in listed.errors
                ],
            )
            self._rejected.setdefault(key.kind, set()).add(key)
            self.store.delete(key)
            return key
        self._forget_error(key.kind, key)
        self.store.apply(listed.decoded, source=listed.source, authoritative=True)
        return key

    def _apply(self, kind: str, raw: Any) -> Key | None:
        listed = self._decode(kind, raw)
        return None if listed is None else self._store(listed)

    def _forget_error(self, kind: str, key: Key) -> None:
        rejected = self._rejected.get(kind)
        if rejected and key in rejected:
            rejected.discard(key)
            self.errors.clear(f"kube:{kind}/{key.namespace}/{key.name}")

    def _delete(self, kind: str, raw: Any) -> None:
        meta = (raw or {}).get("metadata") or {}
        key = Key(
            kind,
            str(meta.get("namespace") or "") if self.paths[kind].namespaced else "",
            str(meta.get("name") or ""),
        )
        self._forget_error(kind, key)
        self.store.delete(key)

    # ------------------------------------------------------------ list and watch

    async def list_kind(self, kind: str) -> None:
        """List ``kind`` and make the store hold exactly what was listed.

        Each page is decoded while the API server prepares the next one (the loop gets
        control every :data:`LIST_CHUNK` objects, so the next page's request goes out and
        its bytes are read meanwhile); the store takes the whole list at once, after its
        last page, as before: a translation never sees a list half applied."""
        path = self.paths[kind]
        decoded: list[_Listed] = []
        rv = ""
        # The collector paused, as the file provider reads a directory: decoding a list
        # allocates a container per field, and each collection they trigger walks the heap
        # (paused for the whole list, its pages' JSON and the waits between them included:
        # back on between two pages, it would walk what the pages before left).
        with gc_paused():
            async with contextlib.aclosing(
                self.client.pages(path.collection(self._scope(kind)), limit=self.list_page)
            ) as pages:
                async for items, page_rv in pages:
                    rv = page_rv
                    for start in range(0, len(items), LIST_CHUNK):
                        for raw in items[start : start + LIST_CHUNK]:
                            one = self._decode(kind, raw)
                            if one is not None:
                                decoded.append(one)
                        await asyncio.sleep(0)
            listed = {self._store(one) for one in decoded}
        del decoded
        scope = self._scope(kind)
        for key in list(self.store):
            if key.kind == kind and key not in listed and (not scope or key.namespace == scope):
                self.store.delete(key)
        for key in list(self._rejected.get(kind, set()) - listed):
            self._forget_error(kind, key)
        self._rv[kind] = rv
        self._see(kind, rv)
        self.lists[kind] = self.lists.get(kind, 0) + 1
        self.errors.clear(f"kube-list:{kind}")

    async def sync(self, hold: contextlib.ExitStack | None = None) -> None:
        """Discover, then list every kind once; sets :attr:`synced`. Retries (with
        backoff) while the API server cannot be reached. ``hold``: once the lists are in,
        the collector stays paused until the caller closes it (see :meth:`_sync_once`)."""
        backoff = Backoff(*self.backoff)
        while True:
            try:
                await self._sync_once(hold)
                return
            except asyncio.CancelledError:
                raise
            except _RETRYABLE as exc:
                delay = backoff.delay()
                log.warning(
                    "initial sync failed; retrying", error=str(exc), retry_in=round(delay, 2)
                )
                await asyncio.sleep(delay)

    async def _sync_once(self, hold: contextlib.ExitStack | None = None) -> None:
        if not self.paths:
            self.paths = await discover(self.client, self.kinds)
            missing = sorted(set(self.kinds) - set(self.paths))
            log.info("discovered kinds", watched=sorted(self.paths), not_served=missing)

        async def first(kind: str) -> None:
            try:
                await self.list_kind(kind)
            except KubeError as exc:
                if exc.code not in (401, 403):
                    raise
                self._report(kind, exc)  # retried by follow(); the kind starts empty

        # The collector paused for the whole first list (see list_kind), of all kinds at once:
        # between two kinds' lists, it would walk the objects of those listed before.
        with gc_paused():
            await asyncio.gather(*(first(k) for k in sorted(self.paths)))
            if hold is not None:
                # Handed on before this pause ends, so that the collector does not come back
                # between the lists and the caller's next step (the runtime's construction,
                # which holds it until its freeze): its first pass would walk every object
                # listed. Only a sync that succeeded: a retry's wait is not held.
                hold.enter_context(gc_paused())
        self.synced.set()

    def _report(self, kind: str, exc: BaseException) -> None:
        path = self.paths[kind]
        where = path.collection(self._scope(kind))
        self.errors.set(
            f"kube-list:{kind}",
            [ConfigError(f"kubernetes:{where}", f"cannot list/watch: {exc}", kind)],
        )

    async def follow(self, kind: str) -> None:
        """Watch ``kind`` forever (re-listing when needed)."""
        backoff = Backoff(*self.backoff)
        path = self.paths[kind]
        collection = path.collection(self._scope(kind))
        while True:
            try:
                if not self._rv.get(kind):
                    await self.list_kind(kind)
                events = 0
                async for event in self.client.watch(
                    collection, self._rv[kind], timeout_seconds=self.watch_timeout
                ):
                    events += 1
                    etype = event.get("type")
                    obj = event.get("object") or {}
                    if etype in ("ADDED", "MODIFIED"):
                        self._apply(kind, obj)
                    elif etype == "DELETED":
                        self._delete(kind, obj)
                    self._see(kind, (obj.get("metadata") or {}).get("resourceVersion"))
                    backoff.reset()
                if events:
                    backoff.reset()  # the server ended a working watch: resume at once
                else:  # ended without even a bookmark: do not spin
                    await asyncio.sleep(backoff.delay())
            except Gone:
                log.info("resourceVersion expired; listing again", kind=kind, rv=self._rv.get(kind))
                self._rv[kind] = ""
            except asyncio.CancelledError:
                raise
            except _RETRYABLE as exc:
                if isinstance(exc, KubeError) and exc.code in (401, 403):
                    self._report(kind, exc)
                delay = backoff.delay()
                log.warning(
                    "watch failed; retrying", kind=kind, error=str(exc), retry_in=round(delay, 2)
                )
                await asyncio.sleep(delay)

    async def run(self) -> None:
        """Sync (if not done yet), then follow every kind until cancelled."""
        if not self.synced.is_set():
            await self.sync()
        tasks = [
            asyncio.create_task(self.follow(k), name=f"gateweave-watch-{k}")
            for k in sorted(self.paths)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
