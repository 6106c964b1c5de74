"""What the SecurityPolicy features share: reading a feature's object of a stored spec, and the
Secrets and backends they reference (read as Envoy Gateway allows: another namespace's only with
a ReferenceGrant to SecurityPolicies of the policy's namespace)."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.backends import BackendResolver
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.certs import secret_value

T = TypeVar("T")


def read(raw: Any, shape: type[T], where: str, out: list[str]) -> T | None:
    """A feature's object read into ``shape``; None when it is not set, or (with the problem in
    ``out``) when it cannot be read (a stored object the CRD did not check)."""
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, shape, strict=False)
    except msgspec.ValidationError as exc:
        out.append(f"{where}: {exc}")
        return None


class SecretRef(msgspec.Struct, frozen=True):
    name: str
    group: str = ""
    kind: str = "Secret"
    namespace: str | None = None


class BackendRef(msgspec.Struct, frozen=True):
    name: str
    group: str = ""
    kind: str = "Service"
    namespace: str | None = None
    port: int | None = None


def reference_allowed(ctx: Any, namespace: str, group: str, kind: str, ns: str, name: str) -> bool:
    """A SecurityPolicy of ``namespace`` may reference ``kind`` ``ns/name`` of ``group``."""
    return bool(
        ctx.reference_allowed(
            m.ENVOY_GATEWAY_GROUP, "SecurityPolicy", namespace, group, kind, ns, name
        )
    )


def secret(ctx: Any, namespace: str, ref: SecretRef, where: str, out: list[str]) -> m.Secret | None:
    """The Secret ``ref`` names; None, with the problem in ``out``, when it cannot be read."""
    if ref.group not in ("", "core") or ref.kind != "Secret":
        out.append(f"{where}: {ref.group or 'core'}/{ref.kind} is not a Secret")
        return None
    ns = ref.namespace or namespace
    if not reference_allowed(ctx, namespace, "", "Secret", ns, ref.name):
        out.append(
            f"{where}: Secret {ns}/{ref.name} is in another namespace and no ReferenceGrant allows "
            "it"
        )
        return None
    found: m.Secret | None = ctx.snapshot.secrets.get((ns, ref.name))
    if found is None:
        out.append(f"{where}: Secret {ns}/{ref.name} does not exist")
    return found


def secret_text(
    ctx: Any, namespace: str, ref: SecretRef, where: str, key: str, out: list[str]
) -> str | None:
    """The text under ``key`` of the Secret ``ref`` names (see :func:`secret`)."""
    found = secret(ctx, namespace, ref, where, out)
    if found is None:
        return None
    text = secret_value(found, key)
    if text is None:
        out.append(
            f"{where}: Secret {found.metadata.namespace}/{ref.name} has no key {key} (UTF-8 text)"
        )
    return text


def backend_cluster(
    ctx: Any, namespace: str, ref: BackendRef, where: str, grpc: bool, out: list[str]
) -> ir.Cluster | None:
    """The cluster of the Service or Backend ``ref`` names (at ``where``) for a policy of
    ``namespace``; None, with the problem in ``out``, when it cannot be resolved."""
    ns = ref.namespace or namespace
    if not reference_allowed(ctx, namespace, ref.group, ref.kind, ns, ref.name):
        out.append(
            f"{where}: {ref.kind} {ns}/{ref.name} is in another namespace and no "
            "ReferenceGrant allows it"
        )
        return None
    # Resolved as a route of that namespace would resolve it (the grant above being the policy's).
    resolver = BackendResolver(ctx, BackendTLSIndex(ctx))
    backend = resolver.resolve("HTTPRoute", ns, ref, family="GRPC" if grpc else "")
    if backend.cluster is None:
        problem = backend.problem.message if backend.problem is not None else "cannot be resolved"
        out.append(f"{where}: {problem}")
        return None
    cluster: ir.Cluster = backend.cluster
    return cluster
