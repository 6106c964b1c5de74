"""Typed models of every kind gateweave reads.

The models are msgspec Structs: decoding a validated, defaulted manifest dict into them is
cheap, and they are immutable, so a snapshot can be shared between translations. Field
names follow the Kubernetes JSON names (camelCase) through ``rename="camel"``. Unknown
fields are ignored here; :mod:`gateweave.api.schema` validates manifests against the
CRD schemas before they are converted.

Defaults mirror the CRD defaults, so objects built directly in code behave like objects
that went through the API server.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, ClassVar, Literal

import msgspec

GATEWAY_GROUP = "gateway.networking.k8s.io"
ENVOY_GATEWAY_GROUP = "gateway.envoyproxy.io"
GATEWEAVE_GROUP = "gateweave.io"

# Fields whose CRD schema restricts them to an enum are Literal types: msgspec then decodes
# each to the one shared instance of its value instead of a copy per object (the schema
# validation runs before and decides what is accepted; the values are the schemas' enums).
MatchType = Literal["Exact", "RegularExpression"]
PathMatchType = Literal["Exact", "PathPrefix", "RegularExpression"]
HTTPMethod = Literal["CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"]
HTTPRouteFilterType = Literal[
    "CORS",
    "ExtensionRef",
    "ExternalAuth",
    "RequestHeaderModifier",
    "RequestMirror",
    "RequestRedirect",
    "ResponseHeaderModifier",
    "URLRewrite",
]
GRPCRouteFilterType = Literal[
    "ExtensionRef", "RequestHeaderModifier", "RequestMirror", "ResponseHeaderModifier"
]


class _Base(
    msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True, gc=False
):
    pass


_intern = sys.intern
_set = msgspec.structs.force_setattr


# How each kind of field in ``_shared`` is made to share its strings (by its annotation).
_SHARING = {
    "str": "    _set(self, {f!r}, _intern(self.{f}))",
    "str | None": "    v = self.{f}\n    if v is not None: _set(self, {f!r}, _intern(v))",
    "tuple[str, ...]": "    v = self.{f}\n    if v: _set(self, {f!r}, tuple(map(_intern, v)))",
    "dict[str, str]": (
        "    v = self.{f}\n    if v:\n        for k, i in v.items(): v[k] = _intern(i)"
    ),
}


def _sharing(cls: type) -> Any:
    """The ``__post_init__`` of a struct with fields in ``_shared``: one statement per field,
    written for the field's type (msgspec calls it for every instance it converts, about ten
    per route: a loop over the names with ``getattr`` cost twice as much)."""
    annotations: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        annotations.update(inspect.get_annotations(base))
    lines = ["def __post_init__(self):"]
    for name in cls._shared:  # type: ignore[attr-defined]
        template = _SHARING.get(str(annotations.get(name)))
        if template is None:
            raise TypeError(f"{cls.__name__}.{name}: not a field of strings to share")
        lines.append(template.format(f=name))
    namespace = {"_set": _set, "_intern": _intern}
    exec("\n".join(lines), namespace)
    return namespace["__post_init__"]


class _Shared(_Base, kw_only=True, frozen=True):
    """A struct whose fields named in ``_shared`` hold strings that many objects repeat (the
    names a reference points at, header names and values): a string field, a tuple of
    strings or a dict's string values. Each string is kept as one shared instance
    (``sys.intern``; freed with its last user) instead of the copy every decoded object
    brings (memory at scale: docs/benchmarks.md, fourth round), by a ``__post_init__``
    written for the class's fields (:func:`_sharing`), which msgspec calls for every
    instance it decodes or converts."""

    _shared: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # (set while the class is made: msgspec reads __post_init__ then)
        setattr(cls, "__post_init__", _sharing(cls))  # noqa: B010 (msgspec calls it)


# ---------------------------------------------------------------- metadata and shared bits


# The one empty dict of every object's metadata without labels or annotations (most objects
# have no annotations): msgspec makes a new empty dict per instance, 80 bytes each. Models are
# never changed in place (they are frozen; their dicts are read or copied), so it is shared.
_NO_ENTRIES: dict[str, str] = {}


class ObjectMeta(_Base, kw_only=True, frozen=True):
    name: str = ""
    namespace: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    generation: int = 1
    creation_timestamp: str = ""
    resource_version: str = ""
    uid: str = ""

    def __post_init__(self) -> None:
        labels = self.labels
        if labels:  # (label values repeat across objects: shared, as _Shared shares strings)
            for key, item in labels.items():
                labels[key] = _intern(item)
        else:
            _set(self, "labels", _NO_ENTRIES)
        if not self.annotations:
            _set(self, "annotations", _NO_ENTRIES)


class LabelSelectorRequirement(_Base, kw_only=True, frozen=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelector(_Base, kw_only=True, frozen=True):
    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class ParentReference(_Shared, kw_only=True, frozen=True):
    _shared = ("namespace", "name", "section_name")

    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    namespace: str | None = None
    name: str
    section_name: str | None = None
    port: int | None = None


class BackendObjectReference(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "namespace")

    group: str = ""
    kind: str = "Service"
    name: str
    namespace: str | None = None
    port: int | None = None


class SecretObjectReference(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = "Secret"
    name: str
    namespace: str | None = None


class ObjectReference(_Base, kw_only=True, frozen=True):
    """A reference with a required group and kind (e.g. caCertificateRefs)."""

    group: str = ""
    kind: str = ""
    name: str
    namespace: str | None = None


class LocalObjectReference(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = ""
    name: str


class LocalPolicyTargetReference(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = ""
    name: str
    section_name: str | None = None


class ParametersReference(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = ""
    name: str
    namespace: str | None = None


# ---------------------------------------------------------------- GatewayClass


class GatewayClassSpec(_Base, kw_only=True, frozen=True):
    controller_name: str = ""
    parameters_ref: ParametersReference | None = None
    description: str | None = None


class GatewayClass(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "GatewayClass"
    metadata: ObjectMeta
    spec: GatewayClassSpec = GatewayClassSpec()


# ---------------------------------------------------------------- Gateway and ListenerSet


class RouteGroupKind(_Base, kw_only=True, frozen=True):
    group: str = GATEWAY_GROUP
    kind: str


class RouteNamespaces(_Base, kw_only=True, frozen=True):
    from_: str = msgspec.field(default="Same", name="from")
    selector: LabelSelector | None = None


class AllowedRoutes(_Base, kw_only=True, frozen=True):
    namespaces: RouteNamespaces = RouteNamespaces()
    kinds: tuple[RouteGroupKind, ...] | None = None


class ListenerTLSConfig(_Base, kw_only=True, frozen=True):
    mode: str = "Terminate"
    certificate_refs: tuple[SecretObjectReference, ...] = ()
    options: dict[str, str] = {}


class Listener(_Base, kw_only=True, frozen=True):
    name: str
    hostname: str | None = None
    port: int = 0
    protocol: str = ""
    tls: ListenerTLSConfig | None = None
    allowed_routes: AllowedRoutes = AllowedRoutes()


class GatewayAddress(_Base, kw_only=True, frozen=True):
    type: str = "IPAddress"
    value: str = ""


class GatewayInfrastructure(_Base, kw_only=True, frozen=True):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    parameters_ref: LocalObjectReference | None = None


class FrontendTLSValidation(_Base, kw_only=True, frozen=True):
    ca_certificate_refs: tuple[ObjectReference, ...] = ()
    mode: str = "AllowValidOnly"


class TLSConfig(_Base, kw_only=True, frozen=True):
    validation: FrontendTLSValidation | None = None


class TLSPortConfig(_Base, kw_only=True, frozen=True):
    port: int
    tls: TLSConfig = TLSConfig()


class FrontendTLSConfig(_Base, kw_only=True, frozen=True):
    default: TLSConfig = TLSConfig()
    per_port: tuple[TLSPortConfig, ...] = ()


class GatewayBackendTLS(_Base, kw_only=True, frozen=True):
    client_certificate_ref: SecretObjectReference | None = None


class GatewayTLSConfig(_Base, kw_only=True, frozen=True):
    backend: GatewayBackendTLS | None = None
    frontend: FrontendTLSConfig | None = None


class AllowedListenerNamespaces(_Base, kw_only=True, frozen=True):
    from_: str = msgspec.field(default="None", name="from")
    selector: LabelSelector | None = None


class AllowedListeners(_Base, kw_only=True, frozen=True):
    namespaces: AllowedListenerNamespaces = AllowedListenerNamespaces()


class GatewaySpec(_Base, kw_only=True, frozen=True):
    gateway_class_name: str = ""
    listeners: tuple[Listener, ...] = ()
    addresses: tuple[GatewayAddress, ...] = ()
    infrastructure: GatewayInfrastructure | None = None
    tls: GatewayTLSConfig | None = None
    allowed_listeners: AllowedListeners | None = None
    default_scope: str | None = None


class Gateway(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "Gateway"
    metadata: ObjectMeta
    spec: GatewaySpec = GatewaySpec()


class ParentGatewayReference(_Base, kw_only=True, frozen=True):
    """A ListenerSet's parent: a Gateway, by name (no sectionName or port, unlike a route's)."""

    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    name: str
    namespace: str | None = None


class ListenerSetSpec(_Base, kw_only=True, frozen=True):
    parent_ref: ParentGatewayReference
    listeners: tuple[Listener, ...] = ()


class ListenerSet(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "ListenerSet"
    metadata: ObjectMeta
    spec: ListenerSetSpec


# ---------------------------------------------------------------- route filters


class HTTPHeader(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "value")

    name: str
    value: str = ""


class HTTPHeaderFilter(_Shared, kw_only=True, frozen=True):
    _shared = ("remove",)

    set: tuple[HTTPHeader, ...] = ()
    add: tuple[HTTPHeader, ...] = ()
    remove: tuple[str, ...] = ()


class HTTPPathModifier(_Base, kw_only=True, frozen=True):
    type: str
    replace_full_path: str | None = None
    replace_prefix_match: str | None = None


class HTTPRequestRedirectFilter(_Base, kw_only=True, frozen=True):
    scheme: str | None = None
    hostname: str | None = None
    path: HTTPPathModifier | None = None
    port: int | None = None
    status_code: int = 302


class HTTPURLRewriteFilter(_Base, kw_only=True, frozen=True):
    hostname: str | None = None
    path: HTTPPathModifier | None = None


class Fraction(_Base, kw_only=True, frozen=True):
    numerator: int
    denominator: int = 100


class HTTPRequestMirrorFilter(_Base, kw_only=True, frozen=True):
    backend_ref: BackendObjectReference
    percent: int | None = None
    fraction: Fraction | None = None


class HTTPCORSFilter(_Base, kw_only=True, frozen=True):
    allow_origins: tuple[str, ...] = ()
    allow_credentials: bool | None = None
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int = 5


class GRPCAuthConfig(_Base, kw_only=True, frozen=True):
    allowed_headers: tuple[str, ...] = ()


class HTTPAuthConfig(_Base, kw_only=True, frozen=True):
    path: str = ""
    allowed_headers: tuple[str, ...] = ()
    allowed_response_headers: tuple[str, ...] = ()


class ForwardBodyConfig(_Base, kw_only=True, frozen=True):
    max_size: int = 0


class HTTPExternalAuthFilter(_Base, kw_only=True, frozen=True):
    protocol: Literal["GRPC", "HTTP"]
    backend_ref: BackendObjectReference
    grpc: GRPCAuthConfig | None = None
    http: HTTPAuthConfig | None = None
    forward_body: ForwardBodyConfig | None = None


class HTTPRouteFilter(_Base, kw_only=True, frozen=True):
    type: HTTPRouteFilterType
    request_header_modifier: HTTPHeaderFilter | None = None
    response_header_modifier: HTTPHeaderFilter | None = None
    request_mirror: HTTPRequestMirrorFilter | None = None
    request_redirect: HTTPRequestRedirectFilter | None = None
    url_rewrite: HTTPURLRewriteFilter | None = None
    extension_ref: LocalObjectReference | None = None
    cors: HTTPCORSFilter | None = None
    external_auth: HTTPExternalAuthFilter | None = None


# ---------------------------------------------------------------- HTTPRoute


class HTTPPathMatch(_Base, kw_only=True, frozen=True):
    type: PathMatchType = "PathPrefix"
    value: str = "/"


class HTTPHeaderMatch(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "value")

    type: MatchType = "Exact"
    name: str
    value: str


class HTTPQueryParamMatch(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "value")

    type: MatchType = "Exact"
    name: str
    value: str


class HTTPRouteMatch(_Base, kw_only=True, frozen=True):
    path: HTTPPathMatch | None = HTTPPathMatch()
    headers: tuple[HTTPHeaderMatch, ...] = ()
    query_params: tuple[HTTPQueryParamMatch, ...] = ()
    method: HTTPMethod | None = None


class HTTPBackendRef(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "namespace")

    group: str = ""
    kind: str = "Service"
    name: str
    namespace: str | None = None
    port: int | None = None
    weight: int = 1
    filters: tuple[HTTPRouteFilter, ...] = ()


class HTTPRouteTimeouts(_Base, kw_only=True, frozen=True):
    request: str | None = None
    backend_request: str | None = None


class HTTPRouteRetry(_Base, kw_only=True, frozen=True):
    codes: tuple[int, ...] = ()
    attempts: int | None = None
    backoff: str | None = None


class CookieConfig(_Base, kw_only=True, frozen=True):
    name: str | None = None
    path: str = "/"
    lifetime_type: str = "Session"  # Session | Permanent


class HeaderConfig(_Base, kw_only=True, frozen=True):
    name: str


class SessionPersistence(_Base, kw_only=True, frozen=True):
    type: str = "Cookie"
    absolute_timeout: str | None = None
    cookie: CookieConfig | None = None
    header: HeaderConfig | None = None


class HTTPRouteRule(_Base, kw_only=True, frozen=True):
    name: str | None = None
    matches: tuple[HTTPRouteMatch, ...] = (HTTPRouteMatch(),)
    filters: tuple[HTTPRouteFilter, ...] = ()
    backend_refs: tuple[HTTPBackendRef, ...] = ()
    timeouts: HTTPRouteTimeouts | None = None
    retry: HTTPRouteRetry | None = None
    session_persistence: SessionPersistence | None = None


class HTTPRouteSpec(_Base, kw_only=True, frozen=True):
    parent_refs: tuple[ParentReference, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[HTTPRouteRule, ...] = (HTTPRouteRule(),)
    use_default_gateways: str | None = None


class HTTPRoute(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "HTTPRoute"
    metadata: ObjectMeta
    spec: HTTPRouteSpec = HTTPRouteSpec()


# ---------------------------------------------------------------- GRPCRoute


class GRPCMethodMatch(_Base, kw_only=True, frozen=True):
    type: MatchType = "Exact"
    service: str | None = None
    method: str | None = None


class GRPCHeaderMatch(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "value")

    type: MatchType = "Exact"
    name: str
    value: str


class GRPCRouteMatch(_Base, kw_only=True, frozen=True):
    method: GRPCMethodMatch | None = None
    headers: tuple[GRPCHeaderMatch, ...] = ()


class GRPCRouteFilter(_Base, kw_only=True, frozen=True):
    type: GRPCRouteFilterType
    request_header_modifier: HTTPHeaderFilter | None = None
    response_header_modifier: HTTPHeaderFilter | None = None
    request_mirror: HTTPRequestMirrorFilter | None = None
    extension_ref: LocalObjectReference | None = None


class GRPCBackendRef(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "namespace")

    group: str = ""
    kind: str = "Service"
    name: str
    namespace: str | None = None
    port: int | None = None
    weight: int = 1
    filters: tuple[GRPCRouteFilter, ...] = ()


class GRPCRouteRule(_Base, kw_only=True, frozen=True):
    name: str | None = None
    matches: tuple[GRPCRouteMatch, ...] = ()
    filters: tuple[GRPCRouteFilter, ...] = ()
    backend_refs: tuple[GRPCBackendRef, ...] = ()
    session_persistence: SessionPersistence | None = None


class GRPCRouteSpec(_Base, kw_only=True, frozen=True):
    parent_refs: tuple[ParentReference, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[GRPCRouteRule, ...] = ()
    use_default_gateways: str | None = None


class GRPCRoute(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "GRPCRoute"
    metadata: ObjectMeta
    spec: GRPCRouteSpec = GRPCRouteSpec()


# ---------------------------------------------------------------- TLS / TCP / UDP routes


class BackendRef(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "namespace")

    group: str = ""
    kind: str = "Service"
    name: str
    namespace: str | None = None
    port: int | None = None
    weight: int = 1


class L4RouteRule(_Base, kw_only=True, frozen=True):
    name: str | None = None
    backend_refs: tuple[BackendRef, ...] = ()


class TLSRouteSpec(_Base, kw_only=True, frozen=True):
    parent_refs: tuple[ParentReference, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[L4RouteRule, ...] = ()
    use_default_gateways: str | None = None


class TLSRoute(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "TLSRoute"
    metadata: ObjectMeta
    spec: TLSRouteSpec = TLSRouteSpec()


class L4RouteSpec(_Base, kw_only=True, frozen=True):
    parent_refs: tuple[ParentReference, ...] = ()
    rules: tuple[L4RouteRule, ...] = ()
    use_default_gateways: str | None = None


class TCPRoute(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "TCPRoute"
    metadata: ObjectMeta
    spec: L4RouteSpec = L4RouteSpec()


class UDPRoute(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "UDPRoute"
    metadata: ObjectMeta
    spec: L4RouteSpec = L4RouteSpec()


# ---------------------------------------------------------------- ReferenceGrant


class ReferenceGrantFrom(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = ""
    namespace: str = ""


class ReferenceGrantTo(_Base, kw_only=True, frozen=True):
    group: str = ""
    kind: str = ""
    name: str | None = None


class ReferenceGrantSpec(_Base, kw_only=True, frozen=True):
    from_: tuple[ReferenceGrantFrom, ...] = msgspec.field(default=(), name="from")
    to: tuple[ReferenceGrantTo, ...] = ()


class ReferenceGrant(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1beta1"
    kind: str = "ReferenceGrant"
    metadata: ObjectMeta
    spec: ReferenceGrantSpec = ReferenceGrantSpec()


# ---------------------------------------------------------------- BackendTLSPolicy


class SubjectAltName(_Base, kw_only=True, frozen=True):
    type: str
    hostname: str | None = None
    uri: str | None = None


class BackendTLSPolicyValidation(_Base, kw_only=True, frozen=True):
    ca_certificate_refs: tuple[LocalObjectReference, ...] = ()
    # The one field name of the API whose camel case has two capitals in a row: named explicitly.
    well_known_ca_certificates: str | None = msgspec.field(
        default=None, name="wellKnownCACertificates"
    )
    hostname: str = ""
    subject_alt_names: tuple[SubjectAltName, ...] = ()


class BackendTLSPolicySpec(_Base, kw_only=True, frozen=True):
    target_refs: tuple[LocalPolicyTargetReference, ...] = ()
    validation: BackendTLSPolicyValidation = BackendTLSPolicyValidation()
    options: dict[str, str] = {}


class BackendTLSPolicy(_Base, kw_only=True, frozen=True):
    api_version: str = f"{GATEWAY_GROUP}/v1"
    kind: str = "BackendTLSPolicy"
    metadata: ObjectMeta
    spec: BackendTLSPolicySpec = BackendTLSPolicySpec()


# ---------------------------------------------------------------- Envoy Gateway: Backend


class BackendFQDNEndpoint(_Base, kw_only=True, frozen=True):
    hostname: str
    port: int


class BackendIPEndpoint(_Base, kw_only=True, frozen=True):
    address: str
    port: int


class BackendUnixEndpoint(_Base, kw_only=True, frozen=True):
    path: str


class BackendEndpoint(_Base, kw_only=True, frozen=True):
    """Exactly one of ``fqdn``, ``ip`` and ``unix`` (the CRD's CEL rules say so)."""

    fqdn: BackendFQDNEndpoint | None = None
    ip: BackendIPEndpoint | None = None
    unix: BackendUnixEndpoint | None = None
    hostname: str | None = None
    zone: str | None = None


class BackendTLSSettings(_Base, kw_only=True, frozen=True):
    ca_certificate_refs: tuple[LocalObjectReference, ...] = ()
    well_known_ca_certificates: str | None = msgspec.field(
        default=None, name="wellKnownCACertificates"
    )
    insecure_skip_verify: bool = False
    sni: str | None = None
    client_certificate_ref: SecretObjectReference | None = None
    # Read so that a Backend using them can be refused by name (gateweave does not implement them).
    auto_sni_from_endpoint_hostname: bool | None = msgspec.field(
        default=None, name="autoSNIFromEndpointHostname"
    )
    alpn_protocols: tuple[str, ...] | None = None
    ciphers: tuple[str, ...] | None = None
    ecdh_curves: tuple[str, ...] | None = None
    signature_algorithms: tuple[str, ...] | None = None
    min_version: str | None = None
    max_version: str | None = None
    fingerprints: tuple[str, ...] | None = None


class BackendSpec(_Base, kw_only=True, frozen=True):
    type: str = "Endpoints"
    endpoints: tuple[BackendEndpoint, ...] = ()
    app_protocols: tuple[str, ...] = ()
    fallback: bool | None = None
    tls: BackendTLSSettings | None = None


class Backend(_Base, kw_only=True, frozen=True):
    """Envoy Gateway's ``Backend`` (gateway.envoyproxy.io/v1alpha1), a backendRef target."""

    api_version: str = f"{ENVOY_GATEWAY_GROUP}/v1alpha1"
    kind: str = "Backend"
    metadata: ObjectMeta
    spec: BackendSpec = BackendSpec()


# ---------------------------------------------------------------- Envoy Gateway: policies
#
# BackendTrafficPolicy, ClientTrafficPolicy and SecurityPolicy keep their ``spec`` as the
# API server stores it (validated against the kind's CRD when read): the attachment stage
# (translate/policies) reads the targeting fields through :class:`PolicyTargeting`, refuses
# by name every set field no feature implements, and each feature reads its own part.


class PolicyTargetReference(_Base, kw_only=True, frozen=True):
    """A targetRef of an Envoy Gateway policy (local: the policy's namespace)."""

    group: str
    kind: str
    name: str
    section_name: str | None = None


class TargetSelectorNamespaces(_Base, kw_only=True, frozen=True):
    from_: str = msgspec.field(default="Same", name="from")
    selector: LabelSelector | None = None


class TargetSelector(_Base, kw_only=True, frozen=True):
    group: str = GATEWAY_GROUP
    kind: str
    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    namespaces: TargetSelectorNamespaces | None = None


class PolicyTargeting(_Base, kw_only=True, frozen=True):
    """The targeting fields every Envoy Gateway policy kind has (``targetRef`` is deprecated)."""

    target_ref: PolicyTargetReference | None = None
    target_refs: tuple[PolicyTargetReference, ...] = ()
    target_selectors: tuple[TargetSelector, ...] = ()


class _EnvoyGatewayPolicy(_Base, kw_only=True, frozen=True):
    api_version: str = f"{ENVOY_GATEWAY_GROUP}/v1alpha1"
    metadata: ObjectMeta
    spec: dict[str, Any] = {}


class BackendTrafficPolicy(_EnvoyGatewayPolicy, kw_only=True, frozen=True):
    kind: str = "BackendTrafficPolicy"


class ClientTrafficPolicy(_EnvoyGatewayPolicy, kw_only=True, frozen=True):
    kind: str = "ClientTrafficPolicy"


class SecurityPolicy(_EnvoyGatewayPolicy, kw_only=True, frozen=True):
    kind: str = "SecurityPolicy"


# ---------------------------------------------------------------- gateweave's parameters kind
# Every field None when unset: a Gateway's parameters replace its class's field by field
# (translate/parameters.py), and what neither sets takes gateweave's default.


class EnvoyParameters(_Base, kw_only=True, frozen=True):
    concurrency: int | None = None
    log_level: str | None = None
    drain_timeout: str | None = None
    extra_args: tuple[str, ...] | None = None


class ServiceParameters(_Base, kw_only=True, frozen=True):
    type: str | None = None


class ResourceRequirements(_Base, kw_only=True, frozen=True):
    requests: dict[str, int | str] | None = None
    limits: dict[str, int | str] | None = None


class PodDisruptionBudgetParameters(_Base, kw_only=True, frozen=True):
    MERGED_WHOLE: ClassVar[bool] = True  # one of two fields: a Gateway's replaces its class's whole
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class AutoscalingParameters(_Base, kw_only=True, frozen=True):
    MERGED_WHOLE: ClassVar[bool] = True
    min_replicas: int | None = None
    max_replicas: int = 1
    cpu_utilization: int | None = None
    memory_utilization: int | None = None


class KubernetesParameters(_Base, kw_only=True, frozen=True):
    replicas: int | None = None
    pod_disruption_budget: PodDisruptionBudgetParameters | None = None
    autoscaling: AutoscalingParameters | None = None
    service: ServiceParameters = ServiceParameters()
    resources: ResourceRequirements = ResourceRequirements()


class AccessLogParameters(_Base, kw_only=True, frozen=True):
    sink: str | None = None
    format: str | None = None


class TracingParameters(_Base, kw_only=True, frozen=True):
    endpoint: str | None = None
    sampling_rate: float | None = None


class TelemetryParameters(_Base, kw_only=True, frozen=True):
    access_log: AccessLogParameters = AccessLogParameters()
    tracing: TracingParameters = TracingParameters()


class GatewayParametersSpec(_Base, kw_only=True, frozen=True):
    merge_gateways: bool | None = None  # on a GatewayClass's: one Envoy for all its Gateways
    envoy: EnvoyParameters = EnvoyParameters()
    kubernetes: KubernetesParameters = KubernetesParameters()
    telemetry: TelemetryParameters = TelemetryParameters()


class GatewayParameters(_Base, kw_only=True, frozen=True):
    """gateweave's ``GatewayParameters`` (gateweave.io/v1alpha1): how a Gateway's Envoy runs."""

    api_version: str = f"{GATEWEAVE_GROUP}/v1alpha1"
    kind: str = "GatewayParameters"
    metadata: ObjectMeta
    spec: GatewayParametersSpec = GatewayParametersSpec()


# ---------------------------------------------------------------- core kinds


class ServicePort(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "protocol", "app_protocol")

    name: str = ""
    protocol: str = "TCP"
    port: int
    target_port: int | str | None = None
    app_protocol: str | None = None


class ServiceSpec(_Shared, kw_only=True, frozen=True):
    _shared = ("selector",)

    type: str = "ClusterIP"
    selector: dict[str, str] = {}
    ports: tuple[ServicePort, ...] = ()
    cluster_ip: str | None = msgspec.field(default=None, name="clusterIP")
    external_name: str | None = None
    external_ips: tuple[str, ...] = msgspec.field(default=(), name="externalIPs")
    load_balancer_ip: str | None = msgspec.field(default=None, name="loadBalancerIP")


class LoadBalancerIngress(_Base, kw_only=True, frozen=True):
    ip: str | None = None
    hostname: str | None = None


class LoadBalancerStatus(_Base, kw_only=True, frozen=True):
    ingress: tuple[LoadBalancerIngress, ...] = ()


class ServiceStatus(_Base, kw_only=True, frozen=True):
    load_balancer: LoadBalancerStatus = LoadBalancerStatus()


class Service(_Base, kw_only=True, frozen=True):
    api_version: str = "v1"
    kind: str = "Service"
    metadata: ObjectMeta
    spec: ServiceSpec = ServiceSpec()
    # Written by Kubernetes (the load balancer's addresses), not by gateweave: part of the
    # model, so a change of it is a change to translate (a Gateway's addresses).
    status: ServiceStatus = ServiceStatus()


class EndpointConditions(_Base, kw_only=True, frozen=True):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class Endpoint(_Base, kw_only=True, frozen=True):
    addresses: tuple[str, ...] = ()
    conditions: EndpointConditions = EndpointConditions()
    hostname: str | None = None
    target_ref: dict[str, Any] | None = None


class EndpointPort(_Shared, kw_only=True, frozen=True):
    _shared = ("name", "protocol", "app_protocol")

    name: str | None = None
    protocol: str = "TCP"
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(_Shared, kw_only=True, frozen=True):
    _shared = ("address_type",)

    api_version: str = "discovery.k8s.io/v1"
    kind: str = "EndpointSlice"
    metadata: ObjectMeta
    address_type: str = "IPv4"
    endpoints: tuple[Endpoint, ...] = ()
    ports: tuple[EndpointPort, ...] = ()


class Namespace(_Base, kw_only=True, frozen=True):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta


class Secret(_Base, kw_only=True, frozen=True):
    api_version: str = "v1"
    kind: str = "Secret"
    metadata: ObjectMeta
    type: str = "Opaque"
    data: dict[str, str] = {}
    string_data: dict[str, str] = {}


class ConfigMap(_Base, kw_only=True, frozen=True):
    api_version: str = "v1"
    kind: str = "ConfigMap"
    metadata: ObjectMeta
    data: dict[str, str] = {}
    binary_data: dict[str, str] = {}
