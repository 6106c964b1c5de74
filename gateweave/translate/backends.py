"""backendRef resolution: Services, ports, appProtocol, EndpointSlices, Envoy Gateway
Backends -> clusters.

A Service's endpoints are the ready addresses of its EndpointSlices (IPv4, IPv6, and FQDN
slices, whose addresses are host names); an ``ExternalName`` Service is its external name
on the backendRef's port. Host names make the cluster a DNS cluster (Envoy resolves them).

A backendRef resolves to a :class:`Backend`: either a valid cluster, or why it is invalid
(the route's ResolvedRefs=False condition). Requests for an invalid backend's share
of the weight must answer 500; the IR expresses that with a weighted entry to the reserved
cluster :data:`gateweave.ir.INVALID_BACKEND_CLUSTER` (a cluster without endpoints, which the
xDS builder turns into a 500 answer), or with ``direct_status=500`` when a rule has no valid
backend at all.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate import egbackend
from gateweave.translate.attachment import ServicePortKey
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.context import Ctx
from gateweave.translate.rulememo import RuleMemo

# Families of route kinds: what a backend must speak.
FAMILY_BY_KIND = {
    "HTTPRoute": "HTTP",
    "GRPCRoute": "GRPC",
    "TLSRoute": "TCP",
    "TCPRoute": "TCP",
    "UDPRoute": "UDP",
}

# appProtocol values an HTTPRoute backend may have, and the upstream protocol they mean.
_HTTP_APP_PROTOCOLS = {
    "": "HTTP1",
    "http": "HTTP1",
    "https": "HTTP1",
    "kubernetes.io/h2c": "H2C",
    "h2c": "H2C",
    "http2": "H2C",
    "grpc": "H2C",
    "kubernetes.io/ws": "WEBSOCKET",
    "kubernetes.io/wss": "WEBSOCKET",
}
_GRPC_APP_PROTOCOLS = {"", "grpc", "h2c", "http2", "kubernetes.io/h2c", "https"}

INVALID_CLUSTER = ir.Cluster(name=ir.INVALID_BACKEND_CLUSTER)


class BackendRefLike(Protocol):
    @property
    def group(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def port(self) -> int | None: ...


@dataclass(frozen=True)
class Backend:
    """A resolved backendRef: ``cluster`` when usable, else ``problem`` says why not (the
    route's ResolvedRefs=False condition)."""

    cluster: ir.Cluster | None = None
    problem: c.Condition | None = None
    # (namespace, name, port name) of a resolved Service port; of any length: mypyc would make a
    # new tuple of a fixed-length one for each route that records it (RouteTranslation.services)
    service: ServicePortKey | None = None
    backend: tuple[str, str] | None = (
        None  # (namespace, name) of an Envoy Gateway Backend it may use
    )


class RefUse:
    """What one HTTPRoute backendRef without filters of its own comes to for a rule (a value,
    made once per translation for each distinct (route namespace, backendRef)): its resolution,
    the shared weighted entry its weight adds to the rule's backends (``weighted``; the invalid
    backend's when it does not resolve; None for a weight of 0), and the Service (namespace,
    name) it names (``named``: what :meth:`BackendResolver.resolve` adds to ``touched``).
    A plain class, as :class:`~gateweave.translate.filters.RuleFilters` is."""

    __slots__ = ("backend", "cluster", "named", "problem", "service", "weighted")

    def __init__(
        self, found: Backend, weighted: ir.WeightedCluster | None, named: tuple[str, ...]
    ) -> None:
        self.cluster = found.cluster
        self.problem = found.problem if found.cluster is None else None
        self.service = found.service
        self.backend = found.backend
        self.weighted = weighted
        self.named = named


def backend_kind(group: str, kind: str) -> tuple[str, str] | None:
    """(kind, group) of what a backendRef of ``group``/``kind`` names, when gateweave can send
    to it: a core Service or an Envoy Gateway Backend; None for any other kind."""
    if group in ("", "core") and kind == "Service":
        return "Service", ""
    if group == m.ENVOY_GATEWAY_GROUP and kind == "Backend":
        return "Backend", m.ENVOY_GATEWAY_GROUP
    return None


class BackendResolver:
    """Resolves backendRefs for one translation; clusters are built once per Service port."""

    def __init__(
        self, ctx: Ctx, tls: BackendTLSIndex, *, touched: set[tuple[str, ...]] | None = None
    ) -> None:
        self.ctx = ctx
        self.tls = tls
        # When a set: every Service (namespace, name) a backendRef names, found or not, is added
        # to it (the incremental translator's record of what a route depends on).
        self.touched = touched
        # (route kind, route namespace, group, kind, namespace, name, port, terminated, family) ->
        # Backend
        self._cache: dict[tuple[str, str, str, str, str, str, int | None, bool, str], Backend] = {}
        # What a Service port or a Backend resolves to whichever namespace refers to it (the
        # ReferenceGrant check aside): (route kind, kind, namespace, name, port, terminated, family)
        # -> Backend
        self._targets: dict[tuple[str, str, str, str, int | None, bool, str], Backend] = {}
        # (route kind, route namespace, kind, namespace, name) -> ReferenceGrant verdict
        self._grants: dict[tuple[str, str, str, str, str], bool] = {}
        # Envoy Gateway Backends, judged once: (namespace, name) -> verdict
        self._verdicts: dict[tuple[str, str], egbackend.BackendVerdict] = {}
        # The (namespace, name) keys added to ``touched``, each kept once: key -> itself.
        self._named: dict[tuple[str, ...], tuple[str, ...]] = {}
        # Pure pieces of route rules, built once per translation (see rulememo).
        self.memo = RuleMemo()
        # An HTTPRoute backendRef without filters: (route namespace, backendRef) -> its use
        self.http_uses: dict[tuple[str, m.HTTPBackendRef], RefUse] = {}
        # The clusters of the route being translated, by name, each once (the translation keeps
        # them as a tuple when done: RouteTranslation.keep_clusters)
        self.clusters: dict[str, ir.Cluster] = {}

    def resolve(
        self,
        route_kind: str,
        route_ns: str,
        ref: BackendRefLike,
        terminated: bool = False,
        family: str = "",
    ) -> Backend:
        """``terminated``: a TLSRoute backend behind a listener that terminates TLS, which a
        BackendTLSPolicy re-encrypts (behind a passthrough listener the client's TLS goes through).
        ``family``: what the backend must speak, when not what the route kind's backends speak
        (an HTTPRoute's gRPC auth service)."""
        ns = ref.namespace or route_ns
        if self.touched is not None:
            # One tuple per Service for the whole translation: the incremental translator
            # keeps each route's set as its entry's ``services`` (23,900 tuples at 10,000
            # routes for 2,600 Services, before they were shared).
            named: tuple[str, ...] = (ns, ref.name)  # (not fixed-length: see context.SortKey)
            self.touched.add(self._named.setdefault(named, named))
        family = family or FAMILY_BY_KIND[route_kind]
        key = (
            route_kind,
            route_ns,
            ref.group,
            ref.kind,
            ns,
            ref.name,
            ref.port,
            terminated,
            family,
        )
        hit = self._cache.get(key)
        if hit is None:
            hit = self._resolve(route_kind, route_ns, ref, ns, terminated, family)
            self._cache[key] = hit
        return hit

    def http_ref(self, route_ns: str, ref: m.HTTPBackendRef) -> RefUse:
        """:meth:`resolve` of an HTTPRoute's backendRef without filters of its own, with what its
        rule needs of it (see :class:`RefUse`), once per translation for each distinct one
        (``http_uses``, which a caller may read first). The caller adds its ``named`` to
        ``touched``."""
        key = (route_ns, ref)
        hit = self.http_uses.get(key)
        if hit is not None:
            return hit
        found = self.resolve("HTTPRoute", route_ns, ref)
        named: tuple[str, ...] = (ref.namespace or route_ns, ref.name)
        named = self._named.setdefault(named, named)
        weight = ref.weight
        if weight <= 0:
            use = RefUse(found, None, named)
        else:
            cluster = found.cluster.name if found.cluster is not None else INVALID_CLUSTER.name
            use = RefUse(found, self.memo.weighted_cluster(cluster, weight), named)
        self.http_uses[key] = use
        return use

    def _resolve(
        self,
        route_kind: str,
        route_ns: str,
        ref: BackendRefLike,
        ns: str,
        terminated: bool,
        family: str,
    ) -> Backend:
        target = backend_kind(ref.group, ref.kind)
        if target is None:
            return Backend(
                problem=c.route_invalid_kind(
                    f"backendRef {ref.group}/{ref.kind} {ref.name}: unsupported kind"
                )
            )
        kind, group = target
        if ns != route_ns and not self._permitted(route_kind, route_ns, group, kind, ns, ref.name):
            return Backend(
                problem=c.route_ref_not_permitted(
                    f"backendRef {kind} {ns}/{ref.name}: not permitted by any ReferenceGrant"
                )
            )
        port = ref.port if kind == "Service" else None  # a Backend's endpoints carry their ports
        key = (route_kind, kind, ns, ref.name, port, terminated, family)
        hit = self._targets.get(key)
        if hit is None:
            if kind == "Service":
                hit = self._service_port(route_kind, family, ns, ref.name, port, terminated)
            else:
                hit = self._eg_backend(route_kind, family, ns, ref.name, terminated)
            self._targets[key] = hit
        return hit

    def _permitted(
        self, route_kind: str, route_ns: str, group: str, kind: str, ns: str, name: str
    ) -> bool:
        """Whether a ReferenceGrant lets a route of ``route_kind`` in ``route_ns`` refer to
        ``kind`` ``ns/name``.
        """
        key = (route_kind, route_ns, kind, ns, name)
        hit = self._grants.get(key)
        if hit is None:
            hit = self._grants[key] = self.ctx.reference_allowed(
                m.GATEWAY_GROUP, route_kind, route_ns, group, kind, ns, name
            )
        return hit

    def verdict(self, backend: m.Backend) -> egbackend.BackendVerdict:
        """The verdict on an Envoy Gateway Backend of this snapshot (judged once)."""
        key = (backend.metadata.namespace, backend.metadata.name)
        hit = self._verdicts.get(key)
        if hit is None:
            hit = self._verdicts[key] = egbackend.judge(self.ctx, backend)
        return hit

    def _eg_backend(
        self, route_kind: str, family: str, ns: str, name: str, terminated: bool
    ) -> Backend:
        """A permitted reference to Envoy Gateway Backend ``ns/name``."""
        be: m.Backend | None = self.ctx.snapshot.backends.get((ns, name))
        if be is None:
            return Backend(problem=c.route_backend_not_found(f"Backend {ns}/{name} not found"))
        key = (ns, name)
        verdict = self.verdict(be)
        if not verdict.accepted:
            return Backend(
                problem=c.route_backend_not_found(
                    f"Backend {ns}/{name} is not accepted: {'; '.join(verdict.problems)}"
                ),
                backend=key,
            )
        protocol, problem = egbackend.upstream_protocol(family, be, verdict)
        if problem:
            return Backend(
                problem=c.route_unsupported_protocol(f"Backend {ns}/{name}: {problem}"), backend=key
            )
        # TLS to the Backend, except where the client's TLS passes through untouched.
        tls = verdict.tls if family != "TCP" or route_kind != "TLSRoute" or terminated else None
        if tls is not None and protocol == "H2C":
            protocol = "HTTP2"
        cname = f"{ns}/{name}/Backend/{protocol.lower()}"
        if tls is not None and family == "TCP":
            cname += "/tls"
        cluster = ir.Cluster(name=cname, protocol=protocol, endpoints=verdict.endpoints, tls=tls)
        return Backend(cluster=cluster, backend=key)

    def _service_port(
        self, route_kind: str, family: str, ns: str, name: str, port: int | None, terminated: bool
    ) -> Backend:
        """A permitted reference to Service ``ns/name`` port ``port``."""
        svc: m.Service | None = self.ctx.snapshot.services.get((ns, name))
        if svc is None:
            return Backend(problem=c.route_backend_not_found(f"Service {ns}/{name} not found"))
        if port is None:
            return Backend(
                problem=c.route_backend_not_found(
                    f"backendRef Service {ns}/{name}: port is required"
                )
            )
        external = svc.spec.type == "ExternalName"
        sport = next((p for p in svc.spec.ports if p.port == port), None)
        if sport is None and external and not svc.spec.ports:
            sport = m.ServicePort(port=port)  # an ExternalName Service without ports: any port, TCP
        if sport is None:
            return Backend(
                problem=c.route_backend_not_found(f"Service {ns}/{name} has no port {port}")
            )
        endpoints: tuple[ir.Endpoint, ...]
        if external:
            target = _named_endpoint(svc.spec.external_name or "", port)
            if target is None:
                return Backend(
                    problem=c.route_backend_not_found(
                        f"ExternalName Service {ns}/{name} has no valid externalName "
                        f"({svc.spec.external_name!r})"
                    )
                )
            endpoints = (target,)
        else:
            endpoints = self._endpoints(ns, name, sport)
        protocol, problem = _protocol(family, sport)
        if problem:
            return Backend(
                problem=c.route_unsupported_protocol(f"Service {ns}/{name} port {port}: {problem}")
            )
        service: ServicePortKey = (ns, name, sport.name)
        tls: ir.UpstreamTLS | None = None
        if family in ("HTTP", "GRPC") or (route_kind == "TLSRoute" and terminated):
            policy = self.tls.for_service_port(ns, name, sport.name)
            if policy is not None:
                if policy.tls is None:
                    # httproute_types.go, HTTPBackendRef: "A BackendRef is invalid if: ... The
                    # BackendTLSPolicy object is installed in the cluster, a BackendTLSPolicy is
                    # present that refers to the Service, and the implementation is unable to
                    # meet the requirement. ... the implementation MUST ensure the ResolvedRefs
                    # Condition on the Route is set to status: False". Its traffic is never sent
                    # in clear text: its share answers 500, as for any invalid backendRef.
                    meta = policy.policy.metadata
                    why = policy.accepted.message
                    return Backend(
                        problem=c.route_invalid_backend_tls(
                            f"Service {ns}/{name}: BackendTLSPolicy {meta.namespace}/{meta.name} "
                            f"cannot be met: {why}"
                        ),
                        service=service,
                    )
                tls = policy.tls
                if protocol == "H2C":
                    protocol = "HTTP2"
        cname = f"{ns}/{name}/{port}/{protocol.lower()}"
        if tls is not None and family == "TCP":
            cname += (
                "/tls"  # a TLSRoute's re-encrypting variant, beside the plain one passthrough uses
            )
        cluster = ir.Cluster(name=cname, protocol=protocol, endpoints=endpoints, tls=tls)
        return Backend(cluster=cluster, service=service)

    def _endpoints(self, ns: str, name: str, sport: m.ServicePort) -> tuple[ir.Endpoint, ...]:
        """The ready endpoints of a Service port: IP addresses (in address order), then host
        names of FQDN slices (in name order)."""
        ips: set[tuple[str, int]] = set()
        names: set[tuple[str, int]] = set()
        for eps in self.ctx.slices_by_service.get((ns, name), ()):
            fqdn = eps.address_type == "FQDN"
            if not fqdn and eps.address_type not in ("IPv4", "IPv6"):
                continue
            port = next(
                (p for p in eps.ports if (p.name or "") == sport.name and p.port is not None), None
            )
            if port is None or port.port is None:
                continue
            for ep in eps.endpoints:
                if ep.conditions.ready is False:
                    continue
                for addr in ep.addresses:
                    if fqdn:
                        if egbackend.is_hostname(addr):
                            names.add((addr, port.port))
                    elif _ip_key(addr) is not None:
                        ips.add((addr, port.port))
        ordered = sorted(ips, key=lambda ap: (_ip_key(ap[0]), ap[1]))
        out = [ir.Endpoint(address=a, port=p) for a, p in ordered]
        out.extend(ir.Endpoint(address=a, port=p, type=ir.ENDPOINT_FQDN) for a, p in sorted(names))
        return tuple(out)


def _named_endpoint(name: str, port: int) -> ir.Endpoint | None:
    """An ExternalName Service's target: an IP literal stays an address, a host name is resolved."""
    if _ip_key(name) is not None:
        return ir.Endpoint(address=name, port=port)
    if egbackend.is_hostname(name):
        return ir.Endpoint(address=name, port=port, type=ir.ENDPOINT_FQDN)
    return None


def _protocol(family: str, sport: m.ServicePort) -> tuple[str, str]:
    """(upstream protocol, problem) for a Service port used by a route family."""
    app = (sport.app_protocol or "").strip()
    if family == "UDP":
        if sport.protocol != "UDP":
            return "UDP", f"protocol {sport.protocol} cannot carry UDP"
        return "UDP", ""
    if sport.protocol not in ("TCP", ""):
        return "TCP", f"protocol {sport.protocol} cannot carry {family}"
    if family == "TCP":
        return "TCP", ""
    if family == "GRPC":
        if app.lower() not in _GRPC_APP_PROTOCOLS:
            return "H2C", f"appProtocol {app} is not supported for gRPC"
        return "H2C", ""
    proto = _HTTP_APP_PROTOCOLS.get(app if app.startswith("kubernetes.io/") else app.lower())
    if proto is None:
        return "HTTP1", f"appProtocol {app} is not supported for HTTP"
    return proto, ""


@lru_cache(maxsize=65536)
def _ip_key(addr: str) -> tuple[int, int] | None:
    """Sort key (version, value) of an IP address, None when ``addr`` is not one (memoised:
    the same endpoints are read on every translation)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None
    return (ip.version, int(ip))
