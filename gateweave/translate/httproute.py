"""HTTPRoute rules -> IR routes (one per match), with filters, backends and precedence keys."""

from __future__ import annotations

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation, use_clusters
from gateweave.translate.backends import BackendResolver
from gateweave.translate.filters import (
    BackendFilters,
    RuleError,
    backend_header_mods,
    memo_header_mods,
    merge_mods,
    parse_duration,
    plain_backends,
    rule_filters,
    weighted_backends,
)
from gateweave.translate.regex import re2_error
from gateweave.translate.rulememo import RuleMemo
from gateweave.translate.rules import Order, translate_rules
from gateweave.translate.sessions import session

_PATH_RANK = {"Exact": 0, "RegularExpression": 1, "PathPrefix": 2}
_ANY_MATCH = (m.HTTPRouteMatch(),)
_ROOT = m.HTTPPathMatch()


def translate_http_route(
    route: m.HTTPRoute, resolver: BackendResolver, order: Order
) -> RouteTranslation:
    """``order``: the route's :func:`~gateweave.translate.context.sort_key`."""
    return translate_rules("HTTPRoute", route, route.spec.rules, resolver, order, _rule)


def _rule(
    tr: RouteTranslation,
    resolver: BackendResolver,
    i: int,
    rule: m.HTTPRouteRule,
    prefix: str,
    order: Order,
    keys: list[PrecedenceKey],
    used: list[str],
) -> None:
    """Append the precedence keys of the rule's IR routes, one per match, to ``keys`` and the
    clusters they send to to ``used`` (rules.OneRule); raises RuleError (before appending
    anything) when the rule cannot be implemented.

    A rule of the commonest shape (:func:`plain_rule`) here, with what it leaves out left out:
    each backendRef's use taken whole from the resolver (``http_ref``), the IR routes made with
    their header modifiers and backends only; any other by :func:`_general_rule`, the
    reference this must agree with."""
    if not plain_rule(rule):
        _general_rule(tr, resolver, i, rule, prefix, order, keys, used)
        return
    memo = resolver.memo
    ir_matches = _matches(rule, memo)
    table = memo.shapes
    req_h: ir.HeaderMods | None = None
    resp_h: ir.HeaderMods | None = None
    for f in rule.filters:
        # (memo_header_mods' hit inline)
        if f.type == "RequestHeaderModifier":
            hf = f.request_header_modifier
            mods = memo.header_mods.get(hf) if hf is not None else None
            if mods is None:
                mods = memo_header_mods(memo, hf)
            req_h = mods if req_h is None else merge_mods(req_h, mods)
        else:
            hf = f.response_header_modifier
            mods = memo.response_mods.get(hf) if hf is not None else None
            if mods is None:
                mods = memo_header_mods(memo, hf, True)
            resp_h = mods if resp_h is None else merge_mods(resp_h, mods)
    backends = plain_backends(tr, resolver, rule.backend_refs)
    direct_status = None if backends else 500
    for w in backends:
        used.append(w.cluster)
    name = f"{prefix}{i}/match/"
    append = keys.append
    for j, mt in enumerate(ir_matches):
        r = ir.Route(
            name=f"{name}{j}",
            match=mt,
            backends=backends,
            direct_status=direct_status,
            request_headers=req_h,
            response_headers=resp_h,
        )
        key: PrecedenceKey = (_shape(mt, table), order, i, j, r)
        append(key)


_HEADER_FILTERS = frozenset(("RequestHeaderModifier", "ResponseHeaderModifier"))


def plain_rule(rule: m.HTTPRouteRule) -> bool:
    """Whether the rule has the commonest shape, which :func:`_rule` translates itself: no
    filters but header modifiers, no backendRef filters, no timeouts, retry or
    sessionPersistence."""
    if rule.timeouts is not None or rule.retry is not None:
        return False
    if rule.session_persistence is not None:
        return False
    for f in rule.filters:
        if f.type not in _HEADER_FILTERS:
            return False
    plain = True
    for ref in rule.backend_refs:
        if ref.filters:
            plain = False  # (not all(): a generator costs more than this loop)
            break
    return plain


