"""The intermediate representation that ``translate`` produces.

Two IRs, both keyed by Gateway (``"namespace/name"``):

* the **infrastructure IR** (:class:`InfraGateway`): what must run for a Gateway - its
  address and the ports it listens on - consumed by the infra managers;
* the **xDS IR** (:class:`XdsGateway`): everything Envoy must do for that Gateway,
  already resolved (certificates as PEM, endpoints as addresses, filters in spec
  order, routes in Gateway API precedence order), consumed by the xDS builder, which
  only has to map it onto Envoy protos.

Every type is an immutable msgspec Struct, so IRs compare by value (the runtime
publishes only what changed) and encode deterministically (``gateweave translate
--show ir``).
"""

from __future__ import annotations

import hashlib

import msgspec


class _IR(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True, gc=False):
    pass


# ---------------------------------------------------------------- infrastructure


class InfraPort(_IR, kw_only=True, frozen=True):
    name: (
        str  # listener name(s) using this port, joined by ","; merged: "<ns>/<gateway>/<listener>"s
    )
    port: int
    protocol: str  # "TCP" or "UDP"


class EnvoySettings(_IR, kw_only=True, frozen=True):
    """How a Gateway's Envoy runs (its GatewayParameters' ``spec.envoy``, merged and defaulted)."""

    concurrency: int = 0  # --concurrency; 0: Envoy's own default (the CPUs where it runs)
    log_level: str = ""  # --log-level; "": the data plane's own default
    drain_time_s: int | None = None  # --drain-time-s; None: the data plane's own default
    extra_args: tuple[str, ...] = ()  # appended to Envoy's command line


class DisruptionBudget(_IR, kw_only=True, frozen=True):
    """The Envoy pods' PodDisruptionBudget: one of the two set (a count or "N%")."""

    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class Autoscaling(_IR, kw_only=True, frozen=True):
    """The Envoy Deployment's HorizontalPodAutoscaler (utilisation targets in percent)."""

    min_replicas: int = 1
    max_replicas: int = 1
    cpu_utilization: int | None = None
    memory_utilization: int | None = None


class KubernetesSettings(_IR, kw_only=True, frozen=True):
    """A Gateway's Kubernetes objects (its GatewayParameters' ``spec.kubernetes``)."""

    replicas: int = 1  # the Deployment's, unless autoscaling decides them
    disruption_budget: DisruptionBudget | None = None  # None: no PodDisruptionBudget
    autoscaling: Autoscaling | None = None  # None: no HorizontalPodAutoscaler
    service_type: str = ""  # "": the infra manager's default (serve --service-type)
    requests: dict[str, str] = {}  # the Envoy container's resources, by resource name
    limits: dict[str, str] = {}


class InfraGateway(_IR, kw_only=True, frozen=True):
    name: str  # "namespace/name"
    namespace: str
    gateway_name: str
    gateway_class: str
    uid: str = ""  # the Gateway's metadata.uid: the owner of its Kubernetes objects
    address: str  # the address its listeners bind to
    ports: tuple[InfraPort, ...] = ()
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    # Kubernetes addressing mode: the spec.addresses IPs to ask the Gateway's Service for.
    requested_addresses: tuple[str, ...] = ()
    envoy: EnvoySettings = EnvoySettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    # A merged GatewayClass's Envoy (translate/merging.py): its Gateways, "namespace/name".
    members: tuple[str, ...] = ()


# Kubernetes data plane: the labels on a Gateway's Envoy Deployment pods and Service (the
# Service's selector). Translate finds the Gateway's Service, for its addresses, by them.
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"


