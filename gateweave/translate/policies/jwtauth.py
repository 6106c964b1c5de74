"""SecurityPolicy ``jwt``: ``providers`` with a ``localJWKS`` (``Inline``, or ``ValueRef`` to a
ConfigMap of the policy's namespace, its key ``jwks`` or else its first), ``issuer``,
``audiences``, ``extractFrom`` (headers with their value prefix, params, cookies) and
``claimToHeaders``; ``optional``. A request without a valid token of one of them gets 401
(Envoy's jwt_authn filter)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import securityrefs, specvalue

FIELDS: frozenset[str] = frozenset(
    {
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
    }
)


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


def resolve(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.Jwt | None:
    """The providers of ``raw`` (the spec's jwt); problems with their place in ``out``."""
    conf = securityrefs.read(raw, _Jwt, "spec.jwt", out)
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
