"""The ADS server: serves per-node snapshots to Envoy over gRPC, SotW and Delta.

One snapshot per xDS node (one Gateway). A node id ``ns/name/<pod>`` is pod ``<pod>`` of
node ``ns/name`` (:func:`split_node`; the Envoy pods of a Gateway in Kubernetes): its
streams are served and reported as that node's, and :class:`NodeStatus` says what each pod
did. Each gRPC stream is a
session with two tasks: a *reader* that answers requests (subscriptions, ACKs, NACKs)
and a *driver* that moves the client to the current snapshot, make-before-break:

1. other types first (e.g. Secrets), then Clusters, each as the union of what the
   client has and the new resources, with the ClusterLoadAssignments; wait (bounded)
   for the CDS ACK, which Envoy sends once those clusters warmed;
2. Listeners, then RouteConfigurations;
3. only once LDS and RDS are ACKed, the final sets, dropping the clusters (and
   secrets...) nothing refers to any more.

Stale nonces are answered with nothing. LDS and CDS are wildcard; RDS, EDS (and
other types) carry only the requested names. A NACK keeps what the client has, is
logged (capped), counted, and visible in :class:`NodeStatus`; the rejected resources are
sent again after a backoff (1 s, doubling up to 60 s, until an ACK or a newer response):
a rejection may come from outside the configuration (a port another process held). In
Delta the server's view of the client is rolled back on NACK.

With mutual TLS (``tls``, gateweave/xds/auth.py) a stream is bound to the node its client
certificate names: a client asking as another node is refused (PERMISSION_DENIED) before
anything is sent to it or anything it says is taken as an ACK or NACK.

Nothing is sent to a node before its snapshot is published: an Envoy that reconnects to a
restarted control plane keeps what it has until the first translation is done, and a SotW
client presenting exactly the versions it would be sent gets nothing and counts as ACKed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import grpc
import structlog
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.protobuf.message import Message
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from gateweave.xds.auth import ServerTls, peer_node
from gateweave.xds.snapshot_cache import (
    CLUSTER,
    CORE_ORDER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    WILDCARD_TYPES,
    NodeSnapshot,
    Resource,
    make_snapshot,
    set_version,
    short_type,
)

log = structlog.get_logger("gateweave.xds.server")

NACK_LOG_CAP = 512  # characters of a NACK message written to the log
NACK_KEEP_CAP = 4096  # characters of a NACK message kept in NodeStatus

# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class Nack:
    type_url: str
    message: str
    version: str  # the rejected version (SotW version_info / Delta system_version_info)


def split_node(node_id: str) -> tuple[str, str]:
    """(node, pod) of the id an Envoy gives: ``ns/name/pod`` -> ("ns/name", "pod"); an id
    with fewer segments is a node of its own, pod ""."""
    parts = node_id.split("/", 2)
    if len(parts) == 3 and all(parts):
        return f"{parts[0]}/{parts[1]}", parts[2]
    return node_id, ""


@dataclass(frozen=True)
class PodStatus:
    """One pod of a node (its streams): ``acked`` the current snapshot; ``error``: its NACK."""

    name: str
    acked: bool = False
    error: str | None = None


@dataclass(frozen=True)
class NodeStatus:
    """What the data plane of one node did with its snapshot.

    ``acked``: connected, and every type of the current snapshot was delivered and
    ACKed. ``error``: the message of the last NACK while the current snapshot is not
    accepted (``None`` once it is). ``acked_versions``: the last ACKed version per
    type URL (of the most recent stream). ``pods``: per pod (streams whose node id named
    one, by name), what it did; empty when no stream named a pod.
    """

    node_id: str
    connected: bool = False
    streams: int = 0
    snapshot_version: str | None = None
    acked: bool = False
    error: str | None = None
    last_nack: Nack | None = None
    acked_versions: Mapping[str, str] = field(default_factory=dict)
    pods: tuple[PodStatus, ...] = ()


StatusCallback = Callable[[str, NodeStatus], None]

# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class _Metrics:
    pushes: Counter
    acks: Counter
    nacks: Counter
    streams: Gauge


DEFAULT_REGISTRY: CollectorRegistry = REGISTRY  # prometheus_client's global one
_METRICS: dict[int, tuple[CollectorRegistry, _Metrics]] = {}


def _metrics_for(registry: CollectorRegistry) -> _Metrics:
    """One set of collectors per registry, so several servers can share one."""
    found = _METRICS.get(id(registry))
    if found is not None and found[0] is registry:
        return found[1]
    metrics = _Metrics(
        pushes=Counter(
            "gateweave_xds_pushes", "xDS responses sent", ["type_url"], registry=registry
        ),
        acks=Counter("gateweave_xds_acks", "xDS ACKs received", ["type_url"], registry=registry),
        nacks=Counter("gateweave_xds_nacks", "xDS NACKs received", ["type_url"], registry=registry),
        streams=Gauge(
            "gateweave_xds_connected_streams",
            "open ADS streams",
            ["protocol"],
            registry=registry,
        ),
    )
    _METRICS[id(registry)] = (registry, metrics)
    return metrics


# ---------------------------------------------------------------- sessions


class _TypeState:
    """What one stream knows about one type URL."""

    def __init__(self, type_url: str) -> None:
        self.type_url = type_url
        self.subscribed = False
        self.wildcard = False
        self.names: set[str] = set()
        self.acked_version: str | None = None
        self.nack: Nack | None = None  # unresolved: cleared by the next ACK
        # SotW
        self.presented: str | None = (
            None  # the version a client had before this stream (a reconnect)
        )
        self.last_nonce = ""
        self.sent_version: str | None = None
        self.outstanding = False
        self.nacked_version: str | None = None
        # Delta: the client's view (name -> version), responses in flight
        # (nonce -> (rollback, system version, what was sent)), rejected name -> version
        self.known: dict[str, str] = {}
        self.pending: dict[str, tuple[dict[str, str | None], str, dict[str, str | None]]] = {}
        self.rejected: dict[str, str | None] = {}
        self.answered = False
        # A NACK is retried (the same resources sent again) after a backoff: what Envoy
        # rejected may have failed for a reason outside the configuration (a port another
        # process held), which nothing else would ever make it try again.
        self.retries = 0  # since the last ACK
        self.retry: asyncio.TimerHandle | None = None


class _Session:
    protocol: ClassVar[str]

    def __init__(self, server: AdsServer, allowed: str | None = None) -> None:
        self.server = server
        self.allowed = allowed  # with mutual TLS: the node the client's certificate names
        self.refused: str | None = None  # the node it asked for instead
        self.node_id: str | None = None  # the node it is served as (a Gateway)
        self.pod = ""  # the pod its node id named, if any
        self.types: dict[str, _TypeState] = {}
        self.desired: dict[str, Mapping[str, Resource]] | None = None
        self.converged: str | None = None  # the snapshot version ``desired`` fully equals
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._wakeup = asyncio.Event()
        self._answered = asyncio.Event()
        self._nonce = 0
        self.closed = False

    # -- protocol-specific

    def on_request(self, request: Any) -> None:
        raise NotImplementedError

    def push(self, type_url: str) -> bool:
        """Send what the client lacks of ``type_url``; ``True`` if a response went out."""
        raise NotImplementedError

    def settled(self, type_url: str) -> bool:
        raise NotImplementedError

    def in_sync(self, type_url: str) -> bool:
        raise NotImplementedError

    # -- shared

    def state(self, type_url: str) -> _TypeState:
        st = self.types.get(type_url)
        if st is None:
            st = self.types[type_url] = _TypeState(type_url)
        return st

    def next_nonce(self) -> str:
        self._nonce += 1
        return str(self._nonce)

    def selected(self, st: _TypeState) -> dict[str, Resource]:
        table = self.desired.get(st.type_url, {}) if self.desired is not None else {}
        if st.wildcard:
            return dict(table)
        return {n: r for n, r in table.items() if n in st.names}

    def unsubscribed_in_sync(self, type_url: str) -> bool:
        """A type the client never asked for is fine unless it is a wildcard one we have."""
        has = bool(self.desired and self.desired.get(type_url))
        return not (has and type_url in WILDCARD_TYPES)

    def send(self, type_url: str, response: Message) -> None:
        self.server._metrics.pushes.labels(type_url).inc()
        self._queue.put_nowait(response)

    def learn_node(self, node_id: str) -> bool:
        """Take the node of a request; ``False`` if the client may not ask as that node."""
        if self.refused is not None:
            return False
        node, pod = split_node(node_id)
        if self.node_id is None and self.allowed is not None and node != self.allowed:
            self.refused = node_id
            log.warning(
                "xDS: client refused: its certificate names another node",
                node=node_id,
                certificate_node=self.allowed,
                protocol=self.protocol,
            )
            self.close()
            return False
        if self.node_id is None and node_id:
            self.node_id, self.pod = node, pod
            self.server._register(self)
            self._wakeup.set()
        return True

    def acked(self, st: _TypeState, version: str) -> None:
        st.acked_version = version
        st.nack = None
        st.retries = 0
        if st.retry is not None:
            st.retry.cancel()
            st.retry = None
        self.server._metrics.acks.labels(st.type_url).inc()
        log.debug(
            "xDS ACK",
            node=self.node_id,
            protocol=self.protocol,
            type=short_type(st.type_url),
            version=version,
        )

    def nacked(self, st: _TypeState, message: str, version: str) -> None:
        nack = Nack(st.type_url, message[:NACK_KEEP_CAP], version)
        st.nack = nack
        self.server._metrics.nacks.labels(st.type_url).inc()
        if self.node_id is not None:
            self.server._last_nack[self.node_id] = nack
        cut = message[:NACK_LOG_CAP] + ("..." if len(message) > NACK_LOG_CAP else "")
        delay = min(self.server.nack_retry_max, self.server.nack_retry * 2**st.retries)
        log.warning(
            "xDS NACK",
            node=self.node_id,
            protocol=self.protocol,
            type=short_type(st.type_url),
            version=version,
            retry_in_s=round(delay),
            error=cut,
        )
        if st.retry is not None:
            st.retry.cancel()
        st.retry = asyncio.get_running_loop().call_later(delay, self._retry, st)
        st.retries += 1

    def _retry(self, st: _TypeState) -> None:
        """Send again what the client rejected, unless something newer was sent since."""
        st.retry = None
        if st.nack is None or self.closed:
            return
        self.forget_rejection(st)
        if self.push(st.type_url) and self.node_id is not None:
            self.server._emit(self.node_id)

    def forget_rejection(self, st: _TypeState) -> None:
        raise NotImplementedError

    def wake(self) -> None:
        self._wakeup.set()

    def close(self) -> None:
        self._queue.put_nowait(None)

    def synced(self, target: NodeSnapshot) -> bool:
        if self.converged != target.version or self.desired is None:
            return False
        return all(self.in_sync(t) for t in set(self.types) | set(target.resources))

    async def serve(self, requests: AsyncIterator[Any]) -> AsyncIterator[Message]:
        self.server._metrics.streams.labels(self.protocol).inc()
        reader = asyncio.create_task(self._read(requests))
        driver = asyncio.create_task(self._drive())
        try:
            while True:
                item = await self._queue.get()
                if item is None:
                    break
                yield item
        finally:
            self.closed = True
            for st in self.types.values():
                if st.retry is not None:
                    st.retry.cancel()
                    st.retry = None
            reader.cancel()
            driver.cancel()
            self.server._metrics.streams.labels(self.protocol).dec()
            self.server._unregister(self)

    async def _read(self, requests: AsyncIterator[Any]) -> None:
        try:
            async for request in requests:
                if self.refused is not None:
                    break
                try:
                    self.on_request(request)
                except Exception:
                    log.exception("xDS: failed to handle a request", node=self.node_id)
                self._answered.set()
                if self.node_id is not None:
                    self.server._emit(self.node_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke (client gone)
            log.debug("xDS stream ended", node=self.node_id, error=str(exc))
        finally:
            self._queue.put_nowait(None)

    async def _drive(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._converge()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("xDS: push failed", node=self.node_id)
            if self.node_id is not None:
                self.server._emit(self.node_id)

    async def _converge(self) -> None:
        target = self.server._snapshots.get(self.node_id) if self.node_id else None
        if target is None or self.converged == target.version:
            return
        if self.desired is None:  # first snapshot of this stream: Envoy orders it itself
            self.desired = dict(target.resources)
            for t in _ordered(set(self.types) | set(target.resources)):
                self.push(t)
            self.converged = target.version
            return
        old = self.desired
        desired = self.desired = dict(old)
        # 1. make: other types (secrets...), then clusters, as the union of old and new
        others = [t for t in _ordered(set(old) | set(target.resources)) if t not in CORE_ORDER]
        for t in others:
            desired[t] = {**old.get(t, {}), **target.of(t)}
            self.push(t)
        old_c, new_c = old.get(CLUSTER, {}), target.of(CLUSTER)
        old_e, new_e = old.get(ENDPOINT, {}), target.of(ENDPOINT)
        gone = old_c.keys() - new_c.keys()
        union_c = {**{n: old_c[n] for n in gone}, **new_c}
        # Old ClusterLoadAssignments stay until the break: those of clusters that go, and
        # that of a cluster that became a DNS cluster (it has none; the EDS one it
        # replaces keeps its endpoints while the new one resolves).
        union_e = {**old_e, **new_e}
        desired[CLUSTER], desired[ENDPOINT] = union_c, union_e
        if self.push(CLUSTER):
            self.push(ENDPOINT)
            await self._settle([CLUSTER])
        else:
            self.push(ENDPOINT)

        # 2. listeners, then routes
        desired[LISTENER], desired[ROUTE] = target.of(LISTENER), target.of(ROUTE)
        self.push(LISTENER)
        self.push(ROUTE)

        # 3. break: drop what nothing refers to, once listeners and routes are accepted
        dropping = any(desired[t].keys() != target.of(t).keys() for t in others)
        if dropping or union_c.keys() != new_c.keys() or union_e.keys() != new_e.keys():
            ok = await self._settle([LISTENER]) and await self._settle(
                [ROUTE], want=set(target.of(ROUTE))
            )
            if not ok:
                log.warning(
                    "xDS: keeping unreferenced clusters until listeners and routes are accepted",
                    node=self.node_id,
                    clusters=len(gone),
                )
                return
            desired[CLUSTER], desired[ENDPOINT] = new_c, new_e
            self.push(CLUSTER)
            self.push(ENDPOINT)
            for t in others:
                desired[t] = target.of(t)
                self.push(t)
        self.converged = target.version

    async def _settle(self, type_urls: list[str], want: set[str] | None = None) -> bool:
        """Wait (bounded) until the types have no response in flight; ``True`` if ACKed.

        ``want``: names the client should subscribe to first (the routes of new
        listeners); if it never asks for some (routes no listener uses), the wait ends
        at the timeout without failing.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.server.ack_timeout
        while True:
            settled = all(self.settled(t) for t in type_urls)
            st = self.types.get(type_urls[0])
            subscribed = not want or (st is not None and (st.wildcard or want <= st.names))
            remaining = deadline - loop.time()
            if settled and (subscribed or remaining <= 0):
                return all(self.state(t).nack is None for t in type_urls)
            if remaining <= 0:
                log.warning(
                    "xDS: no answer in time",
                    node=self.node_id,
                    types=",".join(short_type(t) for t in type_urls),
                    timeout_s=self.server.ack_timeout,
                )
                loop.call_later(self.server.ack_timeout, self._wakeup.set)  # retry later
                return False
            self._answered.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._answered.wait()