# What every Envoy pod and Service gateweave generates carries, whoever it serves.
ENVOY_APP_LABELS = {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/managed-by": "gateweave"}


def envoy_labels(gateway_name: str) -> dict[str, str]:
    return {**ENVOY_APP_LABELS, GATEWAY_NAME_LABEL: gateway_name}


# The Envoy Deployment pods and Service shared by the Gateways of a merged GatewayClass
# (mergeGateways) carry the class's name instead of a Gateway's.
GATEWAY_CLASS_LABEL = "gateweave.io/owning-gatewayclass"


def class_envoy_labels(class_name: str) -> dict[str, str]:
    return {**ENVOY_APP_LABELS, GATEWAY_CLASS_LABEL: class_name}


# ---------------------------------------------------------------- upstreams


# Endpoint types: an IP address, a host name the cluster resolves (DNS), a unix socket path.
ENDPOINT_IP = "IP"
ENDPOINT_FQDN = "FQDN"
ENDPOINT_UNIX = "Unix"


class Endpoint(_IR, kw_only=True, frozen=True):
    address: str  # an IP address, a host name (type FQDN) or a unix socket path (type Unix)
    port: int  # 0 for a unix socket
    type: str = ENDPOINT_IP
    hostname: str = (
        ""  # the endpoint's host name as Envoy reports it (a Backend's endpoints[].hostname)
    )


class UpstreamTLS(_IR, kw_only=True, frozen=True):
    """BackendTLSPolicy, or an Envoy Gateway Backend's ``tls`` (and Gateway spec.tls.backend
    client certificate).

    ``sni`` empty: an HTTP cluster takes each request's Host as SNI and checks the server
    certificate against it; other clusters send no SNI and check the chain only.
    """

    sni: str
    ca_pem: str = ""  # empty: use the system trust store (wellKnownCACertificates: System)
    subject_alt_names: tuple[SANMatch, ...] = ()
    client_cert_pem: str = ""
    client_key_pem: str = ""
    insecure_skip_verify: bool = False  # the server certificate is not checked at all


class SANMatch(_IR, kw_only=True, frozen=True):
    type: str  # "DNS" | "URI"
    value: str


# A reserved cluster name: routes send an invalid backendRef's share of the traffic here. It
# has no endpoints; the xDS builder makes requests to it answer 500 (Gateway API: "the
# proportion of requests that would otherwise have been routed to an invalid backend MUST
# receive a 500"), and TCP/TLS connections to it are closed.
INVALID_BACKEND_CLUSTER = "gateweave/invalid-backend"


class TCPKeepalive(_IR, kw_only=True, frozen=True):
    """TCP keepalive on a connection (a policy's ``tcpKeepalive``): probes sent after ``idle_s``
    seconds without data, every ``interval_s`` seconds, the connection closed after ``probes``
    unanswered ones; None: the system's setting."""

    probes: int | None = None
    idle_s: int | None = None
    interval_s: int | None = None


class HealthCheck(_IR, kw_only=True, frozen=True):
    """An active health check of each endpoint: an HTTP request (healthy when its status is
    one of ``expected``) or a TCP connection, every ``interval_s``."""

    type: str  # HTTP | TCP
    interval_s: float
    timeout_s: float
    healthy: int  # successes in a row that put an endpoint back
    unhealthy: int  # failures in a row that take it out
    path: str = ""
    host: str = ""  # the Host of the check ("": Envoy's, the cluster's name)
    expected: tuple[int, ...] = (200,)


class OutlierDetection(_IR, kw_only=True, frozen=True):
    """A passive health check: an endpoint failing requests in a row is ejected for a while."""

    consecutive_5xx: int | None = None
    consecutive_gateway_errors: int | None = None
    consecutive_local_failures: int | None = None
    split_local_errors: bool = False
    interval_s: float | None = None
    base_ejection_s: float | None = None
    max_ejection_percent: int | None = None
    always_eject_one: bool = False  # even beyond max_ejection_percent


class ClusterPolicy(_IR, kw_only=True, frozen=True):
    """A BackendTrafficPolicy's settings for the upstreams of the routes it governs: each such
    route sends to copies of its clusters carrying them (:func:`policy_cluster`)."""

    lb: str = (
        ""  # RoundRobin | LeastRequest | Random | ConsistentHash; "": Envoy's default (round robin)
    )
    hash_on: str = ""  # ConsistentHash: SourceIP | Header | Cookie
    hash_name: str = ""  # the header's or cookie's name
    hash_cookie_ttl_s: float | None = None  # Cookie: Envoy sets the cookie when the client has none
    # Cookie: the attributes of the cookie Envoy sets (name, value), sorted by name
    hash_cookie_attributes: tuple[tuple[str, str], ...] = ()
    hash_table_size: int = 65537  # Maglev's table (a prime)
    # Endpoint override: a request naming endpoints ("IP:port", comma-separated) in the first of
    # these headers it has goes to one of them (a healthy one of the cluster's); else ``lb`` picks
    endpoint_override_headers: tuple[str, ...] = ()
    connect_timeout_s: float | None = None
    # Circuit breaker thresholds (Envoy's default priority); None: Envoy's default
    max_connections: int | None = None
    max_pending_requests: int | None = None
    max_parallel_requests: int | None = None
    max_parallel_retries: int | None = None
    health_check: HealthCheck | None = None
    outlier: OutlierDetection | None = None
    tcp_keepalive: TCPKeepalive | None = None  # on the connections to the endpoints


def policy_cluster(cluster: str, policy: ClusterPolicy) -> str:
    """The name of the copy of cluster ``cluster`` with ``policy``'s settings (one per distinct
    settings; the backend's own parts of the name stay first)."""
    digest = hashlib.sha256(msgspec.json.encode(policy)).hexdigest()[:12]
    return f"{cluster}/policy-{digest}"


class Cluster(_IR, kw_only=True, frozen=True):
    """One upstream: a Service port or a Backend (or a mirror / ext target) with its endpoints."""

    name: str
    protocol: str = "HTTP1"  # HTTP1 | HTTP2 | H2C | TCP | UDP | WEBSOCKET
    endpoints: tuple[Endpoint, ...] = ()
    tls: UpstreamTLS | None = None
    policy: ClusterPolicy | None = None  # a copy for the routes a BackendTrafficPolicy governs

    @property
    def dns(self) -> bool:
        """Envoy resolves its endpoints itself (some are host names), instead of being sent
        their addresses over EDS."""
        return any(ep.type == ENDPOINT_FQDN for ep in self.endpoints)


class WeightedCluster(_IR, kw_only=True, frozen=True):
    cluster: str  # Cluster.name
    weight: int
    request_headers: HeaderMods | None = None  # per-backendRef filters
    response_headers: HeaderMods | None = None
    # A backendRef's own RequestRedirect answers its share of the requests itself; its own
    # URLRewrite applies to the requests forwarded to it (over the rule's, field by field).
    redirect: Redirect | None = None
    url_rewrite: URLRewrite | None = None


# ---------------------------------------------------------------- HTTP


class HeaderMods(_IR, kw_only=True, frozen=True):
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()


class StringMatch(_IR, kw_only=True, frozen=True):
    name: str
    type: str  # Exact | RegularExpression
    value: str


class RouteMatch(_IR, kw_only=True, frozen=True):
    path_type: str = "PathPrefix"  # Exact | PathPrefix | RegularExpression
    path: str = "/"
    headers: tuple[StringMatch, ...] = ()
    query_params: tuple[StringMatch, ...] = ()
    method: str | None = None
    grpc: bool = False  # a GRPCRoute match: only gRPC requests (content-type application/grpc)


class Redirect(_IR, kw_only=True, frozen=True):
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    path_type: str | None = None  # ReplaceFullPath | ReplacePrefixMatch
    path: str | None = None
    status_code: int = 302


class URLRewrite(_IR, kw_only=True, frozen=True):
    hostname: str | None = None
    path_type: str | None = None  # ReplaceFullPath | ReplacePrefixMatch
    path: str | None = None


class Mirror(_IR, kw_only=True, frozen=True):
    cluster: str
    numerator: int = 100
    denominator: int = 100


class CORS(_IR, kw_only=True, frozen=True):
    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    allow_credentials: bool = False
    max_age_s: int | None = 5  # None: no Access-Control-Max-Age (a SecurityPolicy without maxAge)


class Retry(_IR, kw_only=True, frozen=True):
    codes: tuple[int, ...] = ()
    attempts: int | None = None
    backoff_s: float | None = None
    # A BackendTrafficPolicy's retry: Envoy's retry_on conditions as written (None: implied by
    # ``codes``), the backoff's ceiling and each attempt's own timeout.
    triggers: tuple[str, ...] | None = None
    max_backoff_s: float | None = None
    per_try_s: float | None = None


class RateLimitSource(_IR, kw_only=True, frozen=True):
    """A rate limit rule's client address condition: the client is inside ``cidr`` (its
    network address/prefix, e.g. ``10.0.0.0/8``); ``distinct``: each address has its own bucket."""

    cidr: str
    distinct: bool = False


class RateLimitRule(_IR, kw_only=True, frozen=True):
    """A local rate limit rule with client selectors: the requests meeting all its conditions
    share a bucket of ``requests`` per ``unit_s`` seconds (one per distinct value of each
    ``Distinct`` header and of the client address when ``source.distinct``). ``headers``:
    ``Exact`` / ``RegularExpression`` matches (``invert``: the header must not match), or type
    ``Distinct`` (the header must be present; its value picks the bucket)."""

    requests: int
    unit_s: int
    headers: tuple[tuple[StringMatch, bool], ...] = ()  # (match, invert)
    query_params: tuple[tuple[StringMatch, bool], ...] = ()  # as headers, on query parameters
    source: RateLimitSource | None = None
    # its answers' x-ratelimit-* headers: on (True) or off (False) whatever the route says (None)
    headers_option: bool | None = None
    shadow: bool = False  # its buckets count, but never refuse a request
    cost: int | None = None  # the tokens a request takes from its bucket (None: 1)


class LocalRateLimit(_IR, kw_only=True, frozen=True):
    """A BackendTrafficPolicy's local rate limit on a route: ``requests`` per ``unit_s``
    seconds for every request (one token bucket per route on each Envoy; ``requests`` None: no
    such limit), and the ``rules`` limiting the clients their selectors pick, each in its own
    buckets: a request some rule picks takes from those rules' buckets only, any other from the
    route's. A request over any limit it meets gets 429."""

    requests: int | None
    unit_s: int
    rules: tuple[RateLimitRule, ...] = ()
    # answers carry Envoy's draft-03 x-ratelimit-* headers (of the bucket the request took from)
    x_ratelimit_headers: bool = True


class BasicAuth(_IR, kw_only=True, frozen=True):
    """A SecurityPolicy's basicAuth on a route: the htpasswd lines (``user:{SHA}hash``, one per
    user) a request's ``Authorization: Basic`` credentials must match, else 401."""

    users: str
    forward_username_header: str = ""  # the authenticated user goes to the backend in it


class ApiKeyCredential(_IR, kw_only=True, frozen=True):
    client: str  # the client ID (its key in the credential Secret)
    api_key: str  # (the admin API blanks every ``api_key``: gateweave/redact.py)


class ApiKeyAuth(_IR, kw_only=True, frozen=True):
    """A SecurityPolicy's apiKeyAuth on a route: a request must carry one of ``credentials``'
    keys in the first of ``sources`` it has (header, query or cookie, by name), else 401."""

    credentials: tuple[ApiKeyCredential, ...]
    sources: tuple[tuple[str, str], ...]  # (header | query | cookie, name), in order
    forward_client_id_header: str = ""  # the header the client ID goes to the backend in
    sanitize: bool = False  # the key is taken out of the request before it goes on


class JwtProvider(_IR, kw_only=True, frozen=True):
    """One JWT issuer a route accepts: tokens signed with a key of ``jwks`` (a JWKS document),
    from ``issuer`` (empty: any) for one of ``audiences`` (none: any)."""

    name: str
    jwks: str
    issuer: str = ""
    audiences: tuple[str, ...] = ()
    # where the token is: (header, value prefix), query parameters, cookies; none: Authorization:
    # Bearer
    headers: tuple[tuple[str, str], ...] = ()
    params: tuple[str, ...] = ()
    cookies: tuple[str, ...] = ()
    claim_to_headers: tuple[tuple[str, str], ...] = ()  # (claim, request header)
    recompute_route: bool = False  # the route is chosen again after those headers are set
    # A remote JWKS (``jwks`` then empty): fetched by Envoy from ``jwks_uri`` through the cluster
    # ``jwks_cluster``, kept ``jwks_cache_s``; after a failed fetch, again in ``jwks_refetch_s``
    # (None: Envoy's 1 s).
    jwks_uri: str = ""
    jwks_cluster: str = ""
    jwks_cache_s: float = 300.0
    jwks_refetch_s: float | None = None
    # its backendSettings: the fetch's retry (None: none) and timeout (None: the xDS builder's)
    jwks_retry: Retry | None = None
    jwks_timeout_s: float | None = None


class Jwt(_IR, kw_only=True, frozen=True):
    """A SecurityPolicy's jwt on a route: a request needs a valid token of one of ``providers``
    (401 otherwise); ``optional``: a request without any token passes too; ``fail_open``: any
    request passes (a valid token's claims still forwarded)."""

    providers: tuple[JwtProvider, ...]
    optional: bool = False
    fail_open: bool = False  # a request with a missing or invalid token passes too


class JwtClaim(_IR, kw_only=True, frozen=True):
    """A claim an authorization rule wants: at ``path`` (a nested claim's keys) in the token's
    payload, one of ``values`` (``array``: a list holding one of them)."""

    path: tuple[str, ...]
    values: tuple[str, ...]
    array: bool = False


class AuthzRule(_IR, kw_only=True, frozen=True):
    """One authorization rule: a request from one of ``cidrs`` (none listed: any client) having
    every header of ``headers`` with one of its values, one of ``methods``, a path ``path_regex``
    matches and the JWT claims and scopes below (none listed: any request) gets ``allow``."""

    allow: bool
    cidrs: tuple[str, ...] = ()  # network/prefix, normalised
    headers: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, accepted values)
    methods: tuple[str, ...] = ()  # the request's method is one of these (none listed: any)
    # the request's whole :path (with its query) matches this RE2 ("": any), or with
    # ``path_invert`` does not
    path_regex: str = ""
    path_invert: bool = False
    # The verified token of the JWT provider ``jwt_provider`` (its payload in jwt_authn's dynamic
    # metadata) has every claim of ``claims`` and every scope of ``scopes`` (in ``scope`` or
    # ``scp``).
    jwt_provider: str = ""
    claims: tuple[JwtClaim, ...] = ()
    scopes: tuple[str, ...] = ()


