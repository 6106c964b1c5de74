"""GRPCRoute rules -> IR routes: gRPC method matches become path matches on ``/service/method``."""

from __future__ import annotations

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation, use_clusters
from gateweave.translate.backends import BackendResolver
from gateweave.translate.filters import (
    RuleError,
    backend_header_mods,
    rule_filters,
    weighted_backends,
)
from gateweave.translate.regex import re2_error, re2_escape
from gateweave.translate.rulememo import RuleMemo
from gateweave.translate.rules import Order, translate_rules
from gateweave.translate.sessions import session

_ANY_SEGMENT = "[^/]+"
_ANY_MATCH = (m.GRPCRouteMatch(),)


def translate_grpc_route(
    route: m.GRPCRoute, resolver: BackendResolver, order: Order
) -> RouteTranslation:
    """``order``: the route's :func:`~gateweave.translate.context.sort_key`."""
    return translate_rules("GRPCRoute", route, route.spec.rules, resolver, order, _rule)


def _rule(
    tr: RouteTranslation,
    resolver: BackendResolver,
    i: int,
    rule: m.GRPCRouteRule,
    prefix: str,
    order: Order,
    keys: list[PrecedenceKey],
    used: list[str],
) -> None:
    """Append the precedence keys of the rule's IR routes, one per match, to ``keys`` and the
    clusters they send to to ``used`` (rules.OneRule); raises RuleError (before appending
    anything) when the rule cannot be implemented."""
    memo = resolver.memo
    matches = rule.matches or _ANY_MATCH
    ir_matches = [_match(mt, memo) for mt in matches]
    filters = rule_filters(tr, resolver, rule.filters)
    sp = rule.session_persistence
    sticky = session(sp, prefix + (rule.name or f"#{i}")) if sp is not None else None
    per_backend = backend_header_mods(rule.backend_refs)
    backends = weighted_backends(tr, resolver, rule.backend_refs, per_backend)
    direct_status: int | None = None
    mirrored = filters.mirrors
    if filters.unresolved or not backends:
        backends, direct_status, mirrored = (), 500, ()
    name = f"{prefix}{i}/match/"
    use_clusters(used, backends, mirrored)
    out = keys
    for j, (mt, (svc_len, method_len)) in enumerate(ir_matches):
        r = ir.Route(
            name=f"{name}{j}",
            match=mt,
            backends=backends,
            direct_status=direct_status,
            request_headers=filters.request_headers,
            response_headers=filters.response_headers,
            mirrors=mirrored,
            session=sticky,
        )
        shape = memo.shape((0, -svc_len, -method_len, -len(mt.headers), 0, 0))
        key: PrecedenceKey = (shape, order, i, j, r)
        out.append(key)


def _match(mt: m.GRPCRouteMatch, memo: RuleMemo) -> tuple[ir.RouteMatch, tuple[int, int]]:
    """The IR match and (service length, method length) for precedence."""
    headers = memo.header_matches(mt.headers) if mt.headers else ()
    if isinstance(headers, str):
        raise RuleError(headers)
    meth = mt.method
    if meth is None or (not meth.service and not meth.method):
        return ir.RouteMatch(path_type="PathPrefix", path="/", headers=headers, grpc=True), (0, 0)
    svc, method = meth.service or "", meth.method or ""
    if meth.type == "Exact":
        if svc and method:
            path_type, path = "Exact", f"/{svc}/{method}"
        else:
            path_type = "RegularExpression"
            svc_re = re2_escape(svc) if svc else _ANY_SEGMENT
            method_re = re2_escape(method) if method else _ANY_SEGMENT
            path = f"/{svc_re}/{method_re}"
    elif meth.type == "RegularExpression":
        for part in (svc, method):
            if part and (err := re2_error(part)):
                raise RuleError(f"invalid method regular expression {part!r}: {err}")
        path_type, path = "RegularExpression", f"/{svc or _ANY_SEGMENT}/{method or _ANY_SEGMENT}"
    else:
        raise RuleError(f"method match type {meth.type} is not supported")
    if path_type == "RegularExpression" and (err := re2_error(path)):
        # Each part may be within Envoy's limits and the path regex made of them not.
        raise RuleError(f"method match (path regular expression {path!r}): {err}")
    match = ir.RouteMatch(path_type=path_type, path=path, headers=headers, grpc=True)
    return match, (len(svc), len(method))
