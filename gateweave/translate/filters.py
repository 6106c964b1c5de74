"""Pieces shared by HTTPRoute and GRPCRoute rules: durations, filters, header modifiers, mirrors,
backends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.attachment import RouteTranslation
from gateweave.translate.backends import INVALID_CLUSTER, BackendRefLike, BackendResolver
from gateweave.translate.regex import origin_regex, re2_error
from gateweave.translate.rulememo import RuleMemo

_DURATION = re.compile(r"(?:[0-9]{1,5}(?:h|m|s|ms)){1,4}")
_DURATION_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
# Envoy refuses a path rewrite or redirect path with these (its HTTP_HEADER_VALUE rule,
# ``^[^\0\n\r]*$``), and a header name or value holding one; the CRD allows any character
# in a path modifier and in a header name to remove.
_NUL_CR_LF = frozenset("\0\r\n")


class RuleError(Exception):
    """A rule that cannot be implemented; it is dropped and the route is PartiallyInvalid.

    ``incompatible_filters``: dropped for combining filters that cannot be combined (the
    route's Accepted=False reason, should every rule be dropped; see RouteTranslation)."""

    def __init__(self, message: str, incompatible_filters: bool = False) -> None:
        super().__init__(message)
        self.incompatible_filters = incompatible_filters


def parse_duration(value: str) -> float:
    """A Gateway API duration (e.g. ``1h30m``, ``500ms``) in seconds."""
    if not _DURATION.fullmatch(value):
        raise RuleError(f"invalid duration {value!r}")
    total = sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(value))
    return round(total, 3)


def header_mods(f: m.HTTPHeaderFilter | None) -> ir.HeaderMods | None:
    return None if f is None else _header_mods(f)


def _header_mods(f: m.HTTPHeaderFilter) -> ir.HeaderMods:
    # Envoy refuses an empty header name and NUL, CR or LF in a header name or value (its
    # HTTP_HEADER_NAME and HTTP_HEADER_VALUE rules); the CRD's patterns cover set and add,
    # nothing covers remove.
    for name in f.remove:
        if not name or not _NUL_CR_LF.isdisjoint(name):
            raise RuleError(
                f"header {name!r} to remove: Envoy refuses an empty header name and NUL, CR and LF "
                "in one"
            )
    for h in (*f.set, *f.add):
        if not h.name or not _NUL_CR_LF.isdisjoint(h.name + h.value):
            raise RuleError(
                f"header {h.name!r}: Envoy refuses an empty header name and NUL, CR and LF in a "
                "header"
            )
    return ir.HeaderMods(
        set=tuple([(h.name, h.value) for h in f.set]),
        add=tuple([(h.name, h.value) for h in f.add]),
        remove=tuple(f.remove),
    )


def memo_header_mods(
    memo: RuleMemo, f: m.HTTPHeaderFilter | None, response: bool = False
) -> ir.HeaderMods | None:
    """:func:`header_mods` (``response``: a response's, checked by :func:`response_mods`), built
    and checked once per translation for each distinct filter."""
    if f is None:
        return None
    table = memo.response_mods if response else memo.header_mods
    hit = table.get(f)
    if hit is None:
        hit = _header_mods(f)
        if response:
            response_mods(hit)  # raises RuleError for what Envoy refuses in a response
        table[f] = hit
    return hit


def response_mods(mods: ir.HeaderMods | None) -> ir.HeaderMods | None:
    """A response header modifier Envoy can apply: it refuses any that sets, adds or removes
    ``host`` (":-prefixed or host headers may not be modified"), which the CRD allows."""
    if mods is not None:
        for name in (*(n for n, _ in mods.set), *(n for n, _ in mods.add), *mods.remove):
            if name.lower() == "host":
                raise RuleError(
                    f"response header {name!r}: Envoy does not modify or remove a response's host "
                    "header"
                )
    return mods