class Authorization(_IR, kw_only=True, frozen=True):
    """A SecurityPolicy's authorization on a route: the first rule a request matches decides,
    none matching: ``default_allow``; a denied request gets 403."""

    rules: tuple[AuthzRule, ...] = ()
    default_allow: bool = False


# IR routes are named after the route object they come from (see route_prefix): the data plane
# finds from a route's name which object to hold responsible when Envoy rejects a route table.
_ROUTE_KINDS_BY_PREFIX = {"httproute": "HTTPRoute", "grpcroute": "GRPCRoute"}


def route_prefix(kind: str, namespace: str, name: str) -> str:
    """The start of the name of every IR route made from the route object ``kind ns/name``."""
    return f"{kind.lower()}/{namespace}/{name}/rule/"


def route_owner(route_name: str) -> tuple[str, str, str] | None:
    """The ``(kind, namespace, name)`` of the route object an IR route was made from, or None
    (e.g. a listener's own 421 route for misdirected requests)."""
    parts = route_name.split("/", 4)
    if len(parts) < 5 or parts[3] != "rule":
        return None
    kind = _ROUTE_KINDS_BY_PREFIX.get(parts[0])
    return (kind, parts[1], parts[2]) if kind is not None else None


class ExtAuth(_IR, kw_only=True, frozen=True):
    """An ExternalAuth filter (GEP-1494): each request is first sent to the auth service at
    ``cluster``; only what it allows goes on (with the headers it adds), what it denies gets its
    answer."""

    protocol: str  # GRPC (Envoy's ext_authz protocol) | HTTP
    cluster: str
    path: str = ""  # HTTP: put before the request's path
    path_override: str = ""  # HTTP: the check's path in place of the request's ("": the request's)
    # The request headers the auth service gets. GRPC: none listed means all; HTTP: Host, Method,
    # Path, Content-Length and Authorization always, and these.
    allowed_headers: tuple[str, ...] = ()
    allowed_response_headers: tuple[
        str, ...
    ] = ()  # HTTP: its headers the request takes on (none listed: all)
    max_body_bytes: int = (
        0  # forwardBody.maxSize: as much of the body is sent (0: none); more is refused
    )
    # A SecurityPolicy's extAuth: none of its headers when none are listed (headersToBackend);
    # an unreachable or failing service lets the request through (failOpen), or gets
    # ``status_on_error`` (0: Envoy's 403); the verdict is awaited ``timeout_s`` (None: 10 s).
    only_listed_response_headers: bool = False
    fail_open: bool = False
    status_on_error: int = 0
    timeout_s: float | None = None
    recompute_route: bool = False  # the route is chosen again after the service's headers
    # (name, value) pairs the auth service gets with each check (gRPC: the CheckRequest's
    # context_extensions)
    context: tuple[tuple[str, str], ...] = ()
    # A SecurityPolicy's backendSettings.retry: the checks' own retry (None: none)
    retry: Retry | None = None


