"""Shared state of one translation: indexes over the snapshot and the resolved Gateways.

The gateway side (gateway.py, listenersets.py) fills :class:`GatewayCtx` / :class:`ListenerCtx`;
the route side (routes.py and friends) attaches routes to listeners and counts them; the
status builders and the xDS IR assembly then read both. All of it lives for one translation.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.snapshot import NN, Snapshot
from gateweave.translate.conditions import Condition
from gateweave.translate.options import TranslateOptions

# An object's sort_key, (0 or 1, creationTimestamp, namespace, name): typed as a tuple of any
# length on purpose. mypyc keeps a fixed-length tuple unboxed and makes a new tuple object each
# time one is stored or handed to Python, so the kept state held up to three copies of each
# route's key in the compiled build (memory at scale: docs/benchmarks.md, sixth round).
SortKey = tuple[Any, ...]


def sort_key(obj: Any) -> SortKey:
    """Spec tie-break: oldest creationTimestamp first; objects without one tie; then namespace/name.

    Objects without a creationTimestamp sort after those that have one.
    """
    ts = obj.metadata.creation_timestamp
    return (0 if ts else 1, ts, obj.metadata.namespace, obj.metadata.name)


@dataclass
class Ctx:
    snapshot: Snapshot
    options: TranslateOptions
    statuses: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # indexes
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    grants_by_namespace: dict[str, list[m.ReferenceGrant]] = field(default_factory=dict)
    slices_by_service: dict[NN, list[m.EndpointSlice]] = field(default_factory=dict)
    # The gateway side's ListenerSet results (for ListenerSet status), in precedence order.
    listener_set_results: list[Any] = field(default_factory=list)
    # The policy attachment stage's PolicyIndex (translate/policies/attach.py): which Envoy
    # Gateway policy governs what; None before that stage has run.
    policies: Any = None

    @classmethod
    def build(cls, snapshot: Snapshot, options: TranslateOptions) -> Ctx:
        ctx = cls(snapshot, options)
        for (_, name), nsobj in snapshot.namespaces.items():
            ctx.namespace_labels[name] = dict(nsobj.metadata.labels)
        grants: dict[str, list[m.ReferenceGrant]] = defaultdict(list)
        for (ns, _), g in sorted(snapshot.reference_grants.items()):
            grants[ns].append(g)
        ctx.grants_by_namespace = dict(grants)
        slices: dict[NN, list[m.EndpointSlice]] = defaultdict(list)
        for (ns, _), s in sorted(snapshot.endpoint_slices.items()):
            svc = s.metadata.labels.get("kubernetes.io/service-name")
            if svc:
                slices[(ns, svc)].append(s)
        ctx.slices_by_service = dict(slices)
        return ctx

    def labels_of_namespace(self, namespace: str) -> dict[str, str]:
        """Labels of a namespace; a namespace without a Namespace object has only the name label."""
        labels = dict(self.namespace_labels.get(namespace, {}))
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        return labels

    def reference_allowed(
        self,
        from_group: str,
        from_kind: str,
        from_namespace: str,
        to_group: str,
        to_kind: str,
        to_namespace: str,
        to_name: str,
    ) -> bool:
        """Whether a reference is permitted: same namespace, or a ReferenceGrant in the target
        namespace allows it.
        """
        return (
            from_namespace == to_namespace
            or self.granting(
                from_group, from_kind, from_namespace, to_group, to_kind, to_namespace, to_name
            )
            is not None
        )

    def granting(
        self,
        from_group: str,
        from_kind: str,
        from_namespace: str,
        to_group: str,
        to_kind: str,
        to_namespace: str,
        to_name: str,
    ) -> m.ReferenceGrant | None:
        """The first ReferenceGrant (by name) in the target namespace that allows a reference
        from ``from_namespace``; None when none does (the dashboard draws where grants bind)."""
        for grant in self.grants_by_namespace.get(to_namespace, ()):
            if not any(
                f.group == from_group and f.kind == from_kind and f.namespace == from_namespace
                for f in grant.spec.from_
            ):
                continue
            if any(
                t.group == to_group and t.kind == to_kind and (not t.name or t.name == to_name)
                for t in grant.spec.to
            ):
                return grant
        return None


def label_selector_matches(selector: m.LabelSelector | None, labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics; an empty selector matches everything."""
    if selector is None:
        return True
    for k, v in selector.match_labels.items():
        if labels.get(k) != v:
            return False
    for req in selector.match_expressions:
        op = req.operator
        if op == "In":
            if labels.get(req.key) not in req.values:
                return False
        elif op == "NotIn":
            if req.key in labels and labels[req.key] in req.values:
                return False
        elif op == "Exists":
            if req.key not in labels:
                return False
        elif op == "DoesNotExist":
            if req.key in labels:
                return False
        else:
            return False
    return True


