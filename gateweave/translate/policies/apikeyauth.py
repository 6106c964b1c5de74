"""SecurityPolicy ``apiKeyAuth``: the keys of the ``credentialRefs`` Secrets (each key a client
ID, its value the API key; another namespace's with a ReferenceGrant), looked for in
``extractFrom``'s headers, query parameters and cookies in order; a request without a known key
gets 401. The client ID goes to the backend in ``forwardClientIDHeader``; ``sanitize`` takes the
key out (Envoy's api_key_auth filter)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.certs import secret_value
from gateweave.translate.policies import securityrefs

FIELDS: frozenset[str] = frozenset(
    {
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
    }
)


class _ExtractFrom(msgspec.Struct, frozen=True):
    headers: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    cookies: tuple[str, ...] = ()


class _ApiKeyAuth(msgspec.Struct, frozen=True, rename="camel"):
    credential_refs: tuple[securityrefs.SecretRef, ...] = ()
    extract_from: tuple[_ExtractFrom, ...] = ()
    forward_client_id_header: str = msgspec.field(default="", name="forwardClientIDHeader")
    sanitize: bool = False


def resolve(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.ApiKeyAuth | None:
    """The keys and key sources of ``raw`` (the spec's apiKeyAuth); problems in ``out``."""
    conf = securityrefs.read(raw, _ApiKeyAuth, "spec.apiKeyAuth", out)
    if conf is None:
        return None
    credentials: dict[str, str] = {}  # key -> client
    clients: set[str] = set()
    for i, ref in enumerate(conf.credential_refs):
        where = f"spec.apiKeyAuth.credentialRefs[{i}]"
        secret = securityrefs.secret(ctx, namespace, ref, where, out)
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
