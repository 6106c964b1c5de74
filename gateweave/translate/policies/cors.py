"""SecurityPolicy ``cors``: the governed routes answer CORS as Envoy's cors filter does with these
``allowOrigins`` (``*`` labels as wildcards, as the HTTPRoute CORS filter), ``allowMethods``,
``allowHeaders``, ``exposeHeaders``, ``maxAge`` and ``allowCredentials``; it replaces a rule's own
CORS filter."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import filters
from gateweave.translate.filters import RuleError, parse_duration
from gateweave.translate.policies import securityrefs

FIELDS: frozenset[str] = frozenset(
    {
        "cors",
        "cors.allowOrigins",
        "cors.allowMethods",
        "cors.allowHeaders",
        "cors.exposeHeaders",
        "cors.maxAge",
        "cors.allowCredentials",
    }
)


class _CORS(msgspec.Struct, frozen=True, rename="camel"):
    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: str | None = None
    allow_credentials: bool = False


def resolve(raw: Any, out: list[str]) -> ir.CORS | None:
    """Read as the HTTPRoute CORS filter is (its origin wildcards), but ``maxAge`` is a duration
    and, unset, sends no Access-Control-Max-Age (as Envoy Gateway)."""
    conf = securityrefs.read(raw, _CORS, "spec.cors", out)
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