def _ordered(type_urls: set[str]) -> list[str]:
    return sorted(t for t in type_urls if t not in CORE_ORDER) + [
        t for t in CORE_ORDER if t in type_urls
    ]


class _SotwSession(_Session):
    protocol = "sotw"

    def on_request(self, request: discovery_pb2.DiscoveryRequest) -> None:
        if not self.learn_node(request.node.id):
            return
        st = self.state(request.type_url)
        names = set(request.resource_names)
        if not names and request.type_url not in WILDCARD_TYPES:
            # The client dropped every name (e.g. its last EDS cluster): it has no watch
            # left and ignores responses of this type, even those in flight. Whatever
            # the nonce, its next request for the type is a new subscription.
            st.subscribed = st.outstanding = False
            st.names, st.sent_version = set(), None
            return
        nonce = request.response_nonce
        if not nonce and not st.subscribed and request.version_info:
            st.presented = request.version_info
        if nonce and st.last_nonce and st.subscribed:
            if nonce != st.last_nonce:
                return  # stale: a response crossed this request
            st.outstanding = False
            if request.HasField("error_detail"):
                self.nacked(st, request.error_detail.message, st.sent_version or "")
                st.nacked_version = st.sent_version
            else:
                self.acked(st, st.sent_version or "")
                st.nacked_version = None
        st.subscribed = True
        st.wildcard = request.type_url in WILDCARD_TYPES and (not names or "*" in names)
        st.names = names - {"*"}
        self.push(request.type_url)

    def push(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        if self.desired is None or st is None or not st.subscribed:
            return False
        chosen = self.selected(st)
        version = set_version(chosen)
        if version in (st.sent_version, st.nacked_version):
            return False
        if st.sent_version is None and version == st.presented:
            # A client reconnecting (e.g. to a restarted control plane) that already has
            # exactly this: nothing to send, and it counts as acknowledged.
            st.presented = None
            st.sent_version = st.acked_version = version
            return False
        nonce = self.next_nonce()
        response = discovery_pb2.DiscoveryResponse(
            version_info=version, type_url=type_url, nonce=nonce
        )
        response.resources.extend(chosen[n].body for n in sorted(chosen))
        st.last_nonce, st.sent_version, st.outstanding = nonce, version, True
        self.send(type_url, response)
        return True

    def forget_rejection(self, st: _TypeState) -> None:
        if st.outstanding:
            return  # a response is in flight: its answer decides
        st.nacked_version = st.sent_version = None

    def settled(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        return st is None or not st.outstanding

    def in_sync(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        if st is None or not st.subscribed:
            return self.unsubscribed_in_sync(type_url)
        version = set_version(self.selected(st))
        return not st.outstanding and version == st.sent_version == st.acked_version


class _DeltaSession(_Session):
    protocol = "delta"

    def on_request(self, request: discovery_pb2.DeltaDiscoveryRequest) -> None:
        if not self.learn_node(request.node.id):
            return
        st = self.state(request.type_url)
        if request.response_nonce:
            entry = st.pending.pop(request.response_nonce, None)
            if entry is not None:
                rollback, version, sent = entry
                if request.HasField("error_detail"):
                    for name, previous in rollback.items():
                        st.rejected[name] = sent[name]
                        if st.known.get(name) != sent[name]:
                            continue  # a later response changed it again
                        if previous is None:
                            st.known.pop(name, None)
                        else:
                            st.known[name] = previous
                    self.nacked(st, request.error_detail.message, version)
                else:
                    self.acked(st, version)
        first = not st.subscribed
        subscribe = list(request.resource_names_subscribe)
        unsubscribe = list(request.resource_names_unsubscribe)
        if first:
            st.subscribed = True
            st.wildcard = request.type_url in WILDCARD_TYPES and (not subscribe or "*" in subscribe)
            st.known = dict(request.initial_resource_versions)
        for name in subscribe:
            if name == "*":
                st.wildcard = True
            else:
                st.names.add(name)
        for name in unsubscribe:
            if name == "*":
                st.wildcard = False
            else:
                st.names.discard(name)
                st.known.pop(name, None)
        if first or subscribe or unsubscribe:
            self.push(request.type_url)

    def push(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        if self.desired is None or st is None or not st.subscribed:
            return False
        chosen = self.selected(st)
        for name in list(st.rejected):  # forget rejections of versions no longer wanted
            want = chosen[name].version if name in chosen else None
            if st.rejected[name] != want:
                del st.rejected[name]
        changed = {
            n: r for n, r in chosen.items() if st.known.get(n) != r.version and n not in st.rejected
        }
        removed = sorted(n for n in st.known if n not in chosen and n not in st.rejected)
        if not changed and not removed and st.answered:
            return False
        st.answered = True  # a first subscription is always answered, even if empty
        rollback: dict[str, str | None] = {n: st.known.get(n) for n in changed}
        sent: dict[str, str | None] = {n: r.version for n, r in changed.items()}
        for name in removed:
            rollback[name] = st.known.pop(name)
            sent[name] = None
        for name, res in changed.items():
            st.known[name] = res.version
        nonce = self.next_nonce()
        version = set_version(chosen)
        st.pending[nonce] = (rollback, version, sent)
        response = discovery_pb2.DeltaDiscoveryResponse(
            system_version_info=version,
            type_url=type_url,
            nonce=nonce,
            removed_resources=removed,
        )
        for name in sorted(changed):
            res = changed[name]
            response.resources.add(name=name, version=res.version).resource.CopyFrom(res.body)
        self.send(type_url, response)
        return True

    def forget_rejection(self, st: _TypeState) -> None:
        st.rejected.clear()

    def settled(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        return st is None or not st.pending

    def in_sync(self, type_url: str) -> bool:
        st = self.types.get(type_url)
        if st is None or not st.subscribed:
            return self.unsubscribed_in_sync(type_url)
        chosen = {n: r.version for n, r in self.selected(st).items()}
        return not st.pending and chosen == st.known


# ---------------------------------------------------------------- gRPC service


class _Service(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    def __init__(self, server: AdsServer) -> None:
        self._server = server

    async def StreamAggregatedResources(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Message]:
        async for response in self._stream(_SotwSession, request_iterator, context):
            yield response

    async def DeltaAggregatedResources(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Message]:
        async for response in self._stream(_DeltaSession, request_iterator, context):
            yield response

    async def _stream(
        self, kind: type[_Session], requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Message]:
        allowed = None
        if self._server.tls is not None:
            allowed = peer_node(context.auth_context())
            if allowed is None:
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "the client certificate names no Gateway (spiffe://gateweave/ns/NS/gateway/NAME)",
                )
        session = kind(self._server, allowed)
        async for response in self._server._serve(session, requests):
            yield response
        if session.refused is not None:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"this client certificate is for node {allowed!r}, not {session.refused!r}",
            )


def _pods(sessions: set[_Session], target: NodeSnapshot | None) -> tuple[PodStatus, ...]:
    """Each named pod's status, from its streams (more than one while it reconnects)."""
    by_pod: dict[str, list[_Session]] = {}
    for session in sessions:
        if session.pod:
            by_pod.setdefault(session.pod, []).append(session)
    out = []
    for pod, streams in sorted(by_pod.items()):
        acked = target is not None and all(s.synced(target) for s in streams)
        error = (
            None
            if acked
            else next(
                (
                    st.nack.message
                    for s in sorted(streams, key=id)
                    for t, st in s.types.items()
                    if st.nack is not None and not s.in_sync(t)
                ),
                None,
            )
        )
        out.append(PodStatus(name=pod, acked=acked, error=error))
    return tuple(out)


# ---------------------------------------------------------------- the server


class AdsServer:
    """Aggregated Discovery Service (SotW and Delta) over per-node snapshots.

    ``tls``: mutual TLS (each client served as the node its certificate names); ``None``:
    plain text, every client served as the node it says it is.

    ``ack_timeout`` bounds each wait of a make-before-break push for Envoy's ACK.
    Metrics go to ``registry`` (default: :data:`DEFAULT_REGISTRY`). Every method
    must be called from the event loop the server runs in.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        ack_timeout: float = 5.0,
        nack_retry: float = 1.0,
        nack_retry_max: float = 60.0,
        tls: ServerTls | None = None,
    ) -> None:
        self.tls = tls
        self.ack_timeout = ack_timeout
        # A rejected configuration is sent again after nack_retry seconds, doubling per
        # NACK up to nack_retry_max, until the client ACKs (or something newer is sent).
        self.nack_retry = nack_retry
        self.nack_retry_max = nack_retry_max
        self._metrics = _metrics_for(registry if registry is not None else DEFAULT_REGISTRY)
        self._snapshots: dict[str, NodeSnapshot] = {}
        self._sessions: dict[str, set[_Session]] = {}
        self._open: set[_Session] = set()
        self._callbacks: list[StatusCallback] = []
        self._last_status: dict[str, NodeStatus] = {}
        self._last_nack: dict[str, Nack] = {}
        self._grpc: grpc.aio.Server | None = None
        self._stopping = False
        self.host = ""
        self.port = 0

    # -- lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host:port`` (0: a free port); returns the port."""
        bound = await self._listen(f"{host}:{port}")
        self.host, self.port = host, bound
        log.info("xDS server listening", address=f"{host}:{bound}", mtls=self.tls is not None)
        return bound

    async def start_unix(self, path: str) -> None:
        """Listen on the unix socket ``path``, which only its owner may connect to (0600):
        on one host, that is how the Envoys this user started are told from anyone else."""
        await self._listen(f"unix:{path}")
        os.chmod(path, 0o600)  # (its directory is 0700: no one else could reach it meanwhile)
        self.host, self.port = f"unix:{path}", 0
        log.info("xDS server listening", address=f"unix:{path}")

    async def _listen(self, address: str) -> int:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
                ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ]
        )
        ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(_Service(self), server)
        bound = (
            server.add_insecure_port(address)
            if self.tls is None
            else server.add_secure_port(address, self.tls.credentials())
        )
        if bound == 0:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._grpc, self._stopping = server, False
        return bound

    async def stop(self, grace: float = 0.5) -> None:
        self._stopping = True
        for session in list(self._open):
            session.close()
        if self._grpc is not None:
            await self._grpc.stop(grace)
            self._grpc = None

    # -- snapshots

    def set_snapshot(self, node_id: str, resources: Mapping[str, Mapping[str, Message]]) -> str:
        """Publish what ``node_id`` should have; returns the snapshot version."""
        return self.publish(node_id, make_snapshot(resources))

    def publish(self, node_id: str, snapshot: NodeSnapshot) -> str:
        """Publish an already versioned snapshot (e.g. from
        :class:`gateweave.xds.incremental.IncrementalSnapshots`); returns its version."""
        current = self._snapshots.get(node_id)
        if current is not None and current.version == snapshot.version:
            return snapshot.version
        self._snapshots[node_id] = snapshot
        for session in self._sessions.get(node_id, ()):
            session.wake()
        self._emit(node_id)
        return snapshot.version

    def remove_snapshot(self, node_id: str) -> None:
        """Forget ``node_id``: its Envoy keeps what it has (it is about to be stopped)."""
        if self._snapshots.pop(node_id, None) is not None:
            self._emit(node_id)
        if not self._sessions.get(node_id):
            self._last_status.pop(node_id, None)
            self._last_nack.pop(node_id, None)

    def snapshot(self, node_id: str) -> NodeSnapshot | None:
        return self._snapshots.get(node_id)

    # -- status

    def on_status(self, callback: StatusCallback) -> Callable[[], None]:
        """Call ``callback(node_id, status)`` whenever a node's status changes."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback)

    def status(self, node_id: str) -> NodeStatus:
        sessions = self._sessions.get(node_id, set())
        target = self._snapshots.get(node_id)
        acked = bool(sessions) and target is not None and all(s.synced(target) for s in sessions)
        error = None
        acked_versions: dict[str, str] = {}
        for session in sorted(sessions, key=id):
            for t, st in session.types.items():
                if st.acked_version is not None:
                    acked_versions[t] = st.acked_version
                if not acked and st.nack is not None and not session.in_sync(t):
                    error = st.nack.message
        return NodeStatus(
            node_id=node_id,
            connected=bool(sessions),
            streams=len(sessions),
            snapshot_version=target.version if target else None,
            acked=acked,
            error=error,
            last_nack=self._last_nack.get(node_id),
            acked_versions=acked_versions,
            pods=_pods(sessions, target),
        )

    def _emit(self, node_id: str) -> None:
        status = self.status(node_id)
        if self._last_status.get(node_id) == status:
            return
        self._last_status[node_id] = status
        for callback in list(self._callbacks):
            try:
                callback(node_id, status)
            except Exception:
                log.exception("xDS status callback failed")

    # -- streams

    async def _serve(
        self, session: _Session, requests: AsyncIterator[Any]
    ) -> AsyncIterator[Message]:
        if self._stopping:
            return
        self._open.add(session)
        try:
            async for response in session.serve(requests):
                yield response
        finally:
            self._open.discard(session)

    def _register(self, session: _Session) -> None:
        assert session.node_id is not None
        self._sessions.setdefault(session.node_id, set()).add(session)
        log.info(
            "xDS client connected",
            node=session.node_id,
            pod=session.pod or None,
            protocol=session.protocol,
        )
        self._emit(session.node_id)

    def _unregister(self, session: _Session) -> None:
        node_id = session.node_id
        if node_id is None:
            return
        sessions = self._sessions.get(node_id)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._sessions[node_id]
        log.info(
            "xDS client disconnected",
            node=node_id,
            pod=session.pod or None,
            protocol=session.protocol,
        )
        self._emit(node_id)