class Session(_IR, kw_only=True, frozen=True):
    """A rule's sessionPersistence: the client carries the endpoint that served it, in a cookie
    or a header named ``name``, and its requests go back there while it is there."""

    type: str  # Cookie | Header
    name: str
    path: str = "/"  # the cookie's Path
    ttl_s: float | None = None  # cookie: its Max-Age, and the session's end (absoluteTimeout)


class ResponseOverride(_IR, frozen=True):
    """A BackendTrafficPolicy's custom answer for the upstream statuses it matches."""

    codes: tuple[tuple[int, int], ...]  # inclusive status ranges (a single value: start == end)
    # response headers it needs, all of them (type Exact | Prefix | Suffix | RegularExpression);
    # with ``codes`` empty, any status
    response_headers: tuple[StringMatch, ...] = ()
    body: str | None = None  # an Envoy format string (%RESPONSE_CODE%...; %% is a %)
    content_type: str | None = None
    status: int | None = None  # the answer's status (None: the upstream's)
    headers: HeaderMods | None = None  # the answer's headers added and set (never removed)
    # Instead of a local answer: the request sent again, inside Envoy, to the URL the redirect
    # makes of it (scheme, hostname, port, full path; None: the request's), answered with that
    # request's answer and ``redirect.status_code``; body, content type, status and headers unused
    redirect: Redirect | None = None


