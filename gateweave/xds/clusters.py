"""Clusters and their ClusterLoadAssignments."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import any_pb2, duration_pb2, wrappers_pb2

from gateweave import ir
from gateweave.xds import tls
from gateweave.xds.resources import stat_name

CONNECT_TIMEOUT_S = 10
HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
HTTP2_PROTOCOLS = frozenset({"HTTP2", "H2C"})


def ads_source() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )


def _eds_cluster(name: str) -> cluster_pb2.Cluster:
    return cluster_pb2.Cluster(
        name=name,
        alt_stat_name=stat_name(name),
        type=cluster_pb2.Cluster.EDS,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_source()),
        connect_timeout=duration_pb2.Duration(seconds=CONNECT_TIMEOUT_S),
    )


def cluster(c: ir.Cluster) -> cluster_pb2.Cluster:
    """An EDS-over-ADS cluster; its endpoints come in :func:`load_assignment`."""
    out = _eds_cluster(c.name)
    if c.protocol in HTTP2_PROTOCOLS:
        options = http_protocol_options_pb2.HttpProtocolOptions(
            explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
                http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
            )
        )
        packed = any_pb2.Any()
        packed.Pack(options)
        out.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(packed)
    if c.tls is not None:
        alpn: tuple[str, ...] = ()
        if c.protocol in HTTP2_PROTOCOLS:
            alpn = ("h2",)
        elif c.protocol in ("HTTP1", "WEBSOCKET"):
            alpn = ("http/1.1",)
        out.transport_socket.CopyFrom(tls.upstream_socket(c.tls, alpn))
    return out


def _lb_endpoint(ep: ir.Endpoint) -> endpoint_components_pb2.LbEndpoint:
    return endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(
                socket_address=address_pb2.SocketAddress(address=ep.address, port_value=ep.port)
            )
        )
    )


def load_assignment(c: ir.Cluster) -> endpoint_pb2.ClusterLoadAssignment:
    """The endpoints of ``c`` (possibly none: every cluster gets its CLA)."""
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=c.name)
    if c.endpoints:
        cla.endpoints.append(
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[_lb_endpoint(ep) for ep in c.endpoints]
            )
        )
    return cla


def weighted_cluster(
    name: str, backends: tuple[ir.WeightedCluster, ...], clusters: Mapping[str, ir.Cluster]
) -> tuple[cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment]:
    """One cluster that spreads load over several backends by weight.

    For proxies without weighted clusters (UDP): each backend's endpoints become one
    locality whose ``load_balancing_weight`` is the backend weight, and the cluster
    balances between localities by weight.
    """
    out = _eds_cluster(name)
    out.common_lb_config.locality_weighted_lb_config.SetInParent()
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    for index, backend in enumerate(backends):
        target = clusters.get(backend.cluster)
        if target is None or backend.weight <= 0 or not target.endpoints:
            continue
        cla.endpoints.append(
            endpoint_components_pb2.LocalityLbEndpoints(
                # Envoy rejects duplicate localities: one per backend position.
                locality=base_pb2.Locality(sub_zone=f"backend-{index}"),
                lb_endpoints=[_lb_endpoint(ep) for ep in target.endpoints],
                load_balancing_weight=wrappers_pb2.UInt32Value(value=backend.weight),
            )
        )
    return out, cla
