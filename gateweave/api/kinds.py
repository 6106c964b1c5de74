"""The kinds gateweave reads: their API groups, versions, plurals and models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from gateweave.api import models as m


class Key(NamedTuple):
    """Identity of an object: (kind, namespace, name); cluster-scoped kinds have namespace ""."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class KindInfo:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions, storage version first
    plural: str
    namespaced: bool
    model: type[msgspec.Struct]
    crd: str | None = None  # custom resources: the plural of their CRD schema (schema validation)

    @property
    def gateway_api(self) -> bool:
        return self.group == m.GATEWAY_GROUP

    @property
    def custom(self) -> bool:
        """A custom resource (Gateway API or Envoy Gateway kind): validated against its CRD
        schema, and what ``translate`` prints and writes status to."""
        return self.crd is not None


G = m.GATEWAY_GROUP

KINDS: dict[str, KindInfo] = {
    k.kind: k
    for k in (
        KindInfo("GatewayClass", G, ("v1", "v1beta1"), "gatewayclasses", False, m.GatewayClass, "gatewayclasses"),
        KindInfo("Gateway", G, ("v1", "v1beta1"), "gateways", True, m.Gateway, "gateways"),
        KindInfo("ListenerSet", G, ("v1",), "listenersets", True, m.ListenerSet, "listenersets"),
        KindInfo("HTTPRoute", G, ("v1", "v1beta1"), "httproutes", True, m.HTTPRoute, "httproutes"),
        KindInfo("GRPCRoute", G, ("v1",), "grpcroutes", True, m.GRPCRoute, "grpcroutes"),
        KindInfo("TLSRoute", G, ("v1", "v1alpha3", "v1alpha2"), "tlsroutes", True, m.TLSRoute, "tlsroutes"),
        KindInfo("TCPRoute", G, ("v1", "v1alpha2"), "tcproutes", True, m.TCPRoute, "tcproutes"),
        KindInfo("UDPRoute", G, ("v1", "v1alpha2"), "udproutes", True, m.UDPRoute, "udproutes"),
        KindInfo("ReferenceGrant", G, ("v1beta1", "v1"), "referencegrants", True, m.ReferenceGrant, "referencegrants"),
        KindInfo("BackendTLSPolicy", G, ("v1", "v1alpha3"), "backendtlspolicies", True, m.BackendTLSPolicy, "backendtlspolicies"),
        KindInfo("Backend", m.ENVOY_GATEWAY_GROUP, ("v1alpha1",), "backends", True, m.Backend, "backends"),
        KindInfo("Service", "", ("v1",), "services", True, m.Service),
        KindInfo("EndpointSlice", "discovery.k8s.io", ("v1",), "endpointslices", True, m.EndpointSlice),
        KindInfo("Namespace", "", ("v1",), "namespaces", False, m.Namespace),
        KindInfo("Secret", "", ("v1",), "secrets", True, m.Secret),
        KindInfo("ConfigMap", "", ("v1",), "configmaps", True, m.ConfigMap),
    )
}

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
GATEWAY_API_KINDS = tuple(k for k, info in KINDS.items() if info.gateway_api)


def lookup(api_version: str, kind: str) -> KindInfo | None:
    """The KindInfo for an apiVersion/kind pair, or None when gateweave does not read it."""
    info = KINDS.get(kind)
    if info is None:
        return None
    group, _, version = api_version.rpartition("/")
    if group != info.group or version not in info.versions:
        return None
    return info