class Compressor(_IR, kw_only=True, frozen=True):
    """A BackendTrafficPolicy's compression algorithm for a route's answers."""

    kind: str  # Gzip | Brotli | Zstd
    min_content_length: int | None = None  # bytes; None: Envoy's default (30)


class Route(_IR, kw_only=True, frozen=True):
    """One Envoy route: a single match of a route rule, with everything it does.

    Exactly one of ``backends``, ``redirect`` and ``direct_status`` decides the action;
    a rule whose backends are all invalid has ``direct_status=500``. Backends may carry
    their own redirect / rewrite (the xDS builder then splits the route by weight).
    """

    # route_prefix(kind, ns, name) + "<i>/match/<j>"; an HTTPS chain's 421 for a misdirected
    # request: "<route config>/misdirected/<domain>"
    name: str
    match: RouteMatch
    backends: tuple[WeightedCluster, ...] = ()
    redirect: Redirect | None = None
    direct_status: int | None = None
    request_headers: HeaderMods | None = None
    response_headers: HeaderMods | None = None
    url_rewrite: URLRewrite | None = None
    mirrors: tuple[Mirror, ...] = ()
    cors: CORS | None = None
    timeout_s: float | None = None  # HTTPRoute timeouts.request (0: disabled)
    backend_timeout_s: float | None = None  # timeouts.backendRequest
    retry: Retry | None = None
    session: Session | None = None
    ext_auth: ExtAuth | None = None
    # Envoy Gateway policies' effects on the route (translate/policies); None: no policy applies.
    rate_limit: LocalRateLimit | None = None
    basic_auth: BasicAuth | None = None
    api_key_auth: ApiKeyAuth | None = None
    jwt: Jwt | None = None
    authorization: Authorization | None = None
    # BackendTrafficPolicy compressor: the algorithms, preferred first
    compression: tuple[Compressor, ...] = ()
    # BackendTrafficPolicy responseOverride, in order (the first matching one answers)
    response_overrides: tuple[ResponseOverride, ...] = ()

    cluster_policy: ClusterPolicy | None = (
        None  # its backends are reached through policy_cluster copies
    )