def merge_mods(a: ir.HeaderMods | None, b: ir.HeaderMods | None) -> ir.HeaderMods | None:
    if a is None:
        return b
    if b is None:
        return a
    return ir.HeaderMods(set=a.set + b.set, add=a.add + b.add, remove=a.remove + b.remove)


class RuleFilters:
    """What a rule's filters do to the requests it matches (a value: never changed once made;
    a plain class, as the compiled translation makes one per rule cheaply)."""

    def __init__(
        self,
        request_headers: ir.HeaderMods | None = None,
        response_headers: ir.HeaderMods | None = None,
        redirect: ir.Redirect | None = None,
        url_rewrite: ir.URLRewrite | None = None,
        mirrors: tuple[ir.Mirror, ...] = (),
        cors: ir.CORS | None = None,
        unresolved: bool = False,
        ext_auth: ir.ExtAuth | None = None,
    ) -> None:
        self.request_headers = request_headers
        self.response_headers = response_headers
        self.redirect = redirect
        self.url_rewrite = url_rewrite
        self.mirrors = mirrors
        self.cors = cors
        self.ext_auth = ext_auth
        # An ExtensionRef filter (or an ExternalAuth whose service cannot be resolved): no extension
        # kind is supported, so the filter cannot be
        # resolved, and must not be skipped: the requests it would have processed get an error.
        self.unresolved = unresolved


_NO_RULE_FILTERS = RuleFilters()


def rule_filters(
    tr: RouteTranslation,
    resolver: BackendResolver,
    filters: Sequence[m.HTTPRouteFilter | m.GRPCRouteFilter],
    matches: list[ir.RouteMatch] | None = None,
) -> RuleFilters:
    """A rule's filters, in order, for HTTPRoute and GRPCRoute alike.

    Header modifiers, mirrors and ExtensionRefs are understood for both; RequestRedirect,
    URLRewrite, CORS and ExternalAuth only for HTTPRoute (``matches``: the rule's IR matches,
    which a path modifier needs). Raises RuleError for any other filter type, for a redirect
    combined with a rewrite, and for a second ExternalAuth.
    """
    if not filters:
        return _NO_RULE_FILTERS
    memo = resolver.memo
    req_h: ir.HeaderMods | None = None
    resp_h: ir.HeaderMods | None = None
    red: ir.Redirect | None = None
    rew: ir.URLRewrite | None = None
    mirrors: list[ir.Mirror] = []
    cors_policy: ir.CORS | None = None
    auth: ir.ExtAuth | None = None
    unresolved = False
    for f in filters:
        kind = f.type
        if kind == "RequestHeaderModifier":
            req_h = merge_mods(req_h, memo_header_mods(memo, f.request_header_modifier))
        elif kind == "ResponseHeaderModifier":
            resp_h = merge_mods(resp_h, memo_header_mods(memo, f.response_header_modifier, True))
        elif kind == "RequestMirror" and f.request_mirror is not None:
            mir = mirror(tr, resolver, f.request_mirror)
            if mir is not None:
                mirrors.append(mir)
        elif (
            kind == "RequestRedirect"
            and matches is not None
            and isinstance(f, m.HTTPRouteFilter)
            and f.request_redirect is not None
        ):
            red = redirect(f.request_redirect, matches)
        elif (
            kind == "URLRewrite"
            and matches is not None
            and isinstance(f, m.HTTPRouteFilter)
            and f.url_rewrite is not None
        ):
            rew = url_rewrite(f.url_rewrite, matches)
        elif (
            kind == "CORS"
            and matches is not None
            and isinstance(f, m.HTTPRouteFilter)
            and f.cors is not None
        ):
            cors_policy = cors(f.cors)
        elif (
            kind == "ExternalAuth"
            and isinstance(f, m.HTTPRouteFilter)
            and f.external_auth is not None
        ):
            if auth is not None:
                raise RuleError("more than one ExternalAuth filter is not supported")
            auth = external_auth(tr, resolver, f.external_auth)
            if auth is None:
                unresolved = True
        elif kind == "ExtensionRef":
            ext = f.extension_ref
            what = f"{ext.group}/{ext.kind} {ext.name}" if ext else "(missing extensionRef)"
            tr.note_refs(
                c.route_invalid_kind(f"ExtensionRef filter {what}: unsupported extension kind")
            )
            unresolved = True
        else:
            raise RuleError(f"filter type {kind} is not supported")
    if red is not None and rew is not None:
        raise RuleError(
            "RequestRedirect and URLRewrite filters cannot be combined", incompatible_filters=True
        )
    return RuleFilters(req_h, resp_h, red, rew, tuple(mirrors), cors_policy, unresolved, auth)


