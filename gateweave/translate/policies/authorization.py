"""SecurityPolicy ``authorization``: ``rules`` (``action`` Allow or Deny for a ``principal`` of
``clientCIDRs``, ``headers`` and ``jwt`` claims and scopes, and an ``operation``'s ``methods`` and
``path``),
the first matching rule deciding, else ``defaultAction`` (Deny when unset, as Envoy Gateway); a
denied request gets 403 (Envoy's rbac filter).

A ``principal.jwt`` names a provider of the policy's own ``jwt``: its verified token must have
every ``claims`` entry (one of its values; a dotted name is a nested claim; ``StringArray``: a
list holding one of them) and every one of ``scopes`` (in its ``scope`` claim, space-delimited,
or ``scp``), as Envoy Gateway reads the payload jwt_authn leaves in the request's metadata.

An ``operation.path`` matches the request's path as Envoy Gateway does: ``PathPrefix`` by whole
segments (``/admin`` takes ``/admin`` and ``/admin/x``, not ``/administrator``), ``Exact`` the
path alone, ``RegularExpression`` (RE2) the whole path with its query; ``invert``: the paths it
does not match."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import securityrefs
from gateweave.translate.regex import re2_error, re2_escape

FIELDS: frozenset[str] = frozenset(
    {
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
        "authorization.rules.principal.jwt",
        "authorization.rules.principal.jwt.provider",
        "authorization.rules.principal.jwt.claims",
        "authorization.rules.principal.jwt.claims.name",
        "authorization.rules.principal.jwt.claims.valueType",
        "authorization.rules.principal.jwt.claims.values",
        "authorization.rules.principal.jwt.scopes",
        "authorization.rules.operation",
        "authorization.rules.operation.methods",
        "authorization.rules.operation.path",
        "authorization.rules.operation.path.type",
        "authorization.rules.operation.path.value",
        "authorization.rules.operation.path.invert",
    }
)

_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
_CLAIM_TYPES = {"String": False, "StringArray": True}


class _Header(msgspec.Struct, frozen=True):
    name: str
    values: tuple[str, ...] = ()


class _Claim(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    values: tuple[str, ...] = ()
    value_type: str = "String"


class _JwtPrincipal(msgspec.Struct, frozen=True):
    provider: str
    claims: tuple[_Claim, ...] = ()
    scopes: tuple[str, ...] = ()


class _Principal(msgspec.Struct, frozen=True, rename="camel"):
    client_cid_rs: tuple[str, ...] = msgspec.field(default=(), name="clientCIDRs")
    headers: tuple[_Header, ...] = ()
    jwt: _JwtPrincipal | None = None


class _Path(msgspec.Struct, frozen=True):
    value: str = "/"
    type: str = "PathPrefix"
    invert: bool = False


class _Operation(msgspec.Struct, frozen=True):
    methods: tuple[str, ...] = ()
    path: _Path | None = None


class _Rule(msgspec.Struct, frozen=True):
    action: str
    principal: _Principal = _Principal()
    operation: _Operation = _Operation()
    name: str = ""


class _Authorization(msgspec.Struct, frozen=True, rename="camel"):
    rules: tuple[_Rule, ...] = ()
    default_action: str = "Deny"


def resolve(raw: Any, jwt_providers: frozenset[str], out: list[str]) -> ir.Authorization | None:
    """The rules of ``raw`` (the spec's authorization), whose JWT principals may name
    ``jwt_providers`` (the policy's); problems with their place in ``out``."""
    conf = securityrefs.read(raw, _Authorization, "spec.authorization", out)
    if conf is None:
        return None
    if conf.default_action not in ("Allow", "Deny"):
        out.append(f"spec.authorization.defaultAction {conf.default_action} is not Allow or Deny")
    rules = []
    for i, rule in enumerate(conf.rules):
        where = f"spec.authorization.rules[{i}]"
        if rule.action not in ("Allow", "Deny"):
            out.append(f"{where}.action {rule.action} is not Allow or Deny")
        principal = rule.principal
        cidrs = []
        for j, cidr in enumerate(principal.client_cid_rs):
            try:
                cidrs.append(str(ipaddress.ip_network(cidr, strict=False)))
            except ValueError:
                out.append(f"{where}.principal.clientCIDRs[{j}] {cidr} is not a CIDR")
        headers = tuple((h.name, h.values) for h in principal.headers)
        for j, (name, values) in enumerate(headers):
            if not name or not values:
                out.append(
                    f"{where}.principal.headers[{j}]: a name and at least one value are needed"
                )
        if not principal.client_cid_rs and not headers and principal.jwt is None:
            out.append(f"{where}.principal: at least one of clientCIDRs, headers, jwt is needed")
        for j, method in enumerate(rule.operation.methods):
            if method not in _METHODS:
                out.append(f"{where}.operation.methods[{j}] {method} is not an HTTP method")
        path = rule.operation.path
        made = ir.AuthzRule(
            allow=rule.action == "Allow",
            cidrs=tuple(cidrs),
            headers=headers,
            methods=rule.operation.methods,
            path_regex=_path_regex(path, f"{where}.operation.path", out) if path else "",
            path_invert=path.invert if path else False,
        )
        if principal.jwt is not None:
            made = _jwt_principal(made, principal.jwt, jwt_providers, f"{where}.principal.jwt", out)
        rules.append(made)
    return ir.Authorization(rules=tuple(rules), default_allow=conf.default_action == "Allow")


def _path_regex(path: _Path, where: str, out: list[str]) -> str:
    """The RE2 the whole :path (with its query) of a request ``path`` matches must match."""
    if path.type == "RegularExpression":
        problem = re2_error(path.value)
        if problem is not None:
            out.append(f"{where}.value {path.value!r} is not an RE2 regular expression: {problem}")
        return path.value
    if path.type not in ("PathPrefix", "Exact"):
        out.append(f"{where}.type {path.type} is not Exact, PathPrefix or RegularExpression")
        return ""
    if not path.value.startswith("/") or "?" in path.value:
        out.append(f"{where}.value {path.value!r} is not a path")
        return ""
    if path.type == "Exact":
        return re2_escape(path.value) + r"(\?.*)?"
    base = path.value.rstrip("/")
    return re2_escape(base) + r"([/?].*)?" if base else "/.*"


def _jwt_principal(
    rule: ir.AuthzRule,
    jwt: _JwtPrincipal,
    providers: frozenset[str],
    where: str,
    out: list[str],
) -> ir.AuthzRule:
    if jwt.provider not in providers:
        out.append(f"{where}.provider {jwt.provider} is not a provider of the policy's jwt")
    if not jwt.claims and not jwt.scopes:
        out.append(f"{where}: at least one of claims, scopes is needed")
    claims = []
    for k, claim in enumerate(jwt.claims):
        at = f"{where}.claims[{k}]"
        path = tuple(claim.name.split("."))
        if not all(path):
            out.append(f"{at}.name {claim.name!r} is not a claim name")
        if claim.value_type not in _CLAIM_TYPES:
            out.append(f"{at}.valueType {claim.value_type} is not String or StringArray")
        if not claim.values:
            out.append(f"{at}.values: at least one value is needed")
        claims.append(
            ir.JwtClaim(
                path=path, values=claim.values, array=_CLAIM_TYPES.get(claim.value_type, False)
            )
        )
    for k, scope in enumerate(jwt.scopes):
        if not scope or " " in scope:
            out.append(f"{where}.scopes[{k}] {scope!r} is not a scope")
    return msgspec.structs.replace(
        rule, jwt_provider=jwt.provider, claims=tuple(claims), scopes=jwt.scopes
    )
