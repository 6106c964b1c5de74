"""The HTTPRoute rule's fast path (httproute._rule for a plain rule) is the general path, faster.

A rule with no filters but header modifiers, no backendRef filters, no timeouts, retry or
sessionPersistence (``httproute.plain_rule``) is translated by ``_rule`` itself, its
backendRefs through ``BackendResolver.http_ref``; any other by ``_general_rule``, the reference.
Each drawn route (plain rules, and near-misses with each disqualifying field alone) is
translated both ways, each by a resolver of its own: the whole RouteTranslation (IR routes with
their precedence keys, clusters in order, Service ports, Backends, the first ResolvedRefs
problem, dropped rules), the Services the resolver records as touched, and the sorted IR routes
must be the same; and a plain rule must take the fast path (its backendRefs' uses are then
remembered in ``http_uses``, which the general path never fills).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, httproute
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation
from gateweave.translate.backends import BackendResolver
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.context import Ctx, sort_key
from gateweave.translate.filters import RuleError
from gateweave.translate.rules import OneRule, translate_rules

TEAM = "team"
TS = "2025-01-01T00:00:00Z"


def _meta(name: str, ns: str = TEAM, **kw: Any) -> m.ObjectMeta:
    return m.ObjectMeta(name=name, namespace=ns, creation_timestamp=TS, **kw)


def _service(name: str, ns: str, *ports: m.ServicePort, **spec: Any) -> m.Service:
    return m.Service(metadata=_meta(name, ns), spec=m.ServiceSpec(ports=ports, **spec))


def _objects() -> list[Any]:
    http = m.ServicePort(name="http", port=80)
    odd = m.ServicePort(name="odd", port=81, app_protocol="example.com/odd")
    h2c = m.ServicePort(name="grpc", port=82, app_protocol="kubernetes.io/h2c")
    eps = m.EndpointSlice(
        metadata=_meta("a-0", labels={"kubernetes.io/service-name": "a"}),
        endpoints=(m.Endpoint(addresses=("10.0.0.1",), conditions=m.EndpointConditions()),),
        ports=(m.EndpointPort(name="http", port=8080),),
    )
    grant = m.ReferenceGrant(
        metadata=_meta("from-team", "shared"),
        spec=m.ReferenceGrantSpec(
            from_=(m.ReferenceGrantFrom(group=m.GATEWAY_GROUP, kind="HTTPRoute", namespace=TEAM),),
            to=(m.ReferenceGrantTo(group="", kind="Service"),),
        ),
    )
    return [
        _service("a", TEAM, http, odd, h2c),
        _service("b", TEAM, http),
        _service("ext", TEAM, type="ExternalName", external_name="not a host!"),
        _service("s", "shared", http),
        _service("o", "other", http),
        eps,
        grant,
    ]


# backendRefs: resolved, an unsupported appProtocol, no such port or Service, no port, a
# cross-namespace one granted and one not, an ExternalName without a valid name, an unsupported
# kind, a missing Envoy Gateway Backend
_REFS: tuple[dict[str, Any], ...] = (
    {"name": "a", "port": 80},
    {"name": "a", "port": 82},
    {"name": "b", "port": 80},
    {"name": "a", "port": 81},
    {"name": "a", "port": 99},
    {"name": "a"},
    {"name": "missing", "port": 80},
    {"name": "s", "namespace": "shared", "port": 80},
    {"name": "o", "namespace": "other", "port": 80},
    {"name": "ext", "port": 80},
    {"name": "thing", "group": "example.com", "kind": "Thing"},
    {"name": "nope", "group": m.ENVOY_GATEWAY_GROUP, "kind": "Backend"},
)
_WEIGHTS = (1, 1, 90, 0)
_PATHS = (
    None,
    m.HTTPPathMatch(type="PathPrefix", value="/api"),
    m.HTTPPathMatch(type="Exact", value="/x"),
    m.HTTPPathMatch(type="RegularExpression", value="/r/[a-z]+"),
    m.HTTPPathMatch(type="RegularExpression", value="/r/("),  # invalid: the rule is dropped
    m.HTTPPathMatch(type="PathPrefix", value="api"),  # invalid: no leading '/'
)
_HEADER_MATCHES = (
    (),
    (m.HTTPHeaderMatch(name="x-tenant", value="t1"),),
    (
        m.HTTPHeaderMatch(name="x-tenant", value="t1"),
        m.HTTPHeaderMatch(type="RegularExpression", name="x-build", value="v[0-9]+"),
    ),
    (m.HTTPHeaderMatch(type="RegularExpression", name="x-bad", value="(("),),
)
_MODIFIERS = (
    m.HTTPHeaderFilter(set=(m.HTTPHeader(name="x-route", value="r"),), remove=("x-debug",)),
    m.HTTPHeaderFilter(add=(m.HTTPHeader(name="x-served-by", value="gw"),)),
    m.HTTPHeaderFilter(remove=("host",)),  # refused in a response
    m.HTTPHeaderFilter(set=(m.HTTPHeader(name="", value="v"),)),  # refused anywhere
)
_MIRROR = m.HTTPRequestMirrorFilter(backend_ref=m.BackendObjectReference(name="b", port=80))
_PREFIX = m.HTTPPathModifier(type="ReplacePrefixMatch", replace_prefix_match="/")
# Each alone makes a rule not plain.
_NEAR_MISSES = (
    "timeouts",
    "retry",
    "session_persistence",
    "mirror",
    "rewrite",
    "redirect",
    "extension_ref",
    "backend_filter",
)


@st.composite
def _match(draw: st.DrawFn) -> m.HTTPRouteMatch:
    params = draw(st.sampled_from([(), (m.HTTPQueryParamMatch(name="v", value="1"),)]))
    return m.HTTPRouteMatch(
        path=draw(st.sampled_from(_PATHS)),
        headers=draw(st.sampled_from(_HEADER_MATCHES)),
        query_params=params,
        method=draw(st.sampled_from([None, "GET"])),
    )


def _header_filter(draw: st.DrawFn) -> m.HTTPRouteFilter:
    mods = draw(st.sampled_from(_MODIFIERS))
    if draw(st.booleans()):
        return m.HTTPRouteFilter(type="RequestHeaderModifier", request_header_modifier=mods)
    return m.HTTPRouteFilter(type="ResponseHeaderModifier", response_header_modifier=mods)


@st.composite
def _rule(draw: st.DrawFn, near_miss: str | None) -> m.HTTPRouteRule:
    matches = tuple(draw(st.lists(_match(), max_size=3)))
    filters = [_header_filter(draw) for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2])))]
    refs = [
        m.HTTPBackendRef(
            **draw(st.sampled_from(_REFS)), weight=draw(st.sampled_from([1, 1, 90, 0]))
        )
        for _ in range(draw(st.sampled_from([1, 1, 2, 3, 0])))
    ]
    extra: dict[str, Any] = {}
    if near_miss == "timeouts":
        extra["timeouts"] = m.HTTPRouteTimeouts(request=draw(st.sampled_from(["5s", "bad"])))
    elif near_miss == "retry":
        extra["retry"] = m.HTTPRouteRetry(codes=(503,), attempts=2)
    elif near_miss == "session_persistence":
        extra["session_persistence"] = m.SessionPersistence()
    elif near_miss == "mirror":
        filters.append(m.HTTPRouteFilter(type="RequestMirror", request_mirror=_MIRROR))
    elif near_miss == "rewrite":
        rewrite = m.HTTPURLRewriteFilter(path=_PREFIX)
        filters.append(m.HTTPRouteFilter(type="URLRewrite", url_rewrite=rewrite))
    elif near_miss == "redirect":
        redirect = m.HTTPRequestRedirectFilter(scheme="https", status_code=301)
        filters.append(m.HTTPRouteFilter(type="RequestRedirect", request_redirect=redirect))
    elif near_miss == "extension_ref":
        ext = m.LocalObjectReference(group="example.com", kind="Ext", name="e")
        filters.append(m.HTTPRouteFilter(type="ExtensionRef", extension_ref=ext))
    elif near_miss == "backend_filter":
        own = m.HTTPRouteFilter(type="RequestHeaderModifier", request_header_modifier=_MODIFIERS[0])
        refs.append(m.HTTPBackendRef(name="a", port=80, filters=(own,)))
    return m.HTTPRouteRule(
        name=draw(st.sampled_from([None, "r"])),
        matches=matches,
        filters=tuple(draw(st.permutations(filters))),
        backend_refs=tuple(refs),
        **extra,
    )


def _translate(ctx: Ctx, routes: list[m.HTTPRoute], one_rule: OneRule) -> list[tuple[Any, ...]]:
    """Each route translated with ``one_rule`` by one resolver, as a translation does; per route,
    the whole translation after each rule, the Services it touched, and the translation again
    (now from what the resolver remembers) sorted."""
    resolver = BackendResolver(ctx, BackendTLSIndex(ctx))
    out = []
    for route in routes:
        resolver.touched = set()
        rules = route.spec.rules
        tr = RouteTranslation(kind="HTTPRoute", route=route, order=sort_key(route))
        tr.rule_count = len(rules)
        steps = []
        keys: list[PrecedenceKey] = []
        used: list[str] = []
        for i, rule in enumerate(rules):
            try:
                one_rule(tr, resolver, i, rule, f"httproute/{TEAM}/r/rule/", tr.order, keys, used)
            except RuleError as err:
                tr.drop_rule(f"rule {i}", str(err), err.incompatible_filters)
            made = list(resolver.clusters.items())
            steps.append((list(keys), list(used), made, tr.services, tr.refs_problem))
        touched = set(resolver.touched)
        again = translate_rules("HTTPRoute", route, rules, resolver, tr.order, one_rule)
        out.append((tr, steps, touched, again.sorted_http, again.precedence_keys(), again))
    return out


def _fast_path_taken(ctx: Ctx, route: m.HTTPRoute, i: int, rule: m.HTTPRouteRule) -> bool | None:
    """Whether ``_rule`` took the fast path for the rule (None: it cannot tell, the rule being
    dropped first or having no backendRefs): a fresh resolver then remembers the use of each of
    its backendRefs, as the general path never does."""
    resolver = BackendResolver(ctx, BackendTLSIndex(ctx))
    tr = RouteTranslation(kind="HTTPRoute", route=route, order=sort_key(route))
    try:
        httproute._rule(tr, resolver, i, rule, "p/", tr.order, [], [])
    except RuleError:
        return None
    if not rule.backend_refs:
        return None
    remembered = set(resolver.http_uses)
    assert remembered in (set(), {(TEAM, ref) for ref in rule.backend_refs})
    return bool(remembered)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_fast_path_gives_what_the_general_path_gives(data: st.DataObject) -> None:
    ctx = Ctx.build(Snapshot.from_objects(_objects()), TranslateOptions())
    routes: list[m.HTTPRoute] = []
    drawn: list[bool] = []  # per rule in route order: drawn plain (no near-miss)
    for r in range(data.draw(st.integers(1, 4))):
        rules = []
        for _ in range(data.draw(st.integers(1, 3))):
            near_miss = data.draw(st.sampled_from((None, None, None, *_NEAR_MISSES)))
            rules.append(data.draw(_rule(near_miss)))
            drawn.append(near_miss is None)
        spec = m.HTTPRouteSpec(rules=tuple(rules))
        routes.append(m.HTTPRoute(metadata=_meta(f"r{r}"), spec=spec))
    assert _translate(ctx, routes, httproute._rule) == _translate(
        ctx, routes, httproute._general_rule
    )
    plain = iter(drawn)
    for route in routes:
        for i, rule in enumerate(route.spec.rules):
            is_plain = next(plain)
            assert httproute.plain_rule(rule) == is_plain
            assert _fast_path_taken(ctx, route, i, rule) in (None, is_plain)


def test_a_plain_rule_takes_the_fast_path() -> None:
    """(The property's check that it is taken, on a rule sure to have something to check.)"""
    ctx = Ctx.build(Snapshot.from_objects(_objects()), TranslateOptions())
    rule = m.HTTPRouteRule(backend_refs=(m.HTTPBackendRef(name="a", port=80),))
    route = m.HTTPRoute(metadata=_meta("r"), spec=m.HTTPRouteSpec(rules=(rule,)))
    assert _fast_path_taken(ctx, route, 0, rule) is True
    near = m.HTTPRouteRule(backend_refs=rule.backend_refs, retry=m.HTTPRouteRetry(attempts=1))
    assert _fast_path_taken(ctx, route, 0, near) is False