class VirtualHost(_IR, kw_only=True, frozen=True):
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...] = ()


class RouteConfig(_IR, kw_only=True, frozen=True):
    name: str
    virtual_hosts: tuple[VirtualHost, ...] = ()


# ---------------------------------------------------------------- TLS on listeners


class Certificate(_IR, kw_only=True, frozen=True):
    name: str  # "<ns>/<secret>"
    cert_pem: str
    key_pem: str


class ClientSANMatch(_IR, kw_only=True, frozen=True):
    """A client certificate's subject alt name of ``type`` (DNS | EMAIL | IP_ADDRESS | URI |
    OTHER_NAME, with its ``oid``) matching ``value`` as ``match`` says (Exact | Prefix | Suffix |
    RegularExpression)."""

    type: str
    match: str
    value: str
    oid: str = ""


class ClientValidation(_IR, kw_only=True, frozen=True):
    """Frontend client-certificate validation (Gateway spec.tls.frontend)."""

    ca_pem: str
    # AllowValidOnly (a certificate required and verified) | AllowInsecureFallback (asked for,
    # neither required nor verified); a ClientTrafficPolicy's also: VerifyIfGiven (verified when
    # given), RequireAny (required, not verified)
    mode: str = "AllowValidOnly"
    # A ClientTrafficPolicy's further checks of a client certificate: the SHA-256 of its public
    # key (SPKI, base64) or of the whole certificate (hex) is one of these; a subject alt name
    # matches one of ``subject_alt_names``; no certificate of the chain (``crl_leaf_only``: the
    # client's own) is revoked by the CRLs (PEM); ``allow_expired``: an expired one is taken.
    spki_hashes: tuple[str, ...] = ()
    certificate_hashes: tuple[str, ...] = ()
    subject_alt_names: tuple[ClientSANMatch, ...] = ()
    crl_pem: str = ""
    crl_leaf_only: bool = False
    allow_expired: bool = False