def _path_modifier(
    pm: m.HTTPPathModifier | None, matches: list[ir.RouteMatch]
) -> tuple[str | None, str | None]:
    if pm is None:
        return None, None
    for value in (pm.replace_full_path, pm.replace_prefix_match):
        if value and not _NUL_CR_LF.isdisjoint(value):
            raise RuleError(f"path {value!r}: Envoy refuses NUL, CR and LF in a path")
    if pm.type == "ReplaceFullPath":
        return pm.type, pm.replace_full_path or "/"
    if pm.type == "ReplacePrefixMatch":
        if any(mt.path_type != "PathPrefix" for mt in matches):
            raise RuleError("ReplacePrefixMatch needs PathPrefix matches")
        return pm.type, pm.replace_prefix_match or "/"
    raise RuleError(f"path modifier type {pm.type} is not supported")


def redirect(f: m.HTTPRequestRedirectFilter, matches: list[ir.RouteMatch]) -> ir.Redirect:
    """A RequestRedirect filter of a rule with these IR matches."""
    if f.status_code not in (301, 302, 303, 307, 308):
        raise RuleError(f"redirect status code {f.status_code} is not supported")
    if f.scheme is not None and f.scheme not in ("http", "https"):
        raise RuleError(f"redirect scheme {f.scheme} is not supported")
    path_type, path = _path_modifier(f.path, matches)
    return ir.Redirect(
        scheme=f.scheme,
        hostname=f.hostname,
        port=f.port,
        path_type=path_type,
        path=path,
        status_code=f.status_code,
    )


def url_rewrite(f: m.HTTPURLRewriteFilter, matches: list[ir.RouteMatch]) -> ir.URLRewrite:
    """A URLRewrite filter of a rule with these IR matches."""
    path_type, path = _path_modifier(f.path, matches)
    return ir.URLRewrite(hostname=f.hostname, path_type=path_type, path=path)


def cors(f: m.HTTPCORSFilter) -> ir.CORS:
    for origin in f.allow_origins:
        pattern = origin_regex(origin)
        if pattern is not None and (err := re2_error(pattern)):
            raise RuleError(f"CORS allowOrigin {origin!r} (matched as {pattern!r}): {err}")
    return ir.CORS(
        allow_origins=tuple(f.allow_origins),
        allow_methods=tuple(f.allow_methods),
        allow_headers=tuple(f.allow_headers),
        expose_headers=tuple(f.expose_headers),
        allow_credentials=bool(f.allow_credentials),
        max_age_s=f.max_age,
    )


class BackendFilters(NamedTuple):
    """What one backendRef's own filters do to the requests forwarded to it."""

    request: ir.HeaderMods | None = None
    response: ir.HeaderMods | None = None
    redirect: ir.Redirect | None = None
    url_rewrite: ir.URLRewrite | None = None


