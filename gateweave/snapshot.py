"""A snapshot: the whole set of current objects that one translation sees."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gateweave.api import models as m
from gateweave.api.kinds import Key

NN = tuple[str, str]  # (namespace, name)


class ChangeLog:
    """The keys whose model a store changed, in order, the last ``limit`` of them.

    Two snapshots of the same store carry the same log and their positions in it, so a
    consumer that kept the older one can list what differs without comparing every object
    (:meth:`between`); an over-approximation (a key changed and changed back) is possible.
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        self.limit = max(2, limit)
        self._entries: list[Key] = []
        self._first = 0  # position of _entries[0]
        # The store records on its thread while a translation reads in a worker thread.
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        with self._lock:
            return self._first + len(self._entries)

    def record(self, key: Key) -> None:
        """``key``: the store's key of the object (kept as it is: one tuple less per entry)."""
        with self._lock:
            self._entries.append(key)
            if len(self._entries) > self.limit:
                drop = len(self._entries) // 2
                del self._entries[:drop]
                self._first += drop

    def between(self, start: int, end: int) -> list[tuple[str, NN]] | None:
        """The (kind, key) changes after position ``start`` up to ``end``; None when forgotten."""
        with self._lock:
            first = self._first
            if start < first or end < start or end > first + len(self._entries):
                return None
            span = self._entries[start - first : end - first]
        return [(k.kind, (k.namespace, k.name)) for k in span]


@dataclass
class Snapshot:
    """Objects by kind, each mapping keyed by (namespace, name) ("" namespace when cluster-scoped).

    ``changelog``/``position``: set by a :class:`~gateweave.store.Store`, where in the store's
    change log this snapshot was taken (see :class:`ChangeLog`).
    """

    gateway_classes: dict[NN, m.GatewayClass] = field(default_factory=dict)
    gateways: dict[NN, m.Gateway] = field(default_factory=dict)
    listener_sets: dict[NN, m.ListenerSet] = field(default_factory=dict)
    http_routes: dict[NN, m.HTTPRoute] = field(default_factory=dict)
    grpc_routes: dict[NN, m.GRPCRoute] = field(default_factory=dict)
    tls_routes: dict[NN, m.TLSRoute] = field(default_factory=dict)
    tcp_routes: dict[NN, m.TCPRoute] = field(default_factory=dict)
    udp_routes: dict[NN, m.UDPRoute] = field(default_factory=dict)
    reference_grants: dict[NN, m.ReferenceGrant] = field(default_factory=dict)
    backend_tls_policies: dict[NN, m.BackendTLSPolicy] = field(default_factory=dict)
    backends: dict[NN, m.Backend] = field(default_factory=dict)
    backend_traffic_policies: dict[NN, m.BackendTrafficPolicy] = field(default_factory=dict)
    client_traffic_policies: dict[NN, m.ClientTrafficPolicy] = field(default_factory=dict)
    security_policies: dict[NN, m.SecurityPolicy] = field(default_factory=dict)
    gateway_parameters: dict[NN, m.GatewayParameters] = field(default_factory=dict)
    services: dict[NN, m.Service] = field(default_factory=dict)
    endpoint_slices: dict[NN, m.EndpointSlice] = field(default_factory=dict)
    namespaces: dict[NN, m.Namespace] = field(default_factory=dict)
    secrets: dict[NN, m.Secret] = field(default_factory=dict)
    config_maps: dict[NN, m.ConfigMap] = field(default_factory=dict)
    changelog: ChangeLog | None = field(default=None, compare=False, repr=False)
    position: int = field(default=0, compare=False, repr=False)

    def by_kind(self, kind: str) -> dict[NN, Any]:
        mapping: dict[NN, Any] = getattr(self, _FIELD_BY_KIND[kind])
        return mapping

    def add(self, obj: Any) -> None:
        meta: m.ObjectMeta = obj.metadata
        self.by_kind(obj.kind)[(meta.namespace, meta.name)] = obj

    def get(self, key: Key) -> Any | None:
        return self.by_kind(key.kind).get((key.namespace, key.name))

    def objects(self) -> Iterable[Any]:
        for name in _FIELD_BY_KIND.values():
            yield from getattr(self, name).values()

    @classmethod
    def from_objects(cls, objects: Iterable[Any]) -> Snapshot:
        snap = cls()
        for obj in objects:
            snap.add(obj)
        return snap


_FIELD_BY_KIND = {
    "GatewayClass": "gateway_classes",
    "Gateway": "gateways",
    "ListenerSet": "listener_sets",
    "HTTPRoute": "http_routes",
    "GRPCRoute": "grpc_routes",
    "TLSRoute": "tls_routes",
    "TCPRoute": "tcp_routes",
    "UDPRoute": "udp_routes",
    "ReferenceGrant": "reference_grants",
    "BackendTLSPolicy": "backend_tls_policies",
    "Backend": "backends",
    "BackendTrafficPolicy": "backend_traffic_policies",
    "ClientTrafficPolicy": "client_traffic_policies",
    "SecurityPolicy": "security_policies",
    "GatewayParameters": "gateway_parameters",
    "Service": "services",
    "EndpointSlice": "endpoint_slices",
    "Namespace": "namespaces",
    "Secret": "secrets",
    "ConfigMap": "config_maps",
}