@dataclass(eq=False)
class ListenerCtx:
    """One listener of a Gateway, from its own spec or from an accepted ListenerSet."""

    gateway: GatewayCtx
    listener: m.Listener
    listener_set: m.ListenerSet | None = None  # set when the listener comes from a ListenerSet
    # Filled by the gateway side:
    supported_kinds: list[tuple[str, str]] = field(default_factory=list)  # (group, kind)
    accepted: bool = False  # routes may attach (Accepted=True and not Conflicted)
    ready: bool = False  # valid and its Gateway is serving: Envoy config is generated for it
    tls: ir.TLSTermination | None = (
        None  # resolved certificates and client validation (Terminate mode)
    )
    # Why the listener is not (fully) valid; None when fine. Set by the gateway side, read by its
    # status.
    not_accepted: Condition | None = (
        None  # Accepted=False (UnsupportedProtocol, NoValidCACertificate)
    )
    refs_problem: Condition | None = (
        None  # ResolvedRefs=False (InvalidCertificateRef, RefNotPermitted, ...)
    )
    conflict: Condition | None = None  # Conflicted=True (ProtocolConflict, HostnameConflict)
    overlap: Condition | None = (
        None  # OverlappingTLSConfig=True (OverlappingHostnames, OverlappingCertificates)
    )
    # Filled by the route side:
    attached_routes: int = 0
    routes: list[Any] = field(
        default_factory=list
    )  # route-side attachment records, in precedence order
    # Filled by the policy stage: the governing ClientTrafficPolicy's effect (None: none)
    client: ir.ClientSettings | None = None

    @property
    def name(self) -> str:
        return self.listener.name

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def protocol(self) -> str:
        return self.listener.protocol

    @property
    def hostname(self) -> str | None:
        return self.listener.hostname

    @property
    def terminates_tls(self) -> bool:
        """HTTPS, or TLS in Terminate mode: the listener ends the client's TLS connection."""
        tls = self.listener.tls
        return self.protocol == "HTTPS" or (
            self.protocol == "TLS" and tls is not None and tls.mode == "Terminate"
        )

    @property
    def namespace(self) -> str:
        """The namespace the listener is defined in (the Gateway's or the ListenerSet's)."""
        owner = self.listener_set if self.listener_set is not None else self.gateway.gateway
        return owner.metadata.namespace


@dataclass(eq=False)
class GatewayCtx:
    gateway: m.Gateway
    gateway_class: m.GatewayClass
    accepted: bool = True
    address: str = ""  # the address its listeners bind
    # Kubernetes addressing mode: spec.addresses IPs for its Service; its addresses (type, value).
    requested_addresses: tuple[str, ...] = ()
    service_addresses: list[tuple[str, str]] = field(default_factory=list)
    listeners: list[ListenerCtx] = field(default_factory=list)  # the Gateway's own listeners
    listener_sets: list[tuple[m.ListenerSet, list[ListenerCtx]]] = field(
        default_factory=list
    )  # accepted ones
    serving: bool = False  # accepted and has a usable address: its configuration is generated
    programmed: bool = False  # serving, and the data plane acknowledged the configuration
    # Gateway spec.tls.backend.clientCertificateRef, resolved (client certificate for upstream TLS).
    backend_client_cert: ir.Certificate | None = None
    # Its GatewayParameters (over its class's), resolved: how its Envoy runs.
    envoy: ir.EnvoySettings = field(default_factory=ir.EnvoySettings)
    kubernetes: ir.KubernetesSettings = field(default_factory=ir.KubernetesSettings)
    node: str = ""  # the xDS node of the Envoy serving it: its name, or its merged class's
    telemetry: ir.Telemetry = field(default_factory=ir.Telemetry)  # its access log and tracing
    findings: Any = None  # the gateway side's reasons behind this Gateway's conditions

    @property
    def key(self) -> NN:
        return (self.gateway.metadata.namespace, self.gateway.metadata.name)

    @property
    def name(self) -> str:
        return f"{self.gateway.metadata.namespace}/{self.gateway.metadata.name}"

    def all_listeners(self) -> list[ListenerCtx]:
        """Own listeners, then ListenerSet listeners in ListenerSet precedence order."""
        out = list(self.listeners)
        for _, ls in self.listener_sets:
            out.extend(ls)
        return out
