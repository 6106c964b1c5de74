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

Merging applies to the host data plane; with ``serve --dataplane kubernetes`` each Gateway
keeps its own Deployment and Service (:func:`merges`).
"""

from __future__ import annotations

from collections.abc import Mapping

from gateweave import ir
from gateweave.api import models as m

# The namespace part of a merged class's node id: a Kubernetes namespace cannot contain a
# dot, so no Gateway's "namespace/name" can be a class's node.
MERGED_NAMESPACE = "gatewayclass.gateweave.io"


def node_of(class_name: str) -> str:
    """The xDS node id (and Envoy) of the merged GatewayClass ``class_name``."""
    return f"{MERGED_NAMESPACE}/{class_name}"


def merges(params: m.GatewayParametersSpec | None, address_mode: str) -> bool:
    """Whether a class with these parameters serves its Gateways from one Envoy."""
    return params is not None and bool(params.merge_gateways) and address_mode != "kubernetes"


def regroup(
    nodes: Mapping[str, str], xds: dict[str, ir.XdsGateway], infra: dict[str, ir.InfraGateway]
) -> tuple[dict[str, ir.XdsGateway], dict[str, ir.InfraGateway]]:
    """The IRs by Envoy: ``nodes`` maps each merged Gateway's name to its class's node."""
    if not nodes:
        return xds, infra
    return _regroup_xds(nodes, xds), _regroup_infra(nodes, infra)


def _groups(nodes: Mapping[str, str], names: list[str]) -> dict[str, list[str]]:
    """Each Envoy's Gateways: a merged class's node its members (by name), any other
    Gateway itself (its own name, a one-element list)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(nodes.get(name, name), []).append(name)
    return groups


def _regroup_xds(nodes: Mapping[str, str], xds: dict[str, ir.XdsGateway]) -> dict[str, ir.XdsGateway]:
    out: dict[str, ir.XdsGateway] = {}
    for node, members in sorted(_groups(nodes, sorted(xds)).items()):
        if members == [node]:
            out[node] = xds[node]
            continue
        gws = [xds[name] for name in members]
        clusters: dict[str, ir.Cluster] = {}
        for gw in gws:  # the same backend is the same cluster, whichever Gateway routes to it
            for cluster in gw.clusters:
                clusters.setdefault(cluster.name, cluster)
        out[node] = ir.XdsGateway(
            name=node,
            address="",
            ports=tuple(p if p.address else _on(p, gw.address) for gw in gws for p in gw.ports),
            clusters=tuple(clusters[name] for name in sorted(clusters)),
            telemetry=gws[0].telemetry,
        )
    return out


def _on(port: ir.Port, address: str) -> ir.Port:
    return ir.Port(name=port.name, port=port.port, protocol=port.protocol, address=address, http=port.http,
                   filter_chains=port.filter_chains, tcp=port.tcp, udp=port.udp)


def _regroup_infra(nodes: Mapping[str, str], infra: dict[str, ir.InfraGateway]) -> dict[str, ir.InfraGateway]:
    out: dict[str, ir.InfraGateway] = {}
    for node, members in sorted(_groups(nodes, sorted(infra)).items()):
        if members == [node]:
            out[node] = infra[node]
            continue
        gws = [infra[name] for name in members]
        first = gws[0]
        ports: dict[tuple[int, str], list[str]] = {}
        for gw in gws:
            for p in gw.ports:
                ports.setdefault((p.port, p.protocol), []).append(p.name)
        namespace, _, class_name = node.partition("/")
        out[node] = ir.InfraGateway(
            name=node,
            namespace=namespace,
            gateway_name=class_name,
            gateway_class=first.gateway_class,
            address=first.address,
            ports=tuple(ir.InfraPort(name=",".join(names), port=p, protocol=proto)
                        for (p, proto), names in sorted(ports.items())),
            envoy=first.envoy,
            kubernetes=first.kubernetes,
        )
    return out