def backend_header_mods(
    backend_refs: Sequence[m.HTTPBackendRef | m.GRPCBackendRef],
    matches: list[ir.RouteMatch] | None = None,
) -> list[BackendFilters]:
    """The filters of each backendRef, in order.

    Header modifiers are always understood; RequestRedirect and URLRewrite only for HTTPRoute
    (``matches``: the rule's IR matches). Raises RuleError for any other filter type, and for
    a redirect combined with a rewrite on one backendRef.
    """
    out: list[BackendFilters] = []
    for ref in backend_refs:
        req: ir.HeaderMods | None = None
        resp: ir.HeaderMods | None = None
        red: ir.Redirect | None = None
        rew: ir.URLRewrite | None = None
        for bf in ref.filters:
            if bf.type == "RequestHeaderModifier":
                req = merge_mods(req, header_mods(bf.request_header_modifier))
            elif bf.type == "ResponseHeaderModifier":
                resp = merge_mods(resp, response_mods(header_mods(bf.response_header_modifier)))
            elif (
                bf.type == "RequestRedirect"
                and matches is not None
                and isinstance(bf, m.HTTPRouteFilter)
            ):
                if bf.request_redirect is None:
                    raise RuleError("backendRef RequestRedirect filter without requestRedirect")
                red = redirect(bf.request_redirect, matches)
            elif (
                bf.type == "URLRewrite"
                and matches is not None
                and isinstance(bf, m.HTTPRouteFilter)
            ):
                if bf.url_rewrite is None:
                    raise RuleError("backendRef URLRewrite filter without urlRewrite")
                rew = url_rewrite(bf.url_rewrite, matches)
            else:
                raise RuleError(f"backendRef filter type {bf.type} is not supported")
        if red is not None and rew is not None:
            raise RuleError(
                "backendRef RequestRedirect and URLRewrite filters cannot be combined",
                incompatible_filters=True,
            )
        out.append(BackendFilters(req, resp, red, rew))
    return out


def mirror(
    tr: RouteTranslation, resolver: BackendResolver, f: m.HTTPRequestMirrorFilter
) -> ir.Mirror | None:
    """A RequestMirror filter; an unresolvable target is a ResolvedRefs problem and mirrors
    nothing.
    """
    cluster = _filter_cluster(tr, resolver, f.backend_ref, "mirror")
    if cluster is None:
        return None
    if f.fraction is not None:
        if f.fraction.denominator <= 0 or not 0 <= f.fraction.numerator <= f.fraction.denominator:
            raise RuleError(
                "mirror fraction must satisfy 0 <= numerator <= denominator, denominator > 0"
            )
        return ir.Mirror(
            cluster=cluster, numerator=f.fraction.numerator, denominator=f.fraction.denominator
        )
    if f.percent is not None:
        return ir.Mirror(cluster=cluster, numerator=max(0, min(100, f.percent)), denominator=100)
    return ir.Mirror(cluster=cluster)


def _filter_cluster(
    tr: RouteTranslation,
    resolver: BackendResolver,
    ref: m.BackendObjectReference,
    what: str,
    family: str = "",
) -> str | None:
    """The cluster of a filter's own backendRef (a mirror's, an auth service's), recorded with the
    rule's; None when it cannot be resolved, a ResolvedRefs problem prefixed with ``what``."""
    backend = resolver.resolve(tr.kind, tr.route.metadata.namespace, ref, family=family)
    if backend.backend is not None:
        tr.use_backend(backend.backend)
    if backend.cluster is None:
        if backend.problem is not None:
            tr.note_refs(c.prefixed(backend.problem, f"{what}: "))
        return None
    resolver.clusters[backend.cluster.name] = backend.cluster
    if backend.service:
        tr.use_service(backend.service)
    return backend.cluster.name


def external_auth(
    tr: RouteTranslation, resolver: BackendResolver, f: m.HTTPExternalAuthFilter
) -> ir.ExtAuth | None:
    """An ExternalAuth filter. Its service must speak its protocol (gRPC: HTTP/2, whatever the
    port's appProtocol); one that cannot be resolved is a ResolvedRefs problem and None: the
    rule's requests then get an error, never a pass."""
    grpc = f.protocol == "GRPC"
    if not grpc and f.protocol != "HTTP":
        raise RuleError(f"ExternalAuth protocol {f.protocol} is not supported")
    cluster = _filter_cluster(
        tr, resolver, f.backend_ref, "externalAuth", family="GRPC" if grpc else ""
    )
    if cluster is None:
        return None
    body = f.forward_body.max_size if f.forward_body is not None else 0
    if grpc:
        allowed = f.grpc.allowed_headers if f.grpc is not None else ()
        return ir.ExtAuth(
            protocol="GRPC", cluster=cluster, allowed_headers=tuple(allowed), max_body_bytes=body
        )
    http = f.http or m.HTTPAuthConfig()
    return ir.ExtAuth(
        protocol="HTTP",
        cluster=cluster,
        path=http.path,
        allowed_headers=tuple(http.allowed_headers),
        allowed_response_headers=tuple(http.allowed_response_headers),
        max_body_bytes=body,
    )