class TLSTermination(_IR, kw_only=True, frozen=True):
    certificates: tuple[Certificate, ...]
    client_validation: ClientValidation | None = None
    alpn: tuple[str, ...] = ()


class TCPProxy(_IR, kw_only=True, frozen=True):
    name: str
    backends: tuple[WeightedCluster, ...] = ()  # empty: reject connections
    route: str = ""  # "<kind>/<ns>/<name>" of the route it serves (access logs); "": none


class PathSettings(_IR, kw_only=True, frozen=True):
    """How a connection manager rewrites request paths before routing (a ClientTrafficPolicy's
    ``path``): normalised (RFC 3986: ``.`` and ``..`` segments resolved), adjacent slashes
    merged or not, and escaped slashes (``%2F``, ``%5C``) kept, refused (400), unescaped and
    forwarded, or unescaped with a redirect to the unescaped path."""

    merge_slashes: bool = True
    escaped_slashes: str = (
        "UnescapeAndRedirect"  # or KeepUnchanged, RejectRequest, UnescapeAndForward
    )


class ClientSettings(_IR, kw_only=True, frozen=True):
    """How an HTTP connection manager treats its clients (a ClientTrafficPolicy's effect)."""

    xff_trusted_hops: int = (
        0  # the client address is the Nth X-Forwarded-For entry from the right (0: the peer)
    )
    # ... or the rightmost X-Forwarded-For entry outside these ranges ("address/length"), when the
    # peer is in one of them (empty: none)
    xff_trusted_cidrs: tuple[str, ...] = ()
    xff_skip_append: bool = False  # the peer's address not appended to X-Forwarded-For
    client_ip_header: str = ""  # the client address is this header's ("": none)
    client_ip_header_fail_closed: bool = False  # ... and a request without a valid one gets 403
    proxy_protocol: bool = (
        False  # connections start with a PROXY protocol header (v1 or v2) giving the client address
    )
    proxy_protocol_optional: bool = False  # ... or may come without one
    # Seconds (0: none; None: Envoy's default): a request's whole reception, an HTTP connection
    # without requests, a TCP proxy's connection without bytes either way.
    request_received_timeout_s: float | None = None
    http_idle_timeout_s: float | None = None
    tcp_idle_timeout_s: float | None = None
    max_connections: int | None = (
        None  # concurrent connections per filter chain; beyond: closed at once
    )
    buffer_limit_bytes: int | None = (
        None  # the Envoy listener's per-connection read and write buffers
    )
    max_accept_per_event: int | None = None  # connections accepted per socket event (0: any number)
    headers_with_underscores: str = (
        ""  # Allow, RejectRequest (400) or DropHeader; "": Envoy's default (Allow)
    )
    # request headers changed before anything else sees the request (routing included)
    early_request_headers: HeaderMods | None = None
    # TLS on the filter chains terminating it: "1.0".."1.3" ("": Envoy's default), the TLS 1.2
    # and older cipher suites (empty: Envoy's), the ALPN protocols (None: the chain's own).
    tls_min_version: str = ""
    tls_max_version: str = ""
    tls_ciphers: tuple[str, ...] = ()
    tls_alpn: tuple[str, ...] | None = None
    # the key exchange groups and signature algorithms offered (empty: Envoy's), the kinds of
    # session resumption allowed ("stateless": tickets, "stateful": session IDs; None: both)
    tls_ecdh_curves: tuple[str, ...] = ()
    tls_signature_algorithms: tuple[str, ...] = ()
    tls_resumption: tuple[str, ...] | None = None
    tls_client_validation: ClientValidation | None = None  # in place of the chain's own
    path: PathSettings | None = None  # request paths rewritten (None: they reach routing as sent)
    tcp_keepalive: TCPKeepalive | None = None  # on the clients' connections (the listener's socket)