def _general_rule(
    tr: RouteTranslation,
    resolver: BackendResolver,
    i: int,
    rule: m.HTTPRouteRule,
    prefix: str,
    order: Order,
    keys: list[PrecedenceKey],
    used: list[str],
) -> None:
    """:func:`_rule` of any rule."""
    memo = resolver.memo
    ir_matches = _matches(rule, memo)
    table = memo.shapes
    filters = rule_filters(tr, resolver, rule.filters, ir_matches)
    redirect = filters.redirect

    timeout_s, backend_timeout_s = (
        _timeouts(rule.timeouts) if rule.timeouts is not None else (None, None)
    )
    retry = _retry(rule.retry) if rule.retry is not None else None
    sp = rule.session_persistence
    sticky = session(sp, prefix + (rule.name or f"#{i}")) if sp is not None else None

    # A backendRef's own filters may also redirect or rewrite the requests sent its way.
    refs = rule.backend_refs
    per_backend: list[BackendFilters] | None = None
    for ref in refs:
        if ref.filters:
            per_backend = backend_header_mods(refs, ir_matches)
            break

    backends: tuple[ir.WeightedCluster, ...] = ()
    direct_status: int | None = None
    if filters.unresolved:
        # A filter that cannot be resolved is not skipped: its requests get an error, a
        # redirect's included (an ExternalAuth never lets a request through unchecked).
        redirect = None
    if redirect is None:
        backends = weighted_backends(tr, resolver, refs, per_backend)
        if filters.unresolved or not backends:
            backends, direct_status = (), 500
    elif refs:
        # A redirect answers by itself; still report what its backendRefs resolve to.
        weighted_backends(tr, resolver, refs)
    mirrored = () if direct_status is not None or redirect is not None else filters.mirrors
    url_rewrite = filters.url_rewrite if redirect is None else None

    use_clusters(used, backends, mirrored, filters.ext_auth)
    name = f"{prefix}{i}/match/"
    append = keys.append
    for j, mt in enumerate(ir_matches):
        r = ir.Route(
            name=f"{name}{j}",
            match=mt,
            backends=backends,
            redirect=redirect,
            direct_status=direct_status,
            request_headers=filters.request_headers,
            response_headers=filters.response_headers,
            url_rewrite=url_rewrite,
            mirrors=mirrored,
            cors=filters.cors,
            timeout_s=timeout_s,
            backend_timeout_s=backend_timeout_s,
            retry=retry,
            session=sticky,
            ext_auth=filters.ext_auth,
        )
        key: PrecedenceKey = (_shape(mt, table), order, i, j, r)
        append(key)


def _matches(rule: m.HTTPRouteRule, memo: RuleMemo) -> list[ir.RouteMatch]:
    """The rule's IR matches; raises RuleError for a match that cannot be implemented."""
    ir_matches: list[ir.RouteMatch] = []
    for mt in rule.matches or _ANY_MATCH:
        path = mt.path or _ROOT
        ptype, value = path.type, path.value
        if ptype == "RegularExpression":
            err = re2_error(value)
            if err:
                raise RuleError(f"invalid path regular expression {value!r}: {err}")
        elif ptype not in _PATH_RANK:
            raise RuleError(f"path match type {ptype} is not supported")
        elif not value.startswith("/"):
            raise RuleError(f"path {value!r} must start with '/'")
        headers: tuple[ir.StringMatch, ...] = ()
        if mt.headers:
            got = memo.headers.get(mt.headers)  # (RuleMemo.header_matches' hit inline)
            if got is None:
                got = memo.header_matches(mt.headers)
            if isinstance(got, str):
                raise RuleError(got)
            headers = got
        params: tuple[ir.StringMatch, ...] = ()
        if mt.query_params:
            got = memo.query_param_matches(mt.query_params)
            if isinstance(got, str):
                raise RuleError(got)
            params = got
        ir_matches.append(
            ir.RouteMatch(
                path_type=ptype, path=value, headers=headers, query_params=params, method=mt.method
            )
        )
    return ir_matches


def _shape(mt: ir.RouteMatch, table: dict[tuple[int, ...], tuple[int, ...]]) -> tuple[int, ...]:
    """The shape of an IR match's precedence key (attachment.PrecedenceKey), its one shared
    instance in ``table`` (RuleMemo.shapes; RuleMemo.shape inline).

    Gateway API HTTPRoute precedence (ascending sorts first): Exact path, then
    RegularExpression (implementation-specific: after Exact, before prefixes, longer first),
    then the longest prefix; then a method match, more header matches, more query param
    matches; then (the rest of the key) the oldest route, namespace/name, rule and match order.
    The IR route goes last."""
    shape: tuple[int, ...] = (
        1,
        _PATH_RANK[mt.path_type],
        -len(mt.path),
        0 if mt.method else 1,
        -len(mt.headers),
        -len(mt.query_params),
    )
    return table.setdefault(shape, shape)


def _timeouts(t: m.HTTPRouteTimeouts | None) -> tuple[float | None, float | None]:
    if t is None:
        return None, None
    request = parse_duration(t.request) if t.request is not None else None
    backend = parse_duration(t.backend_request) if t.backend_request is not None else None
    if request and backend is not None and backend > request:
        raise RuleError("timeouts.backendRequest must not be greater than timeouts.request")
    return request, backend


def _retry(r: m.HTTPRouteRetry | None) -> ir.Retry | None:
    if r is None:
        return None
    for code in r.codes:
        if not 400 <= code <= 599:
            raise RuleError(f"retry code {code} is not a 4xx/5xx code")
    backoff = parse_duration(r.backoff) if r.backoff is not None else None
    return ir.Retry(codes=tuple(r.codes), attempts=r.attempts, backoff_s=backoff)
