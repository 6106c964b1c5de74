"""The kinds gateweave reads: their API groups, versions, plurals and models."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from gateweave.api import models as m
from gateweave.api.limits import quote


class Key(NamedTuple):
    """Identity of an object: (kind, namespace, name); cluster-scoped kinds have namespace ""."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else f"{self.kind} {self.name}"
        )


@dataclass(frozen=True)
class KindInfo:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions, storage version first
    plural: str
    namespaced: bool
    model: type[msgspec.Struct]
    crd: str | None = None  # custom resources: the plural of their CRD schema (schema validation)

    @functools.cached_property
    def storage_api_version(self) -> str:
        """The apiVersion of the storage version (what the models carry): one string, shared
        by every decoded object of the kind."""
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    @functools.cached_property
    def status_in_model(self) -> bool:
        """Whether the model holds the object's ``status`` (Service: the cluster's
        load-balancer addresses); other kinds' models leave it out."""
        return "status" in self.model.__struct_fields__

    @property
    def gateway_api(self) -> bool:
        return self.group == m.GATEWAY_GROUP

    @property
    def custom(self) -> bool:
        """A custom resource (Gateway API or Envoy Gateway kind): validated against its CRD
        schema, and what ``translate`` prints and writes status to."""
        return self.crd is not None


G = m.GATEWAY_GROUP
E = m.ENVOY_GATEWAY_GROUP

KINDS: dict[str, KindInfo] = {
    k.kind: k
    for k in (
        KindInfo(
            "GatewayClass",
            G,
            ("v1", "v1beta1"),
            "gatewayclasses",
            False,
            m.GatewayClass,
            "gatewayclasses",
        ),
        KindInfo("Gateway", G, ("v1", "v1beta1"), "gateways", True, m.Gateway, "gateways"),
        KindInfo("ListenerSet", G, ("v1",), "listenersets", True, m.ListenerSet, "listenersets"),
        KindInfo("HTTPRoute", G, ("v1", "v1beta1"), "httproutes", True, m.HTTPRoute, "httproutes"),
        KindInfo("GRPCRoute", G, ("v1",), "grpcroutes", True, m.GRPCRoute, "grpcroutes"),
        KindInfo(
            "TLSRoute",
            G,
            ("v1", "v1alpha3", "v1alpha2"),
            "tlsroutes",
            True,
            m.TLSRoute,
            "tlsroutes",
        ),
        KindInfo("TCPRoute", G, ("v1", "v1alpha2"), "tcproutes", True, m.TCPRoute, "tcproutes"),
        KindInfo("UDPRoute", G, ("v1", "v1alpha2"), "udproutes", True, m.UDPRoute, "udproutes"),
        KindInfo(
            "ReferenceGrant",
            G,
            ("v1beta1", "v1"),
            "referencegrants",
            True,
            m.ReferenceGrant,
            "referencegrants",
        ),
        KindInfo(
            "BackendTLSPolicy",
            G,
            ("v1", "v1alpha3"),
            "backendtlspolicies",
            True,
            m.BackendTLSPolicy,
            "backendtlspolicies",
        ),
        KindInfo(
            "Backend", m.ENVOY_GATEWAY_GROUP, ("v1alpha1",), "backends", True, m.Backend, "backends"
        ),
        KindInfo(
            "BackendTrafficPolicy",
            E,
            ("v1alpha1",),
            "backendtrafficpolicies",
            True,
            m.BackendTrafficPolicy,
            "backendtrafficpolicies",
        ),
        KindInfo(
            "ClientTrafficPolicy",
            E,
            ("v1alpha1",),
            "clienttrafficpolicies",
            True,
            m.ClientTrafficPolicy,
            "clienttrafficpolicies",
        ),
        KindInfo(
            "SecurityPolicy",
            E,
            ("v1alpha1",),
            "securitypolicies",
            True,
            m.SecurityPolicy,
            "securitypolicies",
        ),
        KindInfo(
            "GatewayParameters",
            m.GATEWEAVE_GROUP,
            ("v1alpha1",),
            "gatewayparameters",
            True,
            m.GatewayParameters,
            "gatewayparameters",
        ),
        KindInfo("Service", "", ("v1",), "services", True, m.Service),
        KindInfo(
            "EndpointSlice", "discovery.k8s.io", ("v1",), "endpointslices", True, m.EndpointSlice
        ),
        KindInfo("Namespace", "", ("v1",), "namespaces", False, m.Namespace),
        KindInfo("Secret", "", ("v1",), "secrets", True, m.Secret),
        KindInfo("ConfigMap", "", ("v1",), "configmaps", True, m.ConfigMap),
    )
}

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
# Envoy Gateway's policy kinds (translate/policies attaches them; status.ancestors like
# BackendTLSPolicy).
POLICY_KINDS = ("BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy")


def lookup(api_version: str, kind: str) -> KindInfo | None:
    """The KindInfo for an apiVersion/kind pair, or None when gateweave does not read it."""
    info = KINDS.get(kind)
    if info is None:
        return None
    group, _, version = api_version.rpartition("/")
    if group != info.group or version not in info.versions:
        return None
    return info


# ---------------------------------------------------------------- kinds gateweave does not read


def _suggestion(kind: str, candidates: list[KindInfo]) -> KindInfo | None:
    by_name = {info.kind.lower(): info for info in candidates}
    close = difflib.get_close_matches(kind.lower(), list(by_name), n=1, cutoff=0.8)
    return by_name[close[0]] if close else None


def unknown_kind(api_version: str, kind: str) -> tuple[str, str] | None:
    """Why the API server would refuse an apiVersion/kind that :func:`lookup` does not know,
    as ``(field, message)``; None when gateweave ignores it quietly.

    A group gateweave reads a kind of (any group in :data:`KINDS`: registering a kind makes
    its group strict) refuses a version it does not serve and a kind it does not have,
    with a suggestion when one is close (``HTTPRoutes``: did you mean HTTPRoute?). The core
    group is the exception: it has many kinds gateweave does not read (Pod...), so there
    only a version of a kind gateweave reads, or a near-miss of one, is refused. Any other
    group (apps/v1...) is ignored.
    """
    group = api_version.rpartition("/")[0]
    groups = {info.group for info in KINDS.values()}
    if group not in groups:
        return None
    where = f"no matches for kind {quote(kind)} in version {quote(api_version)}"
    info = KINDS.get(kind)
    if info is not None and info.group == group:
        return "apiVersion", f"{where} (served versions: {', '.join(info.versions)})"
    exact = next((i for i in KINDS.values() if i.kind.lower() == kind.lower()), None)
    if exact is not None and exact.group != group:
        return "apiVersion", f"{where} ({exact.kind} is apiVersion {exact.storage_api_version})"
    near = exact or _suggestion(kind, [i for i in KINDS.values() if i.group == group])
    if near is not None:
        return "kind", f"{where} (did you mean {near.kind}?)"
    if not group:
        return None  # a core kind gateweave does not read
    return (
        "kind",
        f"{where} (kinds of {group}: "
        f"{', '.join(i.kind for i in KINDS.values() if i.group == group)})",
    )
