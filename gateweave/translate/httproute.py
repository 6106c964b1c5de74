"""HTTPRoute rules -> IR routes (one per match), with filters, backends and precedence keys."""

from __future__ import annotations

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation
from gateweave.translate.backends import BackendResolver
from gateweave.translate.context import sort_key
from gateweave.translate.filters import (
    RuleError,
    backend_header_mods,
    header_mods,
    merge_mods,
    mirror,
    parse_duration,
    weighted_backends,
)
from gateweave.translate.regex import re2_error

_PATH_RANK = {"Exact": 0, "RegularExpression": 1, "PathPrefix": 2}


def translate_http_route(route: m.HTTPRoute, resolver: BackendResolver) -> RouteTranslation:
    tr = RouteTranslation(kind="HTTPRoute", route=route)
    tr.rule_count = len(route.spec.rules)
    for i, rule in enumerate(route.spec.rules):
        try:
            tr.http.extend(_rule(tr, resolver, route, i, rule))
        except RuleError as err:
            tr.drop_rule(f"rule {rule.name or i}", str(err), err.reason)
    return tr


def _rule(
    tr: RouteTranslation, resolver: BackendResolver, route: m.HTTPRoute, i: int, rule: m.HTTPRouteRule
) -> list[tuple[PrecedenceKey, ir.Route]]:
    matches = rule.matches or (m.HTTPRouteMatch(),)
    ir_matches = [_match(mt) for mt in matches]

    req_h: ir.HeaderMods | None = None
    resp_h: ir.HeaderMods | None = None
    redirect: ir.Redirect | None = None
    rewrite: ir.URLRewrite | None = None
    mirrors: list[ir.Mirror] = []
    cors: ir.CORS | None = None
    error_500 = False
    for f in rule.filters:
        if f.type == "RequestHeaderModifier":
            req_h = merge_mods(req_h, header_mods(f.request_header_modifier))
        elif f.type == "ResponseHeaderModifier":
            resp_h = merge_mods(resp_h, header_mods(f.response_header_modifier))
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

    timeout_s, backend_timeout_s = _timeouts(rule.timeouts)
    retry = _retry(rule.retry)

    # A backendRef's own filters may also redirect or rewrite the requests sent its way.
    per_backend = backend_header_mods(
        rule.backend_refs,
        redirect=lambda f: _redirect(f, ir_matches),
        rewrite=lambda f: _rewrite(f, ir_matches),
    )

    backends: tuple[ir.WeightedCluster, ...] = ()
    direct_status: int | None = None
    if redirect is None:
        backends = weighted_backends(tr, resolver, rule.backend_refs, per_backend)
        if error_500 or not backends:
            backends, direct_status = (), 500
    elif rule.backend_refs:
        # A redirect answers by itself; still report what its backendRefs resolve to.
        weighted_backends(tr, resolver, rule.backend_refs)
    if direct_status is not None or redirect is not None:
        mirrors = []

    ns, name = route.metadata.namespace, route.metadata.name
    out: list[tuple[PrecedenceKey, ir.Route]] = []
    for j, mt in enumerate(ir_matches):
        r = ir.Route(
            name=f"httproute/{ns}/{name}/rule/{i}/match/{j}",
            match=mt,
            backends=backends,
            redirect=redirect,
            direct_status=direct_status,
            request_headers=req_h,
            response_headers=resp_h,
            url_rewrite=rewrite if redirect is None else None,
            mirrors=tuple(mirrors),
            cors=cors,
            timeout_s=timeout_s,
            backend_timeout_s=backend_timeout_s,
            retry=retry,
        )
        out.append((http_precedence(mt, route, i, j), r))
    return out


def http_precedence(mt: ir.RouteMatch, route: object, i: int, j: int) -> PrecedenceKey:
    """Gateway API HTTPRoute precedence (ascending sorts first).

    Exact path, then RegularExpression (implementation-specific: after Exact, before
    prefixes, longer first), then the longest prefix; then a method match, more header
    matches, more query param matches; then the oldest route, namespace/name, rule and
    match order.
    """
    return (
        1,
        _PATH_RANK.get(mt.path_type, 3),
        -len(mt.path),
        0 if mt.method else 1,
        -len(mt.headers),
        -len(mt.query_params),
        *sort_key(route),
        i,
        j,
    )


def _match(mt: m.HTTPRouteMatch) -> ir.RouteMatch:
    path = mt.path or m.HTTPPathMatch()
    if path.type not in _PATH_RANK:
        raise RuleError(f"path match type {path.type} is not supported")
    if path.type == "RegularExpression":
        err = re2_error(path.value)
        if err:
            raise RuleError(f"invalid path regular expression {path.value!r}: {err}")
    elif not path.value.startswith("/"):
        raise RuleError(f"path {path.value!r} must start with '/'")
    headers: list[ir.StringMatch] = []
    seen: set[str] = set()
    for h in mt.headers:
        if h.name.lower() in seen:
            continue  # only the first entry of an equivalent header name counts
        seen.add(h.name.lower())
        headers.append(_string_match("header", h.type, h.name, h.value))
    params: list[ir.StringMatch] = []
    seen_q: set[str] = set()
    for q in mt.query_params:
        if q.name in seen_q:
            continue
        seen_q.add(q.name)
        params.append(_string_match("query param", q.type, q.name, q.value))
    return ir.RouteMatch(
        path_type=path.type, path=path.value, headers=tuple(headers), query_params=tuple(params), method=mt.method
    )


def _string_match(what: str, type_: str, name: str, value: str) -> ir.StringMatch:
    if type_ not in ("Exact", "RegularExpression"):
        raise RuleError(f"{what} match type {type_} is not supported")
    if type_ == "RegularExpression":
        err = re2_error(value)
        if err:
            raise RuleError(f"invalid {what} regular expression {value!r}: {err}")
    return ir.StringMatch(name=name, type=type_, value=value)


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
