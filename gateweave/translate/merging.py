"""Merged Gateways: every Gateway of a class whose GatewayParameters set ``mergeGateways``
is served by one Envoy, the class's xDS node.

Translation is per Gateway up to here (statuses, listeners, routes, each Gateway's own xDS
and infrastructure IR); this last stage only regroups the two IRs by Envoy: the Gateways of
a merged class become one :class:`~gateweave.ir.XdsGateway` (their ports, each on its own
Gateway's address, and the union of their clusters) and one
:class:`~gateweave.ir.InfraGateway` (one Envoy process) named by :func:`node_of`. Programmed
is still judged per Gateway, from that node's acknowledgements
(``GatewayCtx.node``). Two Gateways of the group on the same address and port are the
existing conflict rule's business (translate/binds.py: the older keeps it), before this.

Merging applies to both data planes: on the host one Envoy process, with ``serve --dataplane
kubernetes`` one Deployment and Service for the class (gateweave/sinks/kubeinfra.py), owned
by the GatewayClass (the merged IR's ``uid`` is the class's) and asked for every address
its Gateways request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import msgspec

from gateweave import ir
from gateweave.api import models as m

# The namespace part of a merged class's node id: a Kubernetes namespace cannot contain a
# dot, so no Gateway's "namespace/name" can be a class's node.
MERGED_NAMESPACE = "gatewayclass.gateweave.io"


def node_of(class_name: str) -> str:
    """The xDS node id (and Envoy) of the merged GatewayClass ``class_name``."""
    return f"{MERGED_NAMESPACE}/{class_name}"


def merges(params: m.GatewayParametersSpec | None) -> bool:
    """Whether a class with these parameters serves its Gateways from one Envoy."""
    return params is not None and bool(params.merge_gateways)


def regroup(
    nodes: Mapping[str, str],
    xds: dict[str, ir.XdsGateway],
    infra: dict[str, ir.InfraGateway],
    owners: Mapping[str, str] | None = None,
) -> tuple[dict[str, ir.XdsGateway], dict[str, ir.InfraGateway]]:
    """The IRs by Envoy: ``nodes`` maps each merged Gateway's name to its class's node,
    ``owners`` each class node to its GatewayClass's uid (the owner of its Kubernetes objects)."""
    if not nodes:
        return xds, infra

    def merged_infra(node: str, gws: list[ir.InfraGateway]) -> ir.InfraGateway:
        return _merged_infra(node, gws, (owners or {}).get(node, ""))

    return _by_node(nodes, xds, _merged_xds), _by_node(nodes, infra, merged_infra)


T = TypeVar("T")


def _by_node(
    nodes: Mapping[str, str], irs: dict[str, T], merge: Callable[[str, list[T]], T]
) -> dict[str, T]:
    """``irs`` keyed by Envoy: a merged class's node gets ``merge`` of its Gateways' (by name),
    any other Gateway keeps its own under its own name."""
    groups: dict[str, list[str]] = {}
    for name in sorted(irs):
        groups.setdefault(nodes.get(name, name), []).append(name)
    return {
        node: irs[node] if members == [node] else merge(node, [irs[name] for name in members])
        for node, members in sorted(groups.items())
    }


def _merged_xds(node: str, gws: list[ir.XdsGateway]) -> ir.XdsGateway:
    clusters: dict[str, ir.Cluster] = {}
    for gw in gws:  # the same backend is the same cluster, whichever Gateway routes to it
        for cluster in gw.clusters:
            clusters.setdefault(cluster.name, cluster)
    return ir.XdsGateway(
        name=node,
        address="",
        ports=tuple(
            p if p.address else msgspec.structs.replace(p, address=gw.address)
            for gw in gws
            for p in gw.ports
        ),
        clusters=tuple(clusters[name] for name in sorted(clusters)),
        telemetry=gws[0].telemetry,
    )


def _merged_infra(node: str, gws: list[ir.InfraGateway], uid: str) -> ir.InfraGateway:
    ports: dict[tuple[int, str], list[str]] = {}
    for gw in gws:  # each listener named with its Gateway: "<ns>/<gateway>/<listener>"
        for p in gw.ports:
            ports.setdefault((p.port, p.protocol), []).extend(
                f"{gw.name}/{n}" for n in p.name.split(",")
            )
    namespace, _, class_name = node.partition("/")
    first = gws[0]  # a merged class's Gateways run with the class's settings (gateway.py)
    return ir.InfraGateway(
        name=node,
        namespace=namespace,
        gateway_name=class_name,
        gateway_class=first.gateway_class,
        uid=uid,
        address=first.address,
        ports=tuple(
            ir.InfraPort(name=",".join(names), port=p, protocol=proto)
            for (p, proto), names in sorted(ports.items())
        ),
        # Kubernetes mode: the one Service is asked for every address its Gateways request
        requested_addresses=tuple(dict.fromkeys(a for gw in gws for a in gw.requested_addresses)),
        envoy=first.envoy,
        kubernetes=first.kubernetes,
        members=tuple(gw.name for gw in gws),
    )
