"""The output of the xDS builder: Envoy resources by type URL, and their versions."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message

LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

# The order in which an ADS server should push a full state (make before break).
TYPE_URLS: tuple[str, ...] = (CLUSTER, ENDPOINT, SECRET, LISTENER, ROUTE)


def pack(msg: Message) -> any_pb2.Any:
    """``msg`` as a protobuf Any (a typed_config), serialised deterministically (map entries
    in key order) as the resources around it are: otherwise a map inside (a JSON log format's
    ``Struct``, ext_authz's context extensions) comes out in an order of the process's own,
    and a restarted gateweave would version the same configuration differently."""
    out = any_pb2.Any()
    out.Pack(msg, deterministic=True)
    return out


def duration(seconds: float) -> duration_pb2.Duration:
    """``seconds`` as a protobuf Duration."""
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1_000_000_000))
    return out


def _assert_type(url: str, message: type[Message]) -> None:
    assert url == "type.googleapis.com/" + message.DESCRIPTOR.full_name, url


_assert_type(LISTENER, listener_pb2.Listener)
_assert_type(ROUTE, route_pb2.RouteConfiguration)
_assert_type(CLUSTER, cluster_pb2.Cluster)
_assert_type(ENDPOINT, endpoint_pb2.ClusterLoadAssignment)
_assert_type(SECRET, secret_pb2.Secret)


@dataclass(frozen=True)
class Resources:
    """Every Envoy resource of one build, by type URL then by resource name.

    Each inner dict is ordered by name, so iterating a ``Resources`` is deterministic.
    """

    listeners: dict[str, listener_pb2.Listener] = field(default_factory=dict)
    routes: dict[str, route_pb2.RouteConfiguration] = field(default_factory=dict)
    clusters: dict[str, cluster_pb2.Cluster] = field(default_factory=dict)
    endpoints: dict[str, endpoint_pb2.ClusterLoadAssignment] = field(default_factory=dict)
    secrets: dict[str, secret_pb2.Secret] = field(default_factory=dict)

    def by_type(self) -> dict[str, dict[str, Message]]:
        """The resources keyed by type URL, in :data:`TYPE_URLS` order."""
        return {
            CLUSTER: dict(self.clusters),
            ENDPOINT: dict(self.endpoints),
            SECRET: dict(self.secrets),
            LISTENER: dict(self.listeners),
            ROUTE: dict(self.routes),
        }

    def __getitem__(self, type_url: str) -> dict[str, Message]:
        return self.by_type()[type_url]

    def versions(self) -> dict[str, dict[str, str]]:
        """``resource_version`` of every resource, by type URL then name."""
        return {
            url: {name: resource_version(msg) for name, msg in items.items()}
            for url, items in self.by_type().items()
        }


def serialize(msg: Message) -> bytes:
    """The deterministic wire bytes of ``msg`` (what versions are computed from)."""
    return msg.SerializeToString(deterministic=True)


def resource_version(msg: Message) -> str:
    """A content hash of ``msg``: equal messages give equal versions."""
    digest = hashlib.sha256(msg.DESCRIPTOR.full_name.encode() + b"\0" + serialize(msg))
    return digest.hexdigest()[:16]


_STAT_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


def stat_name(name: str) -> str:
    """``name`` made safe for an Envoy stat prefix.

    Envoy splits stat names on ``.`` and Prometheus output mangles ``/`` and ``:``, so
    anything other than letters, digits, ``_`` and ``-`` becomes ``_``.
    """
    return _STAT_UNSAFE.sub("_", name) or "_"


# Protobuf wire bytes, for fields written by number (Envoy has them, the pinned xds-protos not yet:
# merged into a message with MergeFromString, kept as unknown fields and sent as they are) and for
# messages assembled from cached parts.


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    """The wire bytes of a varint (bool, enum, integer) field ``number`` set to ``value``."""
    return _varint(number << 3) + _varint(value)


def length_tag(number: int, size: int) -> bytes:
    """The key and length that put ``size`` bytes (a message, a string) as field ``number`` of
    its parent message."""
    return _varint(number << 3 | 2) + _varint(size)


def string_field(number: int, value: str) -> bytes:
    """The wire bytes of a string field ``number`` set to ``value``."""
    data = value.encode()
    return length_tag(number, len(data)) + data
