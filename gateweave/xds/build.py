"""``build``: one Gateway's xDS IR -> the Envoy resources that implement it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf.message import Message

from gateweave import ir
from gateweave.xds import clusters, listeners, routes, telemetry
from gateweave.xds.resources import Resources, serialize

M = TypeVar("M", bound=Message)


def _put(into: dict[str, M], name: str, msg: M) -> None:
    """Add ``msg``; a second, different resource of the same name is an IR bug."""
    known = into.get(name)
    if known is not None and serialize(known) != serialize(msg):
        raise ValueError(f"two different {msg.DESCRIPTOR.name} resources named {name!r}")
    into[name] = msg


def _sorted(items: dict[str, M]) -> dict[str, M]:
    return {name: items[name] for name in sorted(items)}


def udp_target(
    port: ir.Port, by_name: Mapping[str, ir.Cluster]
) -> tuple[str, tuple[cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment | None] | None]:
    """The cluster a UDP port's proxy sends to, and the weighted cluster to add for it, if any.

    udp_proxy has no weighted clusters: several backends become one cluster with a locality
    per backend, named after the proxy (with no ClusterLoadAssignment when it resolves names).
    """
    if port.udp is None:
        raise ValueError(f"UDP port {port.name} has no proxy")
    backends = tuple(b for b in port.udp.backends if b.weight > 0)
    if len(backends) == 1:
        return backends[0].cluster, None
    target = f"{port.udp.name}#weighted"
    if target in by_name:
        raise ValueError(f"cluster name {target!r} is reserved")
    return target, clusters.weighted_cluster(target, backends, by_name)


def build(gw: ir.XdsGateway) -> Resources:
    """Map ``gw`` onto Listeners, RouteConfigurations, Clusters and ClusterLoadAssignments.

    Pure and deterministic: the same IR gives byte-identical resources (serialised
    with ``deterministic=True``), each dict ordered by name. TLS material is inline in
    the transport sockets, so no SDS Secret is produced.
    """
    out = Resources()
    by_name: dict[str, ir.Cluster] = {}
    for c in telemetry.gateway_clusters(gw):
        if by_name.setdefault(c.name, c) != c:
            raise ValueError(f"two different clusters named {c.name!r}")
        _put(out.clusters, c.name, clusters.cluster(c))
        cla = clusters.load_assignment(c)
        if cla is not None:  # a DNS cluster has its endpoints inline
            _put(out.endpoints, c.name, cla)

    for port in gw.ports:
        if port.protocol == "HTTP":
            listener = listeners.http_listener(gw, port)
            assert port.http is not None
            _put(
                out.routes, port.http.name, routes.route_configuration(port.http, port.port, False)
            )
        elif port.protocol == "TLS":
            listener = listeners.tls_listener(gw, port)
            for chain in port.filter_chains:
                if chain.http is not None:
                    config = routes.route_configuration(chain.http, port.port, True)
                    _put(out.routes, chain.http.name, config)
        elif port.protocol == "TCP":
            listener = listeners.tcp_listener(gw, port)
        elif port.protocol == "UDP":
            target, weighted = udp_target(port, by_name)
            if weighted is not None:
                _put(out.clusters, target, weighted[0])
                if weighted[1] is not None:
                    _put(out.endpoints, target, weighted[1])
            listener = listeners.udp_listener(gw, port, target)
        else:
            raise ValueError(f"port {port.name}: unknown protocol {port.protocol!r}")
        _put(out.listeners, port.name, listener)

    return Resources(
        listeners=_sorted(out.listeners),
        routes=_sorted(out.routes),
        clusters=_sorted(out.clusters),
        endpoints=_sorted(out.endpoints),
        secrets=_sorted(out.secrets),
    )