_NO_FILTERS = BackendFilters()


def weighted_backends(
    tr: RouteTranslation,
    resolver: BackendResolver,
    refs: Sequence[Any],
    per_backend: Sequence[BackendFilters] | None = None,
    terminated: bool = False,
) -> tuple[ir.WeightedCluster, ...]:
    """backendRefs as weighted clusters. Invalid ones keep their weight on the invalid-backend
    cluster.

    Returns () when no valid backend carries any weight (the caller answers 500 / rejects).
    """
    ns = tr.route.metadata.namespace
    kind = tr.kind
    resolve = resolver.resolve
    shared = resolver.memo.weighted_cluster
    clusters = resolver.clusters
    out: list[ir.WeightedCluster] = []
    valid_weight = 0
    invalid = False
    for i, ref in enumerate(refs):
        br: BackendRefLike = ref
        backend = resolve(kind, ns, br, terminated)
        weight: int = ref.weight
        if backend.service is not None:
            tr.use_service(backend.service)
        if backend.backend is not None:
            tr.use_backend(backend.backend)
        cluster = backend.cluster
        if cluster is None:
            if backend.problem is not None:
                tr.note_refs(backend.problem)
            if weight > 0:
                out.append(shared(INVALID_CLUSTER.name, weight))
                invalid = True
            continue
        if weight <= 0:
            continue
        clusters[cluster.name] = cluster
        valid_weight += weight
        own = per_backend[i] if per_backend else _NO_FILTERS
        if own is _NO_FILTERS:
            out.append(shared(cluster.name, weight))
        else:
            out.append(
                ir.WeightedCluster(
                    cluster=cluster.name,
                    weight=weight,
                    request_headers=own.request,
                    response_headers=own.response,
                    redirect=own.redirect,
                    url_rewrite=own.url_rewrite,
                )
            )
    if valid_weight == 0:
        return ()
    if invalid:
        clusters[INVALID_CLUSTER.name] = INVALID_CLUSTER
    return tuple(out)


def plain_backends(
    tr: RouteTranslation, resolver: BackendResolver, refs: Sequence[m.HTTPBackendRef]
) -> tuple[ir.WeightedCluster, ...]:
    """:func:`weighted_backends` of an HTTPRoute rule's backendRefs without filters of their
    own, each taken whole from the resolver (``BackendResolver.http_ref``)."""
    ns = tr.route.metadata.namespace
    uses = resolver.http_uses
    touched = resolver.touched
    clusters = resolver.clusters
    out: list[ir.WeightedCluster] = []
    valid_weight = 0
    invalid = False
    for ref in refs:
        use = uses.get((ns, ref))
        if use is None:
            use = resolver.http_ref(ns, ref)
        if touched is not None:
            touched.add(use.named)
        if use.service is not None:
            tr.use_service(use.service)
        if use.backend is not None:
            tr.use_backend(use.backend)
        wc = use.weighted
        cluster = use.cluster
        if cluster is None:
            if use.problem is not None:
                tr.note_refs(use.problem)
            if wc is not None:
                out.append(wc)
                invalid = True
        elif wc is not None:
            clusters[cluster.name] = cluster
            valid_weight += wc.weight
            out.append(wc)
    if valid_weight == 0:
        return ()
    if invalid:
        clusters[INVALID_CLUSTER.name] = INVALID_CLUSTER
    return tuple(out)
