"""HTTPRoute rules -> IR routes (one per match), with filters, backends and precedence keys."""

from __future__ import annotations

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation
from gateweave.translate.backends import BackendResolver
from gateweave.translate.filters import (
    BackendFilters,
    RuleError,
    backend_header_mods,
    memo_header_mods,
    merge_mods,
    mirror,
    parse_duration,
    weighted_backends,
)
from gateweave.translate.regex import re2_error
from gateweave.translate.rulememo import RuleMemo

_PATH_RANK = {"Exact": 0, "RegularExpression": 1, "PathPrefix": 2}
_ANY_MATCH = (m.HTTPRouteMatch(),)
_ROOT = m.HTTPPathMatch()
# -n for path lengths, as shared objects: CPython allocates every int below -5 anew, and
# every IR route's precedence key holds one.
_NEGATIVES = 1024
_NEGATIVE = tuple(-n for n in range(_NEGATIVES))


def translate_http_route(route: m.HTTPRoute, resolver: BackendResolver, order: tuple[int, str, str, str]) -> RouteTranslation:
    """``order``: the route's :func:`~gateweave.translate.context.sort_key`."""
    tr = RouteTranslation(kind="HTTPRoute", route=route)
    rules = route.spec.rules
    tr.rule_count = len(rules)
    # Per-route invariants of every rule's IR routes: the name prefix and the precedence tie-break.
    meta = route.metadata
    prefix = f"httproute/{meta.namespace}/{meta.name}/rule/"
    for i, rule in enumerate(rules):
        try:
            _rule(tr, resolver, i, rule, prefix, order)
        except RuleError as err:
            tr.drop_rule(f"rule {rule.name or i}", str(err), err.reason)
    return tr


def _rule(
    tr: RouteTranslation,
    resolver: BackendResolver,
    i: int,
    rule: m.HTTPRouteRule,
    prefix: str,
    order: tuple[int, str, str, str],
) -> None:
    """Append the rule's IR routes, one per match, with their precedence keys, to ``tr.http``;
    raises RuleError (before appending anything) when the rule cannot be implemented."""
    memo = resolver.memo
    matches = rule.matches or _ANY_MATCH
    ir_matches = [_match(mt, memo) for mt in matches]

    req_h: ir.HeaderMods | None = None
    resp_h: ir.HeaderMods | None = None
    redirect: ir.Redirect | None = None
    rewrite: ir.URLRewrite | None = None
    mirrors: list[ir.Mirror] = []
    cors: ir.CORS | None = None
    error_500 = False
    for f in rule.filters:
        if f.type == "RequestHeaderModifier":
            req_h = merge_mods(req_h, memo_header_mods(memo, f.request_header_modifier))
        elif f.type == "ResponseHeaderModifier":
            resp_h = merge_mods(resp_h, memo_header_mods(memo, f.response_header_modifier))
        elif f.type == "RequestRedirect" and f.request_redirect is not None:
            redirect = _redirect(f.request_redirect, ir_matches)
        elif f.type == "URLRewrite" and f.url_rewrite is not None:
            rewrite = _rewrite(f.url_rewrite, ir_matches)
        elif f.type == "RequestMirror" and f.request_mirror is not None:
            mir = mirror(tr, resolver, f.request_mirror)
            if mir is not None:
                mirrors.append(mir)
        elif f.type == "CORS" and f.cors is not None:
            cors = _cors(f.cors)
        elif f.type == "ExtensionRef":
            # No extension filter kinds are supported: the filter cannot be resolved, and must
            # not be skipped, so the requests it would have processed get an error answer.
            ext = f.extension_ref
            what = f"{ext.group}/{ext.kind} {ext.name}" if ext else "(missing extensionRef)"
            tr.note_refs(c.R_INVALID_KIND, f"ExtensionRef filter {what}: unsupported extension kind")
            error_500 = True
        else:
            raise RuleError(f"filter type {f.type} is not supported")
    if redirect is not None and rewrite is not None:
        raise RuleError("RequestRedirect and URLRewrite filters cannot be combined", c.R_INCOMPATIBLE_FILTERS)

    timeout_s, backend_timeout_s = _timeouts(rule.timeouts) if rule.timeouts is not None else (None, None)
    retry = _retry(rule.retry) if rule.retry is not None else None

    # A backendRef's own filters may also redirect or rewrite the requests sent its way.
    refs = rule.backend_refs
    per_backend: list[BackendFilters] | None = None
    for ref in refs:
        if ref.filters:
            per_backend = backend_header_mods(
                refs,
                redirect=lambda f: _redirect(f, ir_matches),
                rewrite=lambda f: _rewrite(f, ir_matches),
            )
            break

    backends: tuple[ir.WeightedCluster, ...] = ()
    direct_status: int | None = None
    if redirect is None:
        backends = weighted_backends(tr, resolver, refs, per_backend)
        if error_500 or not backends:
            backends, direct_status = (), 500
    elif refs:
        # A redirect answers by itself; still report what its backendRefs resolve to.
        weighted_backends(tr, resolver, refs)
    mirrored = () if direct_status is not None or redirect is not None else tuple(mirrors)
    url_rewrite = rewrite if redirect is None else None

    tr.use_clusters(backends, mirrored)
    name = f"{prefix}{i}/match/"
    o0, o1, o2, o3 = order
    append = tr.http.append
    for j, mt in enumerate(ir_matches):
        r = ir.Route(
            name=f"{name}{j}",
            match=mt,
            backends=backends,
            redirect=redirect,
            direct_status=direct_status,
            request_headers=req_h,
            response_headers=resp_h,
            url_rewrite=url_rewrite,
            mirrors=mirrored,
            cors=cors,
            timeout_s=timeout_s,
            backend_timeout_s=backend_timeout_s,
            retry=retry,
        )
        # Gateway API HTTPRoute precedence (ascending sorts first): Exact path, then
        # RegularExpression (implementation-specific: after Exact, before prefixes, longer
        # first), then the longest prefix; then a method match, more header matches, more query
        # param matches; then the oldest route, namespace/name, rule and match order. The IR
        # route goes last (see attachment.PrecedenceKey).
        n = len(mt.path)
        key: PrecedenceKey = (
            1,
            _PATH_RANK[mt.path_type],
            _NEGATIVE[n] if n < _NEGATIVES else -n,
            0 if mt.method else 1,
            -len(mt.headers),
            -len(mt.query_params),
            o0,
            o1,
            o2,
            o3,
            i,
            j,
            r,
        )
        append(key)