class FilterChain(_IR, kw_only=True, frozen=True):
    """One filter chain of a TLS-capable port, selected by SNI.

    ``server_names`` empty matches any SNI (the listener had no hostname). Either
    ``http`` (HTTPS termination) or ``tcp`` (TLS passthrough, or TLS terminate to TCP)
    is set.
    """

    name: str
    server_names: tuple[str, ...] = ()
    tls: TLSTermination | None = None  # None: passthrough
    http: RouteConfig | None = None
    tcp: TCPProxy | None = None
    client: ClientSettings | None = (
        None  # its listener's ClientTrafficPolicy effect (HTTPS; TLS: the TCP proxy)
    )


class Port(_IR, kw_only=True, frozen=True):
    """One Envoy listener: one port of the Gateway's address.

    ``protocol`` is the Envoy-side family: HTTP (plain HTTP listeners, ``http`` set),
    TLS (HTTPS and TLS listeners sharing a port, ``filter_chains`` set), TCP (``tcp``
    set) or UDP (``udp`` set).
    """

    name: str  # "<ns>/<gateway>/<port>"
    port: int
    protocol: str
    address: str = ""  # the address it binds (its Gateway's); "": the XdsGateway's address
    http: RouteConfig | None = None
    filter_chains: tuple[FilterChain, ...] = ()
    tcp: TCPProxy | None = None
    udp: TCPProxy | None = None
    client: ClientSettings | None = (
        None  # its listeners' ClientTrafficPolicy effect (HTTP, TLS, TCP)
    )


# ---------------------------------------------------------------- telemetry


# Where a Gateway's Envoy writes its access log: a file in its own directory (the host data
# plane), its standard output (the Kubernetes data plane: the pod's log), or nowhere.
ACCESS_LOG_FILE = "file"
ACCESS_LOG_STDOUT = "stdout"
ACCESS_LOG_OFF = "off"
ACCESS_LOG_SINKS = (ACCESS_LOG_FILE, ACCESS_LOG_STDOUT, ACCESS_LOG_OFF)
# How a line is written: one JSON object, or the same fields as ``key=value`` pairs.
ACCESS_LOG_JSON = "json"
ACCESS_LOG_TEXT = "text"


class Tracing(_IR, kw_only=True, frozen=True):
    """OpenTelemetry tracing: spans go over OTLP/gRPC to ``collector`` (host, port)."""

    collector_host: str
    collector_port: int
    sampling_percent: float = 100.0


class Telemetry(_IR, kw_only=True, frozen=True):
    """A Gateway's access log and tracing (serve's options, under its GatewayParameters')."""

    access_log: str = ACCESS_LOG_FILE  # one of ACCESS_LOG_SINKS
    access_log_format: str = ACCESS_LOG_JSON  # ACCESS_LOG_JSON or ACCESS_LOG_TEXT
    tracing: Tracing | None = None  # None: no tracing


class XdsGateway(_IR, kw_only=True, frozen=True):
    """What one Envoy (xDS node) serves: one Gateway's, or every Gateway of a merged class
    (then ``name`` is the class's node, translate/merging.py, and each port has its address)."""

    name: str  # "namespace/name"
    address: str
    ports: tuple[Port, ...] = ()
    clusters: tuple[Cluster, ...] = ()  # every cluster any port refers to, sorted by name
    telemetry: Telemetry = Telemetry()


class Result(msgspec.Struct, kw_only=True, frozen=True):
    """What one translation produces.

    ``statuses`` maps ``(kind, namespace, name)`` to the object's computed ``status``
    (JSON-ready, without ``lastTransitionTime``: the status sink stamps it), for every
    object this controller owns a part of.
    """

    statuses: dict[tuple[str, str, str], dict[str, object]]
    infra: dict[str, InfraGateway]
    xds: dict[str, XdsGateway]
