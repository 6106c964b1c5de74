"""SecurityPolicy ``extAuth``: an HTTP (``http.path`` put before the request's path, or
``http.pathOverride`` in its place; ``headersToBackend``) or gRPC auth service
by its ``backendRef`` (or one ``backendRefs`` entry; another namespace's with a ReferenceGrant to
the SecurityPolicy), ``headersToExtAuth`` and ``failOpen``, on Envoy's ext_authz filter as the
HTTPRoute ExternalAuth filter (xds/extauth.py): what it denies gets its answer.

``timeout``: how long a verdict is awaited (unset: 10 s); ``statusOnError``: the status a request
gets when the service cannot be reached or answers in error (unset: 403), unless ``failOpen``;
``bodyToExtAuth.maxRequestBytes``: the request's body (up to that many bytes; a longer one is
refused with 413) goes to the service with the headers; ``recomputeRoute``: the route is chosen
again once the service's headers are on the request; ``contextExtensions``: name-value pairs
(inline, or a key of a ConfigMap or Secret of the policy's namespace) the service gets with each
check (Envoy puts them in a gRPC service's CheckRequest only); ``backendSettings``: how the
service is reached (backendsettings.py: its cluster's settings, the retry of the checks)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import backendsettings, securityrefs, specvalue

_MOST_BODY_BYTES = 2**31 - 1  # the CRD's int32
_REF_FIELDS = ("group", "kind", "name", "namespace", "port", "weight")

FIELDS: frozenset[str] = frozenset(
    {
        "extAuth",
        "extAuth.failOpen",
        "extAuth.headersToExtAuth",
        "extAuth.timeout",
        "extAuth.recomputeRoute",
        "extAuth.contextExtensions",
        "extAuth.contextExtensions.name",
        "extAuth.contextExtensions.type",
        "extAuth.contextExtensions.value",
        "extAuth.contextExtensions.valueRef",
        "extAuth.contextExtensions.valueRef.group",
        "extAuth.contextExtensions.valueRef.kind",
        "extAuth.contextExtensions.valueRef.name",
        "extAuth.contextExtensions.valueRef.key",
        "extAuth.statusOnError",
        "extAuth.bodyToExtAuth",
        "extAuth.bodyToExtAuth.maxRequestBytes",
        "extAuth.http",
        "extAuth.http.path",
        "extAuth.http.pathOverride",
        "extAuth.http.headersToBackend",
        "extAuth.http.backendRef.*",
        "extAuth.http.backendRefs",
        *(f"extAuth.http.backendRefs.{f}" for f in _REF_FIELDS),
        "extAuth.grpc",
        "extAuth.grpc.backendRef.*",
        "extAuth.grpc.backendRefs",
        *(f"extAuth.grpc.backendRefs.{f}" for f in _REF_FIELDS),
    }
) | frozenset().union(
    *(
        backendsettings.fields(f"extAuth.{service}.backendSettings", request_timeout=False)
        for service in ("http", "grpc")
    )
)


class _AuthService(msgspec.Struct, frozen=True, rename="camel"):
    backend_ref: securityrefs.BackendRef | None = None
    backend_refs: tuple[securityrefs.BackendRef, ...] = ()
    path: str = ""
    path_override: str | None = None
    headers_to_backend: tuple[str, ...] = ()
    backend_settings: dict[str, Any] | None = None


class _Body(msgspec.Struct, frozen=True, rename="camel"):
    max_request_bytes: int


class _ValueRef(msgspec.Struct, frozen=True):
    name: str
    key: str
    kind: str = "ConfigMap"
    group: str = ""


class _ContextExtension(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    type: str = "Value"
    value: str | None = None
    value_ref: _ValueRef | None = None


class _ExtAuth(msgspec.Struct, frozen=True, rename="camel"):
    http: _AuthService | None = None
    grpc: _AuthService | None = None
    headers_to_ext_auth: tuple[str, ...] = ()
    fail_open: bool = False
    timeout: str | None = None
    recompute_route: bool = False
    context_extensions: tuple[_ContextExtension, ...] = ()
    status_on_error: int = 0
    body_to_ext_auth: _Body | None = None


def resolve(
    ctx: Any, namespace: str, raw: Any, out: list[str]
) -> tuple[ir.ExtAuth | None, tuple[ir.Cluster, ...]]:
    """The ext_authz of ``raw`` (the spec's extAuth) and the auth service's cluster; problems
    with their place in ``out``."""
    conf = securityrefs.read(raw, _ExtAuth, "spec.extAuth", out)
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
    timeout_s = specvalue.seconds(conf.timeout, "spec.extAuth.timeout", out)
    if timeout_s is not None and timeout_s <= 0:
        out.append(f"spec.extAuth.timeout {conf.timeout!r} is not above 0")
    if conf.status_on_error and not 400 <= conf.status_on_error <= 599:
        out.append(f"spec.extAuth.statusOnError {conf.status_on_error} is not a 4xx or 5xx status")
    body = conf.body_to_ext_auth
    if body is not None and not 0 < body.max_request_bytes <= _MOST_BODY_BYTES:
        out.append(
            f"spec.extAuth.bodyToExtAuth.maxRequestBytes {body.max_request_bytes} is not between 1 "
            f"and {_MOST_BODY_BYTES}"
        )
    _check_path_override(service, where, out)
    settings = backendsettings.read(service.backend_settings, f"{where}.backendSettings", out)
    cluster = securityrefs.backend_cluster(
        ctx, namespace, refs[0], f"{where}.backendRef", grpc, out
    )
    if cluster is None:
        return None, ()
    cluster = backendsettings.with_cluster_settings(cluster, settings)
    ext = ir.ExtAuth(
        protocol="GRPC" if grpc else "HTTP",
        cluster=cluster.name,
        path=service.path,
        path_override=service.path_override or "",
        allowed_headers=conf.headers_to_ext_auth,
        allowed_response_headers=service.headers_to_backend,
        only_listed_response_headers=True,
        fail_open=conf.fail_open,
        status_on_error=conf.status_on_error,
        timeout_s=timeout_s,
        recompute_route=conf.recompute_route,
        context=_context(ctx, namespace, conf.context_extensions, out),
        max_body_bytes=body.max_request_bytes if body is not None else 0,
        retry=settings.retry,
    )
    return ext, (cluster,)


def _check_path_override(service: _AuthService, where: str, out: list[str]) -> None:
    """``pathOverride``: a path, not with ``path``; problems go to ``out``."""
    value = service.path_override
    if value is None:
        return
    if service.path:
        out.append(f"{where}: only one of path, pathOverride can be set")
    if not value.startswith("/") or any(c.isspace() or c == "\0" for c in value):
        out.append(f"{where}.pathOverride: {value!r} is not a path (starting with /)")


def _context(
    ctx: Any, namespace: str, extensions: tuple[_ContextExtension, ...], out: list[str]
) -> tuple[tuple[str, str], ...]:
    """The context extensions' names and values (a ConfigMap's or Secret's key read)."""
    pairs = []
    for i, ext in enumerate(extensions):
        where = f"spec.extAuth.contextExtensions[{i}]"
        value = ext.value
        ref = ext.value_ref
        if ext.type == "ValueRef" and ref is not None and ref.kind == "Secret":
            value = securityrefs.secret_text(
                ctx,
                namespace,
                securityrefs.SecretRef(name=ref.name),
                f"{where}.valueRef",
                ref.key,
                out,
            )
        elif ext.type == "ValueRef" and ref is not None and ref.kind == "ConfigMap":
            local = specvalue.InlineOrRef(
                type="ValueRef", value_ref=specvalue.LocalRef(name=ref.name)
            )
            value = specvalue.inline_or_ref(ctx, namespace, local, where, out, ref.key, first=False)
        elif ext.type == "ValueRef":
            out.append(f"{where}.valueRef: a ConfigMap or Secret is needed")
        elif ext.type != "Value" or value is None:
            out.append(f"{where}: type Value needs its value")
        if value is not None:
            pairs.append((ext.name, value))
    return tuple(pairs)