def _match(mt: m.HTTPRouteMatch, memo: RuleMemo) -> ir.RouteMatch:
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
    return ir.RouteMatch(path_type=ptype, path=value, headers=headers, query_params=params, method=mt.method)


def _path_modifier(pm: m.HTTPPathModifier | None, matches: list[ir.RouteMatch]) -> tuple[str | None, str | None]:
    if pm is None:
        return None, None
    if pm.type == "ReplaceFullPath":
        return pm.type, pm.replace_full_path or "/"
    if pm.type == "ReplacePrefixMatch":
        if any(mt.path_type != "PathPrefix" for mt in matches):
            raise RuleError("ReplacePrefixMatch needs PathPrefix matches")
        return pm.type, pm.replace_prefix_match or "/"
    raise RuleError(f"path modifier type {pm.type} is not supported")


def _redirect(f: m.HTTPRequestRedirectFilter, matches: list[ir.RouteMatch]) -> ir.Redirect:
    if f.status_code not in (301, 302, 303, 307, 308):
        raise RuleError(f"redirect status code {f.status_code} is not supported")
    if f.scheme is not None and f.scheme not in ("http", "https"):
        raise RuleError(f"redirect scheme {f.scheme} is not supported")
    path_type, path = _path_modifier(f.path, matches)
    return ir.Redirect(
        scheme=f.scheme, hostname=f.hostname, port=f.port, path_type=path_type, path=path, status_code=f.status_code
    )


def _rewrite(f: m.HTTPURLRewriteFilter, matches: list[ir.RouteMatch]) -> ir.URLRewrite:
    path_type, path = _path_modifier(f.path, matches)
    return ir.URLRewrite(hostname=f.hostname, path_type=path_type, path=path)


def _cors(f: m.HTTPCORSFilter) -> ir.CORS:
    return ir.CORS(
        allow_origins=tuple(f.allow_origins),
        allow_methods=tuple(f.allow_methods),
        allow_headers=tuple(f.allow_headers),
        expose_headers=tuple(f.expose_headers),
        allow_credentials=bool(f.allow_credentials),
        max_age_s=f.max_age,
    )


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
