"""SecurityPolicy ``jwt``: ``providers`` with a ``localJWKS`` (``Inline``, or ``ValueRef`` to a
ConfigMap of the policy's namespace, its key ``jwks`` or else its first) or a ``remoteJWKS``,
``issuer``, ``audiences``, ``extractFrom`` (headers with their value prefix, params, cookies) and
``claimToHeaders`` (with ``recomputeRoute``, the route is chosen again once they are set);
``optional`` (a request without a token passes) and ``failOpen`` (a request
with a missing or invalid token passes; a valid one is still verified, its claims forwarded). A
request without a valid token of one of them gets 401 (Envoy's jwt_authn filter).

A ``remoteJWKS`` is fetched by Envoy from its ``uri`` (kept ``cacheDuration``, Envoy Gateway's
300 s when unset; after a failed fetch, again in ``failedRefetchDuration``): through the one
Service or Backend of its ``backendRefs`` (with that backend's TLS, a BackendTLSPolicy's or the
Backend's own), or else through a cluster of its own to the URI's host and port (resolved by DNS
unless an IP address), over TLS checked against the system's trust store for an ``https`` URI,
as Envoy Gateway does. Its ``backendSettings`` (backendsettings.py): the settings of that cluster,
the fetch's retry and timeout.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import msgspec

from gateweave import ir
from gateweave.translate.egbackend import is_hostname, is_ip
from gateweave.translate.policies import backendsettings, securityrefs, specvalue

FIELDS: frozenset[str] = frozenset(
    {
        "jwt",
        "jwt.optional",
        "jwt.failOpen",
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
        "jwt.providers.recomputeRoute",
        "jwt.providers.remoteJWKS",
        "jwt.providers.remoteJWKS.uri",
        "jwt.providers.remoteJWKS.cacheDuration",
        "jwt.providers.remoteJWKS.failedRefetchDuration",
        "jwt.providers.remoteJWKS.backendRefs",
        "jwt.providers.remoteJWKS.backendRefs.group",
        "jwt.providers.remoteJWKS.backendRefs.kind",
        "jwt.providers.remoteJWKS.backendRefs.name",
        "jwt.providers.remoteJWKS.backendRefs.namespace",
        "jwt.providers.remoteJWKS.backendRefs.port",
        "jwt.providers.remoteJWKS.backendRefs.weight",
    }
) | backendsettings.fields("jwt.providers.remoteJWKS.backendSettings", request_timeout=True)

CACHE_DURATION = "300s"  # Envoy Gateway's, when cacheDuration is unset
_DEFAULT_PORTS = {"http": 80, "https": 443}


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


class _RemoteJWKS(msgspec.Struct, frozen=True, rename="camel"):
    uri: str
    backend_refs: tuple[securityrefs.BackendRef, ...] = ()
    cache_duration: str = CACHE_DURATION
    failed_refetch_duration: str | None = None
    backend_settings: dict[str, Any] | None = None


class _JwtProvider(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    issuer: str = ""
    audiences: tuple[str, ...] = ()
    local_jwks: specvalue.InlineOrRef | None = msgspec.field(default=None, name="localJWKS")
    remote_jwks: _RemoteJWKS | None = msgspec.field(default=None, name="remoteJWKS")
    extract_from: _JwtExtractFrom | None = None
    claim_to_headers: tuple[_ClaimToHeader, ...] = ()
    recompute_route: bool = False


class _Jwt(msgspec.Struct, frozen=True, rename="camel"):
    providers: tuple[_JwtProvider, ...] = ()
    optional: bool = False
    fail_open: bool = False


class _JWKS(msgspec.Struct, frozen=True):
    keys: tuple[dict[str, Any], ...]


def resolve(
    ctx: Any, namespace: str, raw: Any, out: list[str]
) -> tuple[ir.Jwt | None, tuple[ir.Cluster, ...]]:
    """The providers of ``raw`` (the spec's jwt) and the clusters their remote JWKS are fetched
    through; problems with their place in ``out``."""
    conf = securityrefs.read(raw, _Jwt, "spec.jwt", out)
    if conf is None:
        return None, ()
    providers = []
    clusters: dict[str, ir.Cluster] = {}
    names: set[str] = set()
    for i, p in enumerate(conf.providers):
        where = f"spec.jwt.providers[{i}]"
        if p.name in names:
            out.append(f"{where}.name {p.name} is not unique")
        names.add(p.name)
        ex = p.extract_from or _JwtExtractFrom()
        provider = ir.JwtProvider(
            name=p.name,
            jwks="",
            issuer=p.issuer,
            audiences=p.audiences,
            headers=tuple((h.name, h.value_prefix) for h in ex.headers),
            params=ex.params,
            cookies=ex.cookies,
            claim_to_headers=tuple((c.claim, c.header) for c in p.claim_to_headers),
            recompute_route=p.recompute_route,
        )
        if (p.local_jwks is None) == (p.remote_jwks is None):
            out.append(f"{where}: exactly one of localJWKS, remoteJWKS is needed")
        elif p.local_jwks is not None:
            jwks = _local_jwks(ctx, namespace, p.local_jwks, f"{where}.localJWKS", out)
            provider = msgspec.structs.replace(provider, jwks=jwks or "")
        elif p.remote_jwks is not None:
            remote = _remote_jwks(ctx, namespace, p.remote_jwks, f"{where}.remoteJWKS", out)
            if remote is not None:
                cluster, cache_s, refetch_s, settings = remote
                clusters[cluster.name] = cluster
                provider = msgspec.structs.replace(
                    provider,
                    jwks_uri=p.remote_jwks.uri,
                    jwks_cluster=cluster.name,
                    jwks_cache_s=cache_s,
                    jwks_refetch_s=refetch_s,
                    jwks_retry=settings.retry,
                    jwks_timeout_s=settings.request_timeout_s,
                )
        providers.append(provider)
    if not providers:
        out.append("spec.jwt.providers: at least one provider is needed")
    jwt = ir.Jwt(providers=tuple(providers), optional=conf.optional, fail_open=conf.fail_open)
    return jwt, tuple(clusters.values())


def _remote_jwks(
    ctx: Any, namespace: str, remote: _RemoteJWKS, where: str, out: list[str]
) -> tuple[ir.Cluster, float, float | None, backendsettings.Settings] | None:
    """The cluster a remote JWKS is fetched through (with its ``backendSettings``' cluster
    settings), its cache duration and refetch interval (seconds) and the settings; None, with the
    problems in ``out``, when it cannot be fetched as written."""
    before = len(out)
    settings = backendsettings.read(remote.backend_settings, f"{where}.backendSettings", out)
    cache_s = specvalue.seconds(remote.cache_duration, f"{where}.cacheDuration", out)
    refetch_s = specvalue.seconds(
        remote.failed_refetch_duration, f"{where}.failedRefetchDuration", out
    )
    if cache_s is not None and cache_s <= 0:
        out.append(f"{where}.cacheDuration {remote.cache_duration!r} is not above 0")
    if refetch_s is not None and refetch_s <= 0:
        out.append(
            f"{where}.failedRefetchDuration {remote.failed_refetch_duration!r} is not above 0"
        )
    target = uri_target(remote.uri)
    if isinstance(target, str):
        out.append(f"{where}.uri {remote.uri!r}: {target}")
        return None
    cluster: ir.Cluster | None
    if len(remote.backend_refs) > 1:
        out.append(f"{where}.backendRefs: gateweave supports at most one backendRef")
        cluster = None
    elif remote.backend_refs:
        cluster = securityrefs.backend_cluster(
            ctx, namespace, remote.backend_refs[0], f"{where}.backendRefs[0]", False, out
        )
    else:
        cluster = uri_cluster(*target)
    if cluster is None or cache_s is None or len(out) > before:
        return None
    return backendsettings.with_cluster_settings(cluster, settings), cache_s, refetch_s, settings


def uri_target(uri: str) -> tuple[str, str, int] | str:
    """The scheme, host and port a JWKS URI is fetched from, or what is wrong with it."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        return str(exc)
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in _DEFAULT_PORTS:
        return "not an http or https URI"
    if parts.username is not None or parts.password is not None:
        return "a URI with user information is not supported"
    if not host:
        return "no host"
    if not is_ip(host) and not is_hostname(host):
        return f"{host} is neither an IP address nor a host name"
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def uri_cluster(scheme: str, host: str, port: int) -> ir.Cluster:
    """The cluster of its own a JWKS URI without backendRefs is fetched through: its host (an IP
    address, or a name resolved by DNS) and port, over TLS checked against the system's trust
    store for https (the host as SNI). One per scheme, host and port: providers share it."""
    endpoint = ir.Endpoint(
        address=host, port=port, type=ir.ENDPOINT_IP if is_ip(host) else ir.ENDPOINT_FQDN
    )
    shown = f"[{host}]" if ":" in host else host
    return ir.Cluster(
        name=f"jwks:{scheme}://{shown}:{port}",  # ':' is in no Service or Backend cluster's name
        endpoints=(endpoint,),
        tls=ir.UpstreamTLS(sni=host) if scheme == "https" else None,
    )


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
