"""SecurityPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here and its checks to :func:`resolve`, which reads what the policy references
(Secrets) and gives the policy's effect, applied to each route it governs by
:func:`route_effect` (effects.py calls it through
:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).

Implemented:

* ``basicAuth``: the htpasswd file in the Secret ``users`` names (key ``.htpasswd``; another
  namespace's with a ReferenceGrant to the SecurityPolicy), SHA hashes only, as Envoy's
  basic_auth filter takes them: a request without matching credentials gets 401.
* ``authorization``: ``rules`` (``action`` Allow or Deny for a ``principal`` of
  ``clientCIDRs`` and ``headers``), the first matching rule deciding, else ``defaultAction``
  (Deny when unset, as Envoy Gateway); a denied request gets 403.
* ``apiKeyAuth``: the keys of the ``credentialRefs`` Secrets (each key a client ID, its value
  the API key; another namespace's with a ReferenceGrant), looked for in ``extractFrom``'s
  headers, query parameters and cookies in order; a request without a known key gets 401. The
  client ID goes to the backend in ``forwardClientIDHeader``; ``sanitize`` takes the key out
  (Envoy's api_key_auth filter).
* ``jwt``: ``providers`` with a ``localJWKS`` (``Inline``, or ``ValueRef`` to a ConfigMap of
  the policy's namespace, its key ``jwks`` or else its first), ``issuer``, ``audiences``,
  ``extractFrom`` (headers with their value prefix, params, cookies) and ``claimToHeaders``;
  ``optional``. A request without a valid token of one of them gets 401 (Envoy's jwt_authn
  filter).
* ``extAuth``: an HTTP (``http.path``, ``headersToBackend``) or gRPC auth service by its
  ``backendRef`` (or one ``backendRefs`` entry; another namespace's with a ReferenceGrant to the
  SecurityPolicy), ``headersToExtAuth`` and ``failOpen``, on Envoy's ext_authz filter as the
  HTTPRoute ExternalAuth filter (xds/extauth.py): what it denies gets its answer.
* ``cors``: the governed routes answer CORS as Envoy's cors filter does with these
  ``allowOrigins`` (``*`` labels as wildcards, as the HTTPRoute CORS filter), ``allowMethods``,
  ``allowHeaders``, ``exposeHeaders``, ``maxAge`` and ``allowCredentials``; it replaces a
  rule's own CORS filter.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from typing import Any, TypeVar

import msgspec

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import filters
from gateweave.translate.backends import BackendResolver
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.certs import secret_value
from gateweave.translate.filters import RuleError, parse_duration
from gateweave.translate.policies import specvalue

IMPLEMENTED: frozenset[str] = frozenset(
    {
        "basicAuth",
        "basicAuth.users",
        "basicAuth.users.group",
        "basicAuth.users.kind",
        "basicAuth.users.name",
        "basicAuth.users.namespace",
        "authorization",
        "authorization.defaultAction",
        "authorization.rules",
        "authorization.rules.name",
        "authorization.rules.action",
        "authorization.rules.principal",
        "authorization.rules.principal.clientCIDRs",
        "authorization.rules.principal.headers",
        "authorization.rules.principal.headers.name",
        "authorization.rules.principal.headers.values",
        "apiKeyAuth",
        "apiKeyAuth.credentialRefs",
        "apiKeyAuth.credentialRefs.group",
        "apiKeyAuth.credentialRefs.kind",
        "apiKeyAuth.credentialRefs.name",
        "apiKeyAuth.credentialRefs.namespace",
        "apiKeyAuth.extractFrom",
        "apiKeyAuth.extractFrom.headers",
        "apiKeyAuth.extractFrom.params",
        "apiKeyAuth.extractFrom.cookies",
        "apiKeyAuth.forwardClientIDHeader",
        "apiKeyAuth.sanitize",
        "jwt",
        "jwt.optional",
        "jwt.providers",
        "jwt.providers.name",
        "jwt.providers.issuer",
        "jwt.providers.audiences",
        "jwt.providers.localJWKS",
        "jwt.providers.localJWKS.type",
        "jwt.providers.localJWKS.inline",
        "jwt.providers.localJWKS.valueRef",
        "jwt.providers.localJWKS.valueRef.group",
        "jwt.providers.localJWKS.valueRef.kind",
        "jwt.providers.localJWKS.valueRef.name",
        "jwt.providers.extractFrom",
        "jwt.providers.extractFrom.headers",
        "jwt.providers.extractFrom.headers.name",
        "jwt.providers.extractFrom.headers.valuePrefix",
        "jwt.providers.extractFrom.params",
        "jwt.providers.extractFrom.cookies",
        "jwt.providers.claimToHeaders",
        "jwt.providers.claimToHeaders.claim",
        "jwt.providers.claimToHeaders.header",
        "extAuth",
        "extAuth.failOpen",
        "extAuth.headersToExtAuth",
        "extAuth.http",
        "extAuth.http.path",
        "extAuth.http.headersToBackend",
        "extAuth.http.backendRef.*",
        "extAuth.http.backendRefs",
        "extAuth.http.backendRefs.group",
        "extAuth.http.backendRefs.kind",
        "extAuth.http.backendRefs.name",
        "extAuth.http.backendRefs.namespace",
        "extAuth.http.backendRefs.port",
        "extAuth.http.backendRefs.weight",
        "extAuth.grpc",
        "extAuth.grpc.backendRef.*",
        "extAuth.grpc.backendRefs",
        "extAuth.grpc.backendRefs.group",
        "extAuth.grpc.backendRefs.kind",
        "extAuth.grpc.backendRefs.name",
        "extAuth.grpc.backendRefs.namespace",
        "extAuth.grpc.backendRefs.port",
        "extAuth.grpc.backendRefs.weight",
        "cors",
        "cors.allowOrigins",
        "cors.allowMethods",
        "cors.allowHeaders",
        "cors.exposeHeaders",
        "cors.maxAge",
        "cors.allowCredentials",
    }
)

T = TypeVar("T")

HTPASSWD_KEY = ".htpasswd"  # Envoy Gateway's key of the users Secret
_SHA = "{SHA}"
_SHA1_BYTES = 20


class Effect(msgspec.Struct, frozen=True):
    """What a SecurityPolicy does to each route it governs (None: that feature is not set)."""

    basic_auth: ir.BasicAuth | None = None
    authorization: ir.Authorization | None = None
    cors: ir.CORS | None = None
    api_key_auth: ir.ApiKeyAuth | None = None
    jwt: ir.Jwt | None = None
    ext_auth: ir.ExtAuth | None = None
    clusters: tuple[ir.Cluster, ...] = ()  # upstreams the effect sends to (the auth service)


_NO_EFFECT = Effect()


class _SecretRef(msgspec.Struct, frozen=True):
    name: str
    group: str = ""
    kind: str = "Secret"
    namespace: str | None = None


class _BasicAuth(msgspec.Struct, frozen=True):
    users: _SecretRef


class _ExtractFrom(msgspec.Struct, frozen=True):
    headers: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    cookies: tuple[str, ...] = ()


class _ApiKeyAuth(msgspec.Struct, frozen=True, rename="camel"):
    credential_refs: tuple[_SecretRef, ...] = ()
    extract_from: tuple[_ExtractFrom, ...] = ()
    forward_client_id_header: str = msgspec.field(default="", name="forwardClientIDHeader")
    sanitize: bool = False


class _TokenHeader(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    value_prefix: str = ""


class _JwtExtractFrom(msgspec.Struct, frozen=True):
    headers: tuple[_TokenHeader, ...] = ()
    params: tuple[str, ...] = ()
    cookies: tuple[str, ...] = ()


class _ClaimToHeader(msgspec.Struct, frozen=True):
    claim: str
    header: str


class _JwtProvider(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    issuer: str = ""
    audiences: tuple[str, ...] = ()
    local_jwks: specvalue.InlineOrRef | None = msgspec.field(default=None, name="localJWKS")
    extract_from: _JwtExtractFrom | None = None
    claim_to_headers: tuple[_ClaimToHeader, ...] = ()


class _Jwt(msgspec.Struct, frozen=True):
    providers: tuple[_JwtProvider, ...] = ()
    optional: bool = False


class _JWKS(msgspec.Struct, frozen=True):
    keys: tuple[dict[str, Any], ...]


class _BackendRef(msgspec.Struct, frozen=True):
    name: str
    group: str = ""
    kind: str = "Service"
    namespace: str | None = None
    port: int | None = None


class _AuthService(msgspec.Struct, frozen=True, rename="camel"):
    backend_ref: _BackendRef | None = None
    backend_refs: tuple[_BackendRef, ...] = ()
    path: str = ""
    headers_to_backend: tuple[str, ...] = ()


class _ExtAuth(msgspec.Struct, frozen=True, rename="camel"):
    http: _AuthService | None = None
    grpc: _AuthService | None = None
    headers_to_ext_auth: tuple[str, ...] = ()
    fail_open: bool = False


class _Header(msgspec.Struct, frozen=True):
    name: str
    values: tuple[str, ...] = ()


class _Principal(msgspec.Struct, frozen=True, rename="camel"):
    client_cid_rs: tuple[str, ...] = msgspec.field(default=(), name="clientCIDRs")
    headers: tuple[_Header, ...] = ()


class _Rule(msgspec.Struct, frozen=True):
    action: str
    principal: _Principal = _Principal()
    name: str = ""


class _CORS(msgspec.Struct, frozen=True, rename="camel"):
    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: str | None = None
    allow_credentials: bool = False


class _Authorization(msgspec.Struct, frozen=True, rename="camel"):
    rules: tuple[_Rule, ...] = ()
    default_action: str = "Deny"


def problems(spec: dict[str, Any]) -> list[str]:
    """Checked by :func:`resolve`, which also reads the Secrets: nothing to add here."""
    return []


def resolve(ctx: Any, policy: Any) -> tuple[Effect, list[str]]:
    """The policy's effect on the routes it governs, and what in it cannot be applied (a bad
    value, a missing or unusable Secret), each with its place in the spec."""
    spec = policy.spec if isinstance(policy.spec, dict) else {}
    out: list[str] = []
    basic = _basic_auth(ctx, policy.metadata.namespace, spec.get("basicAuth"), out)
    authz = _authorization(spec.get("authorization"), out)
    cors = _cors(spec.get("cors"), out)
    api_key = _api_key_auth(ctx, policy.metadata.namespace, spec.get("apiKeyAuth"), out)
    jwt = _jwt(ctx, policy.metadata.namespace, spec.get("jwt"), out)
    ext, clusters = _ext_auth(ctx, policy.metadata.namespace, spec.get("extAuth"), out)
    return Effect(
        basic_auth=basic,
        authorization=authz,
        cors=cors,
        api_key_auth=api_key,
        jwt=jwt,
        ext_auth=ext,
        clusters=clusters,
    ), out


def route_effect(effect: Effect, route: ir.Route) -> ir.Route:
    """``route`` as a SecurityPolicy with ``effect`` (accepted, without problems) makes it."""
    if effect == _NO_EFFECT:
        return route
    return msgspec.structs.replace(
        route,
        basic_auth=effect.basic_auth,
        authorization=effect.authorization,
        api_key_auth=effect.api_key_auth,
        jwt=effect.jwt,
        ext_auth=effect.ext_auth if effect.ext_auth is not None else route.ext_auth,
        cors=effect.cors if effect.cors is not None else route.cors,
    )


def _read(raw: Any, shape: type[T], where: str, out: list[str]) -> T | None:
    """A feature's object read into ``shape``; None when it is not set, or (with the problem in
    ``out``) when it cannot be read (a stored object the CRD did not check)."""
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, shape, strict=False)
    except msgspec.ValidationError as exc:
        out.append(f"{where}: {exc}")
        return None


# ---------------------------------------------------------------- basicAuth


def _basic_auth(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.BasicAuth | None:
    conf = _read(raw, _BasicAuth, "spec.basicAuth", out)
    if conf is None:
        return None
    ref = conf.users
    where = "spec.basicAuth.users"
    text = _secret_text(ctx, namespace, ref, where, HTPASSWD_KEY, out)
    if text is None:
        return None
    users = htpasswd_users(text)
    if isinstance(users, str):
        out.append(
            f"{where}: Secret {ref.namespace or namespace}/{ref.name} key {HTPASSWD_KEY}: {users}"
        )
        return None
    return ir.BasicAuth(users="\n".join(users))


def _secret(
    ctx: Any, namespace: str, ref: _SecretRef, where: str, out: list[str]
) -> m.Secret | None:
    """The Secret ``ref`` names, read as Envoy Gateway allows (another namespace's only with a
    ReferenceGrant to SecurityPolicies of ``namespace``); None, with the problem in ``out``,
    when it cannot be read."""
    if ref.group not in ("", "core") or ref.kind != "Secret":
        out.append(f"{where}: {ref.group or 'core'}/{ref.kind} is not a Secret")
        return None
    ns = ref.namespace or namespace
    if not ctx.reference_allowed(
        m.ENVOY_GATEWAY_GROUP, "SecurityPolicy", namespace, "", "Secret", ns, ref.name
    ):
        out.append(
            f"{where}: Secret {ns}/{ref.name} is in another namespace and no ReferenceGrant allows "
            "it"
        )
        return None
    secret: m.Secret | None = ctx.snapshot.secrets.get((ns, ref.name))
    if secret is None:
        out.append(f"{where}: Secret {ns}/{ref.name} does not exist")
    return secret


def _secret_text(
    ctx: Any, namespace: str, ref: _SecretRef, where: str, key: str, out: list[str]
) -> str | None:
    """The text under ``key`` of the Secret ``ref`` names (see :func:`_secret`)."""
    secret = _secret(ctx, namespace, ref, where, out)
    if secret is None:
        return None
    text = secret_value(secret, key)
    if text is None:
        out.append(
            f"{where}: Secret {secret.metadata.namespace}/{ref.name} has no key {key} (UTF-8 text)"
        )
    return text


def htpasswd_users(text: str) -> list[str] | str:
    """The htpasswd file's user lines (blank lines dropped), or what Envoy's basic_auth filter
    would refuse in it: only ``user:{SHA}base64(sha1)`` lines, each user once."""
    lines: list[str] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            return f"line {number} is not user:hash"
        if not hashed.startswith(_SHA):
            return f"line {number} (user {user}): only {_SHA} hashes are supported"
        try:
            digest = base64.b64decode(hashed[len(_SHA) :], validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != _SHA1_BYTES:
            return f"line {number} (user {user}): not a base64 SHA-1 hash"
        if user in seen:
            return f"line {number}: user {user} appears twice"
        seen.add(user)
        lines.append(line)
    if not lines:
        return "no users"
    return lines


# ---------------------------------------------------------------- authorization


def _authorization(raw: Any, out: list[str]) -> ir.Authorization | None:
    conf = _read(raw, _Authorization, "spec.authorization", out)
    if conf is None:
        return None
    if conf.default_action not in ("Allow", "Deny"):
        out.append(f"spec.authorization.defaultAction {conf.default_action} is not Allow or Deny")
    rules = []
    for i, rule in enumerate(conf.rules):
        where = f"spec.authorization.rules[{i}]"
        if rule.action not in ("Allow", "Deny"):
            out.append(f"{where}.action {rule.action} is not Allow or Deny")
        cidrs = []
        for j, cidr in enumerate(rule.principal.client_cid_rs):
            try:
                cidrs.append(str(ipaddress.ip_network(cidr, strict=False)))
            except ValueError:
                out.append(f"{where}.principal.clientCIDRs[{j}] {cidr} is not a CIDR")
        headers = tuple((h.name, h.values) for h in rule.principal.headers)
        for j, (name, values) in enumerate(headers):
            if not name or not values:
                out.append(
                    f"{where}.principal.headers[{j}]: a name and at least one value are needed"
                )
        if not cidrs and not headers and not rule.principal.client_cid_rs:
            out.append(f"{where}.principal: at least one of clientCIDRs, headers is needed")
        rules.append(
            ir.AuthzRule(allow=rule.action == "Allow", cidrs=tuple(cidrs), headers=headers)
        )
    return ir.Authorization(rules=tuple(rules), default_allow=conf.default_action == "Allow")


# ---------------------------------------------------------------- cors


def _cors(raw: Any, out: list[str]) -> ir.CORS | None:
    """Read as the HTTPRoute CORS filter is (its origin wildcards), but ``maxAge`` is a duration
    and, unset, sends no Access-Control-Max-Age (as Envoy Gateway)."""
    conf = _read(raw, _CORS, "spec.cors", out)
    if conf is None:
        return None
    max_age: int | None = None
    if conf.max_age is not None:
        try:
            max_age = int(parse_duration(conf.max_age))
        except RuleError:
            out.append(f"spec.cors.maxAge {conf.max_age} is not a duration")
    try:
        made = filters.cors(
            m.HTTPCORSFilter(
                allow_origins=conf.allow_origins,
                allow_credentials=conf.allow_credentials,
                allow_methods=conf.allow_methods,
                allow_headers=conf.allow_headers,
                expose_headers=conf.expose_headers,
            )
        )
    except RuleError as exc:
        out.append(f"spec.cors: {exc}")
        return None
    return msgspec.structs.replace(made, max_age_s=max_age)


# ---------------------------------------------------------------- apiKeyAuth


def _api_key_auth(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.ApiKeyAuth | None:
    conf = _read(raw, _ApiKeyAuth, "spec.apiKeyAuth", out)
    if conf is None:
        return None
    credentials: dict[str, str] = {}  # key -> client
    clients: set[str] = set()
    for i, ref in enumerate(conf.credential_refs):
        where = f"spec.apiKeyAuth.credentialRefs[{i}]"
        secret = _secret(ctx, namespace, ref, where, out)
        if secret is None:
            continue
        for client in sorted({*secret.data, *secret.string_data}):
            if client in clients:  # an earlier Secret's client ID: ignored, as Envoy Gateway does
                continue
            key = secret_value(secret, client)
            if not key:
                out.append(
                    f"{where}: Secret {secret.metadata.namespace}/{ref.name} key {client}: no API "
                    "key (UTF-8 text)"
                )
            elif key in credentials:
                out.append(
                    f"{where}: Secret {secret.metadata.namespace}/{ref.name} key {client}: "
                    f"the same API key as client {credentials[key]}"
                )
            else:
                credentials[key] = client
                clients.add(client)
    sources = tuple(
        (kind, name)
        for source in conf.extract_from
        for kind, names in (
            ("header", source.headers),
            ("query", source.params),
            ("cookie", source.cookies),
        )
        for name in names
    )
    if not credentials and not out:
        out.append("spec.apiKeyAuth.credentialRefs: no API keys")
    if not sources:
        out.append("spec.apiKeyAuth.extractFrom: no header, param or cookie to find the key in")
    by_client = sorted(credentials.items(), key=lambda kc: kc[1])
    return ir.ApiKeyAuth(
        credentials=tuple(ir.ApiKeyCredential(client=c, api_key=k) for k, c in by_client),
        sources=sources,
        forward_client_id_header=conf.forward_client_id_header,
        sanitize=conf.sanitize,
    )


# ---------------------------------------------------------------- jwt


def _jwt(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.Jwt | None:
    conf = _read(raw, _Jwt, "spec.jwt", out)
    if conf is None:
        return None
    providers = []
    names: set[str] = set()
    for i, p in enumerate(conf.providers):
        where = f"spec.jwt.providers[{i}]"
        if p.name in names:
            out.append(f"{where}.name {p.name} is not unique")
        names.add(p.name)
        jwks = (
            _local_jwks(ctx, namespace, p.local_jwks, f"{where}.localJWKS", out)
            if p.local_jwks is not None
            else None
        )
        if p.local_jwks is None:
            out.append(f"{where}: a localJWKS is needed")
        ex = p.extract_from or _JwtExtractFrom()
        providers.append(
            ir.JwtProvider(
                name=p.name,
                jwks=jwks or "",
                issuer=p.issuer,
                audiences=p.audiences,
                headers=tuple((h.name, h.value_prefix) for h in ex.headers),
                params=ex.params,
                cookies=ex.cookies,
                claim_to_headers=tuple((c.claim, c.header) for c in p.claim_to_headers),
            )
        )
    if not providers:
        out.append("spec.jwt.providers: at least one provider is needed")
    return ir.Jwt(providers=tuple(providers), optional=conf.optional)


def _local_jwks(
    ctx: Any, namespace: str, local: specvalue.InlineOrRef, where: str, out: list[str]
) -> str | None:
    """The JWKS document of a localJWKS (a ConfigMap's key ``jwks``, else its first), checked as
    Envoy will read it."""
    text = specvalue.inline_or_ref(ctx, namespace, local, where, out, "jwks", first=True)
    if text is None:
        return None
    try:
        doc = msgspec.json.decode(text, type=_JWKS)
    except msgspec.DecodeError as exc:
        out.append(f"{where}: not a JSON Web Key Set ({exc})")
        return None
    if not doc.keys or not all(isinstance(k.get("kty"), str) for k in doc.keys):
        out.append(f"{where}: a JSON Web Key Set needs keys, each with its kty")
        return None
    return text


# ---------------------------------------------------------------- extAuth


def _ext_auth(
    ctx: Any, namespace: str, raw: Any, out: list[str]
) -> tuple[ir.ExtAuth | None, tuple[ir.Cluster, ...]]:
    conf = _read(raw, _ExtAuth, "spec.extAuth", out)
    if conf is None:
        return None, ()
    grpc = conf.grpc is not None
    service = conf.grpc if conf.grpc is not None else conf.http
    where = f"spec.extAuth.{'grpc' if grpc else 'http'}"
    if service is None or (conf.grpc is not None and conf.http is not None):
        out.append("spec.extAuth: exactly one of http, grpc is needed")
        return None, ()
    refs = (
        (service.backend_ref,) if service.backend_ref is not None else ()
    ) + service.backend_refs
    if len(refs) != 1:
        out.append(f"{where}: gateweave supports exactly one backendRef")
        return None, ()
    ref = refs[0]
    ns = ref.namespace or namespace
    if not ctx.reference_allowed(
        m.ENVOY_GATEWAY_GROUP, "SecurityPolicy", namespace, ref.group, ref.kind, ns, ref.name
    ):
        out.append(
            f"{where}.backendRef: {ref.kind} {ns}/{ref.name} is in another namespace and no "
            "ReferenceGrant allows it"
        )
        return None, ()
    # Resolved as a route of that namespace would resolve it (the grant above being the policy's).
    resolver = BackendResolver(ctx, BackendTLSIndex(ctx))
    backend = resolver.resolve("HTTPRoute", ns, ref, family="GRPC" if grpc else "")
    if backend.cluster is None:
        problem = backend.problem.message if backend.problem is not None else "cannot be resolved"
        out.append(f"{where}.backendRef: {problem}")
        return None, ()
    ext = ir.ExtAuth(
        protocol="GRPC" if grpc else "HTTP",
        cluster=backend.cluster.name,
        path=service.path,
        allowed_headers=conf.headers_to_ext_auth,
        allowed_response_headers=service.headers_to_backend,
        only_listed_response_headers=True,
        fail_open=conf.fail_open,
    )
    return ext, (backend.cluster,)
