"""SecurityPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. Each feature has its
own module, with its paths (``FIELDS``) and a ``resolve`` that checks its values and reads what it
references (Secrets, ConfigMaps, the auth service): basicauth.py, authorization.py, cors.py,
apikeyauth.py, jwtauth.py, extauth.py (what they share: securityrefs.py). :func:`resolve` here
gives the policy's effect, applied to each route it governs by :func:`route_effect` (effects.py
calls it through :meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import (
    apikeyauth,
    authorization,
    basicauth,
    cors,
    extauth,
    jwtauth,
)

IMPLEMENTED: frozenset[str] = frozenset().union(
    *(feature.FIELDS for feature in (basicauth, authorization, cors, apikeyauth, jwtauth, extauth))
)


class Effect(msgspec.Struct, frozen=True):
    """What a SecurityPolicy does to each route it governs (None: that feature is not set)."""

    basic_auth: ir.BasicAuth | None = None
    authorization: ir.Authorization | None = None
    cors: ir.CORS | None = None
    api_key_auth: ir.ApiKeyAuth | None = None
    jwt: ir.Jwt | None = None
    ext_auth: ir.ExtAuth | None = None
    # upstreams the effect sends to (remote JWKS, the auth service)
    clusters: tuple[ir.Cluster, ...] = ()


_NO_EFFECT = Effect()


def problems(spec: dict[str, Any]) -> list[str]:
    """Checked by :func:`resolve`, which also reads the Secrets: nothing to add here."""
    return []


def resolve(ctx: Any, policy: Any) -> tuple[Effect, list[str]]:
    """The policy's effect on the routes it governs, and what in it cannot be applied (a bad
    value, a missing or unusable Secret), each with its place in the spec."""
    spec = policy.spec if isinstance(policy.spec, dict) else {}
    namespace = policy.metadata.namespace
    out: list[str] = []
    basic = basicauth.resolve(ctx, namespace, spec.get("basicAuth"), out)
    jwt, jwks_clusters = jwtauth.resolve(ctx, namespace, spec.get("jwt"), out)
    providers = frozenset(p.name for p in jwt.providers) if jwt is not None else frozenset()
    authz = authorization.resolve(spec.get("authorization"), providers, out)
    cors_ = cors.resolve(spec.get("cors"), out)
    api_key = apikeyauth.resolve(ctx, namespace, spec.get("apiKeyAuth"), out)
    ext, ext_clusters = extauth.resolve(ctx, namespace, spec.get("extAuth"), out)
    return Effect(
        basic_auth=basic,
        authorization=authz,
        cors=cors_,
        api_key_auth=api_key,
        jwt=jwt,
        ext_auth=ext,
        clusters=jwks_clusters + ext_clusters,
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
