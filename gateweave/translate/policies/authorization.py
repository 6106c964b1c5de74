"""SecurityPolicy ``authorization``: ``rules`` (``action`` Allow or Deny for a ``principal`` of
``clientCIDRs`` and ``headers``), the first matching rule deciding, else ``defaultAction`` (Deny
when unset, as Envoy Gateway); a denied request gets 403 (Envoy's rbac filter)."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import securityrefs

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
    }
)


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


class _Authorization(msgspec.Struct, frozen=True, rename="camel"):
    rules: tuple[_Rule, ...] = ()
    default_action: str = "Deny"


def resolve(raw: Any, out: list[str]) -> ir.Authorization | None:
    """The rules of ``raw`` (the spec's authorization); problems with their place in ``out``."""
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
