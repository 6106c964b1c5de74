"""Versioned per-node snapshots of Envoy resources, as the ADS server serves them.

A snapshot is what one Envoy (one Gateway, one xDS node id) should have: resources by
type URL, then by name. Every version is derived from content (a hash of the
deterministic protobuf serialisation), so publishing the same resources twice is a
no-op and versions agree across restarts of the control plane.

One twist: the version of a ClusterLoadAssignment also covers the Cluster of the same
name. Envoy warms a modified EDS cluster until it receives that cluster's endpoints
again (15 s when they do not come), so whenever a Cluster changes, its CLA must be
re-sent; mixing the Cluster version into the CLA version makes every diff (SotW or
Delta) do exactly that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from google.protobuf import any_pb2
from google.protobuf.message import Message

TYPE_PREFIX = "type.googleapis.com/"
CLUSTER = TYPE_PREFIX + "envoy.config.cluster.v3.Cluster"
ENDPOINT = TYPE_PREFIX + "envoy.config.endpoint.v3.ClusterLoadAssignment"
LISTENER = TYPE_PREFIX + "envoy.config.listener.v3.Listener"
ROUTE = TYPE_PREFIX + "envoy.config.route.v3.RouteConfiguration"
SECRET = TYPE_PREFIX + "envoy.extensions.transport_sockets.tls.v3.Secret"

# Types Envoy subscribes to as a whole (every resource the server has).
WILDCARD_TYPES = frozenset({CLUSTER, LISTENER})
# The order Envoy needs things in: dependencies first.
CORE_ORDER = (CLUSTER, ENDPOINT, LISTENER, ROUTE)


def short_type(type_url: str) -> str:
    """``type.googleapis.com/envoy.config.cluster.v3.Cluster`` -> ``Cluster``."""
    return type_url.rsplit(".", 1)[-1]


def type_url_of(message: Message) -> str:
    return TYPE_PREFIX + message.DESCRIPTOR.full_name


def digest(parts: Iterable[bytes]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    version: str
    body: any_pb2.Any


def set_version(resources: Mapping[str, Resource]) -> str:
    """The version of a set of resources: a hash of its sorted (name, version) pairs."""
    return digest(
        part
        for name in sorted(resources)
        for part in (name.encode(), resources[name].version.encode())
    )


_EMPTY: Mapping[str, Resource] = MappingProxyType({})


@dataclass(frozen=True)
class NodeSnapshot:
    version: str
    resources: Mapping[str, Mapping[str, Resource]] = field(default_factory=dict)

    def of(self, type_url: str) -> Mapping[str, Resource]:
        return self.resources.get(type_url, _EMPTY)

    def type_urls(self) -> list[str]:
        """Every type URL with resources, in push order (others first, then core order)."""
        others = sorted(t for t in self.resources if t not in CORE_ORDER)
        return others + [t for t in CORE_ORDER if t in self.resources]


def make_snapshot(resources: Mapping[str, Mapping[str, Message]]) -> NodeSnapshot:
    """Pack and version ``resources`` (type URL -> name -> proto message).

    Raises ``ValueError`` when a message does not match its type URL: Envoy would NACK
    the whole response.
    """
    packed: dict[str, dict[str, tuple[bytes, any_pb2.Any]]] = {}
    for type_url, by_name in resources.items():
        if not by_name:
            continue
        out: dict[str, tuple[bytes, any_pb2.Any]] = {}
        for name, message in by_name.items():
            if type_url_of(message) != type_url:
                raise ValueError(
                    f"resource {name!r}: a {message.DESCRIPTOR.full_name} under {type_url}"
                )
            raw = message.SerializeToString(deterministic=True)
            body = any_pb2.Any(type_url=type_url, value=raw)
            out[name] = (raw, body)
        packed[type_url] = out

    cluster_versions = {name: digest([raw]) for name, (raw, _) in packed.get(CLUSTER, {}).items()}
    versioned: dict[str, Mapping[str, Resource]] = {}
    for type_url, by_name in packed.items():
        table: dict[str, Resource] = {}
        for name in sorted(by_name):
            raw, body = by_name[name]
            parts = [raw]
            if type_url == ENDPOINT and name in cluster_versions:
                parts.append(cluster_versions[name].encode())
            table[name] = Resource(name, digest(parts), body)
        versioned[type_url] = MappingProxyType(table)
    version = digest(
        part
        for type_url in sorted(versioned)
        for part in (type_url.encode(), set_version(versioned[type_url]).encode())
    )
    return NodeSnapshot(version=version, resources=MappingProxyType(versioned))
