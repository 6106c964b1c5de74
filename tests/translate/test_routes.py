"""Route side of translate: attachment, route status, backends, BackendTLSPolicy, xDS IR assembly.

Every test runs the real pipeline (``translate``) on objects built in code.
"""

from __future__ import annotations

import datetime
import random
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateweave import ir
from gateweave.api import models as m
from gateweave.ir import INVALID_BACKEND_CLUSTER
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.hostnames import effective_hostnames, first_selecting, selectors

NS = "infra"
G = m.GATEWAY_GROUP


# ---------------------------------------------------------------- builders


def meta(name: str, ns: str = NS, ts: str = "2025-01-01T00:00:00Z", **kw: Any) -> m.ObjectMeta:
    return m.ObjectMeta(name=name, namespace=ns, creation_timestamp=ts, **kw)


def gateway_class() -> m.GatewayClass:
    return m.GatewayClass(
        metadata=m.ObjectMeta(name="gw-class"),
        spec=m.GatewayClassSpec(controller_name="gateweave.io/gateway-controller"),
    )


def listener(
    name: str, port: int = 80, protocol: str = "HTTP", hostname: str | None = None, **kw: Any
) -> m.Listener:
    return m.Listener(name=name, port=port, protocol=protocol, hostname=hostname, **kw)


def gateway(
    name: str = "gw", *listeners: m.Listener, ns: str = NS, class_name: str = "gw-class"
) -> m.Gateway:
    return m.Gateway(
        metadata=meta(name, ns),
        spec=m.GatewaySpec(
            gateway_class_name=class_name, listeners=tuple(listeners) or (listener("http"),)
        ),
    )


def service(name: str, *ports: m.ServicePort, ns: str = NS) -> m.Service:
    return m.Service(
        metadata=meta(name, ns),
        spec=m.ServiceSpec(ports=ports or (m.ServicePort(name="http", port=8080),)),
    )


def slice_for(
    svc: str,
    *addrs: str,
    ns: str = NS,
    port: int = 3000,
    port_name: str = "http",
    suffix: str = "a",
    ready: bool | None = True,
) -> m.EndpointSlice:
    return m.EndpointSlice(
        metadata=meta(f"{svc}-{suffix}", ns, labels={"kubernetes.io/service-name": svc}),
        endpoints=tuple(
            m.Endpoint(addresses=(a,), conditions=m.EndpointConditions(ready=ready)) for a in addrs
        ),
        ports=(m.EndpointPort(name=port_name, port=port),),
    )


def pref(name: str = "gw", **kw: Any) -> m.ParentReference:
    return m.ParentReference(name=name, **kw)


def bref(name: str, port: int | None = 8080, **kw: Any) -> m.HTTPBackendRef:
    return m.HTTPBackendRef(name=name, port=port, **kw)


def http_route(
    name: str,
    *rules: m.HTTPRouteRule,
    parents: tuple[m.ParentReference, ...] = (pref(),),
    hostnames: tuple[str, ...] = (),
    ns: str = NS,
    ts: str = "2025-01-01T00:00:00Z",
) -> m.HTTPRoute:
    return m.HTTPRoute(
        metadata=meta(name, ns, ts, generation=3),
        spec=m.HTTPRouteSpec(
            parent_refs=parents,
            hostnames=hostnames,
            rules=rules or (m.HTTPRouteRule(backend_refs=(bref("svc"),)),),
        ),
    )


def prefix(path: str, **kw: Any) -> m.HTTPRouteMatch:
    return m.HTTPRouteMatch(path=m.HTTPPathMatch(type="PathPrefix", value=path), **kw)


def base(*extra: Any) -> Snapshot:
    return Snapshot.from_objects(
        [gateway_class(), service("svc"), slice_for("svc", "10.0.0.1"), *extra]
    )


def run(snap: Snapshot) -> ir.Result:
    return translate(snap)


def parents_of(result: ir.Result, kind: str, name: str, ns: str = NS) -> list[dict[str, Any]]:
    parents: list[dict[str, Any]] = result.statuses[(kind, ns, name)]["parents"]  # type: ignore[assignment]
    return parents


def cond(entry: dict[str, Any], type_: str) -> tuple[str, str]:
    found = [c for c in entry["conditions"] if c["type"] == type_]
    assert len(found) == 1, entry["conditions"]
    return found[0]["status"], found[0]["reason"]


def listener_status(result: ir.Result, gw: str, lname: str) -> dict[str, Any]:
    status: dict[str, Any] = result.statuses[("Gateway", NS, gw)]
    return next(entry for entry in status["listeners"] if entry["name"] == lname)


def vhosts(result: ir.Result, gw: str = "gw", port: int = 80) -> dict[str, ir.VirtualHost]:
    xgw = result.xds[f"{NS}/{gw}"]
    p = next(p for p in xgw.ports if p.port == port)
    assert p.http is not None
    return {vh.domains[0]: vh for vh in p.http.virtual_hosts}


# ---------------------------------------------------------------- attachment


def test_accepted_route_status_entry_and_attached_routes() -> None:
    res = run(base(gateway(), http_route("r")))
    (entry,) = parents_of(res, "HTTPRoute", "r")
    assert entry["parentRef"] == {"group": G, "kind": "Gateway", "namespace": NS, "name": "gw"}
    assert entry["controllerName"] == "gateweave.io/gateway-controller"
    assert cond(entry, "Accepted") == ("True", "Accepted")
    assert cond(entry, "ResolvedRefs") == ("True", "ResolvedRefs")
    assert all(c["observedGeneration"] == 3 for c in entry["conditions"])
    assert listener_status(res, "gw", "http")["attachedRoutes"] == 1


def test_not_allowed_by_listeners_namespace_and_kind() -> None:
    other_ns = http_route("r", ns="apps", parents=(pref(namespace=NS),))
    tcp = m.TCPRoute(
        metadata=meta("t"),
        spec=m.L4RouteSpec(
            parent_refs=(pref(),),
            rules=(m.L4RouteRule(backend_refs=(m.BackendRef(name="svc", port=8080),)),),
        ),
    )
    res = run(base(gateway(), other_ns, tcp))
    (entry,) = parents_of(res, "HTTPRoute", "r", ns="apps")
    assert cond(entry, "Accepted") == ("False", "NotAllowedByListeners")
    (tentry,) = parents_of(res, "TCPRoute", "t")
    assert cond(tentry, "Accepted") == ("False", "NotAllowedByListeners")
    assert listener_status(res, "gw", "http")["attachedRoutes"] == 0


def test_allowed_routes_selector_on_namespace_labels() -> None:
    sel = m.AllowedRoutes(
        namespaces=m.RouteNamespaces(
            from_="Selector", selector=m.LabelSelector(match_labels={"team": "a"})
        )
    )
    gw = gateway("gw", listener("http", allowed_routes=sel))
    ns_a = m.Namespace(metadata=m.ObjectMeta(name="apps", labels={"team": "a"}))
    ns_b = m.Namespace(metadata=m.ObjectMeta(name="other", labels={"team": "b"}))
    ra = http_route("ra", ns="apps", parents=(pref(namespace=NS),))
    rb = http_route("rb", ns="other", parents=(pref(namespace=NS),))
    res = run(base(gw, ns_a, ns_b, ra, rb))
    assert cond(parents_of(res, "HTTPRoute", "ra", "apps")[0], "Accepted") == ("True", "Accepted")
    assert cond(parents_of(res, "HTTPRoute", "rb", "other")[0], "Accepted") == (
        "False",
        "NotAllowedByListeners",
    )


def test_no_matching_parent_by_section_name_and_port() -> None:
    gw = gateway("gw", listener("http"), listener("alt", port=8080))
    by_section = http_route("s", parents=(pref(section_name="nope"),))
    by_port = http_route("p", parents=(pref(port=9999),))
    both_ok = http_route("ok", parents=(pref(section_name="alt", port=8080),))
    mismatch = http_route("mm", parents=(pref(section_name="http", port=8080),))
    res = run(base(gw, by_section, by_port, both_ok, mismatch))
    assert cond(parents_of(res, "HTTPRoute", "s")[0], "Accepted") == ("False", "NoMatchingParent")
    assert cond(parents_of(res, "HTTPRoute", "p")[0], "Accepted") == ("False", "NoMatchingParent")
    assert cond(parents_of(res, "HTTPRoute", "mm")[0], "Accepted") == ("False", "NoMatchingParent")
    ok = parents_of(res, "HTTPRoute", "ok")[0]
    assert cond(ok, "Accepted") == ("True", "Accepted")
    assert ok["parentRef"]["sectionName"] == "alt" and ok["parentRef"]["port"] == 8080
    assert listener_status(res, "gw", "alt")["attachedRoutes"] == 1
    assert listener_status(res, "gw", "http")["attachedRoutes"] == 0


def test_no_matching_listener_hostname() -> None:
    gw = gateway("gw", listener("http", hostname="foo.example.com"))
    res = run(base(gw, http_route("r", hostnames=("bar.example.com",))))
    assert cond(parents_of(res, "HTTPRoute", "r")[0], "Accepted") == (
        "False",
        "NoMatchingListenerHostname",
    )


def test_other_controllers_parents_get_no_entry_but_the_key_exists() -> None:
    theirs = m.GatewayClass(
        metadata=m.ObjectMeta(name="theirs"),
        spec=m.GatewayClassSpec(controller_name="example.com/x"),
    )
    other = gateway("other", class_name="theirs")
    route = http_route("r", parents=(pref("other"), pref("gw")))
    lonely = http_route("lonely", parents=(pref("other"),))
    res = run(base(theirs, gateway(), other, route, lonely))
    entries = parents_of(res, "HTTPRoute", "r")
    assert [e["parentRef"]["name"] for e in entries] == ["gw"]
    assert parents_of(res, "HTTPRoute", "lonely") == []


def test_route_counted_once_per_listener_with_two_parent_refs() -> None:
    route = http_route("r", parents=(pref(), pref(section_name="http")))
    res = run(base(gateway(), route))
    assert len(parents_of(res, "HTTPRoute", "r")) == 2
    assert listener_status(res, "gw", "http")["attachedRoutes"] == 1


# ---------------------------------------------------------------- ResolvedRefs


def test_resolved_refs_reasons() -> None:
    kind = http_route(
        "kind", m.HTTPRouteRule(backend_refs=(bref("x", group="example.com", kind="Thing"),))
    )
    missing = http_route("missing", m.HTTPRouteRule(backend_refs=(bref("nope"),)))
    badport = http_route("badport", m.HTTPRouteRule(backend_refs=(bref("svc", port=1234),)))
    res = run(base(gateway(), kind, missing, badport))
    for name, reason in (
        ("kind", "InvalidKind"),
        ("missing", "BackendNotFound"),
        ("badport", "BackendNotFound"),
    ):
        (entry,) = parents_of(res, "HTTPRoute", name)
        assert cond(entry, "Accepted") == ("True", "Accepted")
        assert cond(entry, "ResolvedRefs") == ("False", reason)
    # every backend invalid: the rule answers 500
    (vh,) = vhosts(res).values()
    assert {r.name.split("/")[2]: r.direct_status for r in vh.routes} == {
        "kind": 500,
        "missing": 500,
        "badport": 500,
    }


def test_cross_namespace_backend_needs_a_reference_grant() -> None:
    route = http_route("r", m.HTTPRouteRule(backend_refs=(bref("remote", namespace="apps"),)))
    objs = [
        gateway(),
        route,
        service("remote", ns="apps"),
        slice_for("remote", "10.0.9.9", ns="apps"),
    ]
    res = run(base(*objs))
    assert cond(parents_of(res, "HTTPRoute", "r")[0], "ResolvedRefs") == (
        "False",
        "RefNotPermitted",
    )
    assert res.xds[f"{NS}/gw"].clusters == ()

    grant = m.ReferenceGrant(
        metadata=meta("allow", "apps"),
        spec=m.ReferenceGrantSpec(
            from_=(m.ReferenceGrantFrom(group=G, kind="HTTPRoute", namespace=NS),),
            to=(m.ReferenceGrantTo(group="", kind="Service"),),
        ),
    )
    res = run(base(*objs, grant))
    assert cond(parents_of(res, "HTTPRoute", "r")[0], "ResolvedRefs") == ("True", "ResolvedRefs")
    (cl,) = res.xds[f"{NS}/gw"].clusters
    assert cl.name == "apps/remote/8080/http1"
    assert cl.endpoints == (ir.Endpoint(address="10.0.9.9", port=3000),)


def test_partly_invalid_backends_keep_their_weight_on_the_invalid_cluster() -> None:
    rule = m.HTTPRouteRule(backend_refs=(bref("svc", weight=3), bref("nope", weight=1)))
    res = run(base(gateway(), http_route("r", rule)))
    (vh,) = vhosts(res).values()
    (route,) = vh.routes
    assert route.direct_status is None
    assert route.backends == (
        ir.WeightedCluster(cluster=f"{NS}/svc/8080/http1", weight=3),
        ir.WeightedCluster(cluster=INVALID_BACKEND_CLUSTER, weight=1),
    )
    names = [c.name for c in res.xds[f"{NS}/gw"].clusters]
    assert names == sorted(names) and INVALID_BACKEND_CLUSTER in names


def test_unsupported_app_protocol() -> None:
    svc = service("odd", m.ServicePort(name="x", port=8080, app_protocol="example.com/custom"))
    res = run(base(gateway(), svc, http_route("r", m.HTTPRouteRule(backend_refs=(bref("odd"),)))))
    assert cond(parents_of(res, "HTTPRoute", "r")[0], "ResolvedRefs") == (
        "False",
        "UnsupportedProtocol",
    )


def test_app_protocol_sets_cluster_protocol_and_endpoints_are_filtered() -> None:
    svc = service("h2", m.ServicePort(name="grpc", port=9000, app_protocol="kubernetes.io/h2c"))
    slices = [
        slice_for("h2", "10.0.0.3", "10.0.0.2", port=9001, port_name="grpc", suffix="a"),
        slice_for("h2", "10.0.0.2", "10.0.0.10", port=9001, port_name="grpc", suffix="b"),
        slice_for("h2", "10.0.0.99", port=9001, port_name="grpc", suffix="c", ready=False),
        slice_for("h2", "10.0.0.98", port=7777, port_name="other", suffix="d"),
    ]
    res = run(
        base(
            gateway(),
            svc,
            *slices,
            http_route("r", m.HTTPRouteRule(backend_refs=(bref("h2", port=9000),))),
        )
    )
    (cl,) = res.xds[f"{NS}/gw"].clusters
    assert (cl.name, cl.protocol) == (f"{NS}/h2/9000/h2c", "H2C")
    assert [e.address for e in cl.endpoints] == ["10.0.0.2", "10.0.0.3", "10.0.0.10"]
    assert {e.port for e in cl.endpoints} == {9001}


# ---------------------------------------------------------------- rules and filters


def test_invalid_regex_drops_the_rule_and_marks_partially_invalid() -> None:
    bad = m.HTTPRouteRule(
        matches=(m.HTTPRouteMatch(path=m.HTTPPathMatch(type="RegularExpression", value="/a(b")),),
        backend_refs=(bref("svc"),),
    )
    good = m.HTTPRouteRule(matches=(prefix("/ok"),), backend_refs=(bref("svc"),))
    res = run(base(gateway(), http_route("r", bad, good), http_route("allbad", bad)))
    entry = parents_of(res, "HTTPRoute", "r")[0]
    assert cond(entry, "Accepted") == ("True", "Accepted")
    assert cond(entry, "PartiallyInvalid") == ("True", "UnsupportedValue")
    assert cond(parents_of(res, "HTTPRoute", "allbad")[0], "Accepted") == (
        "False",
        "UnsupportedValue",
    )
    (vh,) = vhosts(res).values()
    assert [r.name for r in vh.routes] == [f"httproute/{NS}/r/rule/1/match/0"]
    # a route whose every rule is dropped is not counted as attached
    assert listener_status(res, "gw", "http")["attachedRoutes"] == 1


def test_redirect_with_rewrite_is_incompatible_and_filters_map_to_ir() -> None:
    both = m.HTTPRouteRule(
        filters=(
            m.HTTPRouteFilter(
                type="RequestRedirect", request_redirect=m.HTTPRequestRedirectFilter(scheme="https")
            ),
            m.HTTPRouteFilter(type="URLRewrite", url_rewrite=m.HTTPURLRewriteFilter(hostname="x")),
        )
    )
    res = run(base(gateway(), http_route("both", both)))
    assert cond(parents_of(res, "HTTPRoute", "both")[0], "Accepted") == (
        "False",
        "IncompatibleFilters",
    )

    rule = m.HTTPRouteRule(
        matches=(prefix("/api"),),
        filters=(
            m.HTTPRouteFilter(
                type="RequestHeaderModifier",
                request_header_modifier=m.HTTPHeaderFilter(
                    set=(m.HTTPHeader(name="X-A", value="1"),), remove=("X-B",)
                ),
            ),
            m.HTTPRouteFilter(
                type="URLRewrite",
                url_rewrite=m.HTTPURLRewriteFilter(
                    path=m.HTTPPathModifier(type="ReplacePrefixMatch", replace_prefix_match="/v2")
                ),
            ),
        ),
        backend_refs=(bref("svc"),),
        timeouts=m.HTTPRouteTimeouts(request="1m500ms", backend_request="10s"),
    )
    res = run(base(gateway(), http_route("r", rule)))
    (route,) = next(iter(vhosts(res).values())).routes
    assert route.request_headers == ir.HeaderMods(set=(("X-A", "1"),), remove=("X-B",))
    assert route.url_rewrite == ir.URLRewrite(path_type="ReplacePrefixMatch", path="/v2")
    assert (route.timeout_s, route.backend_timeout_s) == (60.5, 10.0)


def test_rule_without_backends_answers_500_and_extension_ref_is_not_resolved() -> None:
    ext = m.HTTPRouteRule(
        filters=(
            m.HTTPRouteFilter(
                type="ExtensionRef",
                extension_ref=m.LocalObjectReference(group="x.io", kind="F", name="f"),
            ),
        ),
        backend_refs=(bref("svc"),),
    )
    res = run(base(gateway(), http_route("none", m.HTTPRouteRule()), http_route("ext", ext)))
    assert cond(parents_of(res, "HTTPRoute", "none")[0], "ResolvedRefs") == ("True", "ResolvedRefs")
    assert cond(parents_of(res, "HTTPRoute", "ext")[0], "ResolvedRefs") == ("False", "InvalidKind")
    (vh,) = vhosts(res).values()
    assert {r.direct_status for r in vh.routes} == {500}


def _redirect_filter(**kw: Any) -> m.HTTPRouteFilter:
    return m.HTTPRouteFilter(
        type="RequestRedirect", request_redirect=m.HTTPRequestRedirectFilter(**kw)
    )


def _rewrite_filter(**kw: Any) -> m.HTTPRouteFilter:
    return m.HTTPRouteFilter(type="URLRewrite", url_rewrite=m.HTTPURLRewriteFilter(**kw))


def test_backend_ref_redirect_and_rewrite_filters_map_to_their_weighted_cluster() -> None:
    full = m.HTTPPathModifier(type="ReplaceFullPath", replace_full_path="/elsewhere")
    prefix_mod = m.HTTPPathModifier(type="ReplacePrefixMatch", replace_prefix_match="/v2")
    rule = m.HTTPRouteRule(
        matches=(prefix("/api"),),
        backend_refs=(
            bref("svc", weight=1),
            bref("svc", weight=2, filters=(_redirect_filter(path=full, status_code=301),)),
            bref(
                "svc", weight=3, filters=(_rewrite_filter(hostname="h.example", path=prefix_mod),)
            ),
        ),
    )
    res = run(base(gateway(), http_route("r", rule)))
    entry = parents_of(res, "HTTPRoute", "r")[0]
    assert cond(entry, "Accepted") == ("True", "Accepted")
    assert cond(entry, "ResolvedRefs") == ("True", "ResolvedRefs")
    ((route,),) = [vh.routes for vh in vhosts(res).values()]
    assert route.redirect is None and route.url_rewrite is None
    plain, redirected, rewritten = route.backends
    assert (plain.weight, plain.redirect, plain.url_rewrite) == (1, None, None)
    assert redirected.weight == 2
    assert redirected.redirect == ir.Redirect(
        path_type="ReplaceFullPath", path="/elsewhere", status_code=301
    )
    assert rewritten.weight == 3 and rewritten.redirect is None
    assert rewritten.url_rewrite == ir.URLRewrite(
        hostname="h.example", path_type="ReplacePrefixMatch", path="/v2"
    )


def test_backend_ref_filters_are_validated_like_rule_filters() -> None:
    exact = m.HTTPRouteMatch(path=m.HTTPPathMatch(type="Exact", value="/x"))
    prefix_mod = m.HTTPPathModifier(type="ReplacePrefixMatch", replace_prefix_match="/v2")
    not_prefix = m.HTTPRouteRule(
        matches=(exact,), backend_refs=(bref("svc", filters=(_rewrite_filter(path=prefix_mod),)),)
    )
    both = m.HTTPRouteRule(
        backend_refs=(
            bref("svc", filters=(_redirect_filter(scheme="https"), _rewrite_filter(hostname="x"))),
        ),
    )
    mirror = m.HTTPRouteFilter(
        type="RequestMirror",
        request_mirror=m.HTTPRequestMirrorFilter(
            backend_ref=m.BackendObjectReference(name="svc", port=8080)
        ),
    )
    unsupported = m.HTTPRouteRule(backend_refs=(bref("svc", filters=(mirror,)),))
    res = run(
        base(
            gateway(),
            http_route("np", not_prefix),
            http_route("both", both),
            http_route("mir", unsupported),
        )
    )
    assert cond(parents_of(res, "HTTPRoute", "np")[0], "Accepted") == ("False", "UnsupportedValue")
    assert cond(parents_of(res, "HTTPRoute", "both")[0], "Accepted") == (
        "False",
        "IncompatibleFilters",
    )
    assert cond(parents_of(res, "HTTPRoute", "mir")[0], "Accepted") == ("False", "UnsupportedValue")
    grpc = m.GRPCRoute(
        metadata=meta("gr"),
        spec=m.GRPCRouteSpec(
            parent_refs=(pref(),),
            rules=(
                m.GRPCRouteRule(
                    backend_refs=(
                        m.GRPCBackendRef(
                            name="svc",
                            port=8080,
                            filters=(m.GRPCRouteFilter(type="RequestMirror"),),
                        ),
                    )
                ),
            ),
        ),
    )
    res = run(base(gateway(), grpc))
    assert cond(parents_of(res, "GRPCRoute", "gr")[0], "Accepted")[0] == "False"


def test_grpc_route_request_header_modifier_maps_to_the_route() -> None:
    mods = m.HTTPHeaderFilter(
        set=(m.HTTPHeader(name="X-Set", value="s"),),
        add=(m.HTTPHeader(name="X-Add", value="a"),),
        remove=("X-Drop",),
    )
    route = m.GRPCRoute(
        metadata=meta("gr"),
        spec=m.GRPCRouteSpec(
            parent_refs=(pref(),),
            rules=(
                m.GRPCRouteRule(
                    filters=(
                        m.GRPCRouteFilter(
                            type="RequestHeaderModifier", request_header_modifier=mods
                        ),
                    ),
                    backend_refs=(m.GRPCBackendRef(name="svc", port=8080),),
                ),
            ),
        ),
    )
    res = run(base(gateway(), route))
    assert cond(parents_of(res, "GRPCRoute", "gr")[0], "Accepted") == ("True", "Accepted")
    ((r,),) = [vh.routes for vh in vhosts(res).values()]
    assert r.request_headers == ir.HeaderMods(
        set=(("X-Set", "s"),), add=(("X-Add", "a"),), remove=("X-Drop",)
    )
    features: list[dict[str, str]] = res.statuses[("GatewayClass", "", "gw-class")][
        "supportedFeatures"
    ]  # type: ignore[assignment]
    supported = [f["name"] for f in features]
    for feature in (
        "GRPCRouteRequestHeaderModifier",
        "HTTPRouteBackendRequestRedirect",
        "HTTPRouteBackendURLRewrite",
        "GatewayHTTPSListenerDetectMisdirectedRequests",
    ):
        assert feature in supported


def test_session_persistence_maps_to_the_routes_of_its_rule() -> None:
    def sticky(path: str, sp: m.SessionPersistence, name: str | None = None) -> m.HTTPRouteRule:
        return m.HTTPRouteRule(
            name=name,
            matches=(prefix(path), prefix(path + "-too")),
            backend_refs=(bref("svc"),),
            session_persistence=sp,
        )

    cookie = m.SessionPersistence(cookie=m.CookieConfig(name="shop", path="/a"))
    unnamed = m.SessionPersistence(absolute_timeout="1h", cookie=m.CookieConfig())
    permanent = m.SessionPersistence(
        absolute_timeout="90s", cookie=m.CookieConfig(lifetime_type="Permanent")
    )
    header = m.SessionPersistence(type="Header", header=m.HeaderConfig(name="X-Session"))
    header_timeout = m.SessionPersistence(
        type="Header", absolute_timeout="1h", header=m.HeaderConfig(name="X-Session")
    )
    grpc = m.GRPCRoute(
        metadata=meta("gr"),
        spec=m.GRPCRouteSpec(
            parent_refs=(pref(),),
            hostnames=("grpc.test",),
            rules=(
                m.GRPCRouteRule(
                    backend_refs=(m.GRPCBackendRef(name="svc", port=8080),),
                    session_persistence=header,
                ),
            ),
        ),
    )
    route = http_route(
        "r",
        sticky("/a", cookie),
        sticky("/b", unnamed),
        sticky("/c", unnamed, name="named"),
        sticky("/d", permanent),
        sticky("/e", header),
        sticky("/f", header_timeout),
        m.HTTPRouteRule(matches=(prefix("/plain"),), backend_refs=(bref("svc"),)),
        hostnames=("http.test",),
    )
    res = run(base(gateway(), route, grpc))
    entry = parents_of(res, "HTTPRoute", "r")[0]
    # Envoy's header sessions have no expiry: that rule is refused, not half implemented.
    assert cond(entry, "PartiallyInvalid") == ("True", "UnsupportedValue")
    assert "absoluteTimeout is not supported for type Header" in str(entry["conditions"])
    sessions = {r.match.path: r.session for r in vhosts(res)["http.test"].routes}
    assert "/f" not in sessions and sessions["/plain"] is None
    assert sessions["/a"] == sessions["/a-too"] == ir.Session(type="Cookie", name="shop", path="/a")
    # A cookie the rule does not name gets one of its own, by route and rule (its name, else its
    # index).
    b, c = sessions["/b"], sessions["/c"]
    assert (
        b is not None
        and c is not None
        and b.name.startswith("session-")
        and c.name.startswith("session-")
    )
    assert b.name != c.name and len(b.name) == len("session-") + 16
    assert b == ir.Session(type="Cookie", name=b.name, path="/", ttl_s=3600)
    assert sessions["/d"] == ir.Session(type="Cookie", name=sessions["/d"].name, ttl_s=90)  # type: ignore[union-attr]
    assert sessions["/e"] == ir.Session(type="Header", name="x-session")
    ((grpc_route,),) = [vh.routes for vh in [vhosts(res)["grpc.test"]]]
    assert grpc_route.session == ir.Session(type="Header", name="x-session")
    # The same rule of the same route makes the same cookie name in every translation.
    again = run(base(gateway(), route, grpc))
    assert {r.match.path: r.session for r in vhosts(again)["http.test"].routes} == sessions


def test_external_auth_maps_to_the_routes_of_its_rule() -> None:
    def authed(
        path: str, *auths: m.HTTPExternalAuthFilter, redirect: bool = False
    ) -> m.HTTPRouteRule:
        filters = [m.HTTPRouteFilter(type="ExternalAuth", external_auth=a) for a in auths]
        if redirect:
            filters.append(
                m.HTTPRouteFilter(
                    type="RequestRedirect",
                    request_redirect=m.HTTPRequestRedirectFilter(hostname="x.test"),
                )
            )
        return m.HTTPRouteRule(
            matches=(prefix(path),), filters=tuple(filters), backend_refs=(bref("svc"),)
        )

    http = m.HTTPExternalAuthFilter(
        protocol="HTTP",
        backend_ref=m.BackendObjectReference(name="auth", port=8080),
        http=m.HTTPAuthConfig(
            path="/check", allowed_headers=("X-Tenant",), allowed_response_headers=("X-User",)
        ),
        forward_body=m.ForwardBodyConfig(max_size=1024),
    )
    grpc = m.HTTPExternalAuthFilter(
        protocol="GRPC",
        backend_ref=m.BackendObjectReference(name="auth", port=8080),
        grpc=m.GRPCAuthConfig(),
    )
    missing = m.HTTPExternalAuthFilter(
        protocol="HTTP",
        backend_ref=m.BackendObjectReference(name="nowhere", port=80),
        http=m.HTTPAuthConfig(),
    )
    route = http_route(
        "r",
        authed("/http", http),
        authed("/grpc", grpc),
        authed("/missing", missing, redirect=True),
        authed("/twice", http, grpc),
        hostnames=("a.test",),
    )
    res = run(base(gateway(), service("auth"), slice_for("auth", "10.0.0.9"), route))
    entry = parents_of(res, "HTTPRoute", "r")[0]
    assert cond(entry, "ResolvedRefs") == ("False", "BackendNotFound")
    assert cond(entry, "PartiallyInvalid") == (
        "True",
        "UnsupportedValue",
    )  # two ExternalAuth filters
    routes = {r.match.path: r for r in vhosts(res)["a.test"].routes}
    assert "/twice" not in routes
    assert routes["/http"].ext_auth == ir.ExtAuth(
        protocol="HTTP",
        cluster=f"{NS}/auth/8080/http1",
        path="/check",
        allowed_headers=("X-Tenant",),
        allowed_response_headers=("X-User",),
        max_body_bytes=1024,
    )
    # a gRPC auth service is spoken to over HTTP/2, a cluster of its own beside the HTTP/1 one
    assert routes["/grpc"].ext_auth == ir.ExtAuth(protocol="GRPC", cluster=f"{NS}/auth/8080/h2c")
    clusters = {c.name: c for c in res.xds[f"{NS}/gw"].clusters}
    assert (
        clusters[f"{NS}/auth/8080/h2c"].protocol == "H2C"
        and clusters[f"{NS}/auth/8080/http1"].protocol == "HTTP1"
    )
    # an auth service that cannot be resolved lets nothing through, not even to a redirect
    broken = routes["/missing"]
    assert (broken.direct_status, broken.redirect, broken.ext_auth) == (500, None, None)


# ---------------------------------------------------------------- precedence and hostnames


def test_precedence_order_within_a_virtual_host() -> None:
    rules = (
        m.HTTPRouteRule(matches=(prefix("/"),), backend_refs=(bref("svc"),)),
        m.HTTPRouteRule(matches=(prefix("/a"),), backend_refs=(bref("svc"),)),
        m.HTTPRouteRule(matches=(prefix("/a/b"),), backend_refs=(bref("svc"),)),
        m.HTTPRouteRule(
            matches=(m.HTTPRouteMatch(path=m.HTTPPathMatch(type="Exact", value="/a")),),
            backend_refs=(bref("svc"),),
        ),
        m.HTTPRouteRule(matches=(prefix("/a", method="GET"),), backend_refs=(bref("svc"),)),
        m.HTTPRouteRule(
            matches=(prefix("/a", headers=(m.HTTPHeaderMatch(name="h", value="1"),)),),
            backend_refs=(bref("svc"),),
        ),
        m.HTTPRouteRule(
            matches=(prefix("/a", query_params=(m.HTTPQueryParamMatch(name="q", value="1"),)),),
            backend_refs=(bref("svc"),),
        ),
    )
    old = http_route("zzz-old", *rules, ts="2024-01-01T00:00:00Z")
    new = http_route(
        "aaa-new",
        m.HTTPRouteRule(matches=(prefix("/a/b"),), backend_refs=(bref("svc"),)),
        ts="2025-06-01T00:00:00Z",
    )
    res = run(base(gateway(), new, old))
    (vh,) = vhosts(res).values()
    order = [r.name.removeprefix(f"httproute/{NS}/") for r in vh.routes]
    assert order == [
        "zzz-old/rule/3/match/0",  # Exact /a
        "zzz-old/rule/2/match/0",  # prefix /a/b, older route first
        "aaa-new/rule/0/match/0",  # prefix /a/b, newer
        "zzz-old/rule/4/match/0",  # /a + method
        "zzz-old/rule/5/match/0",  # /a + header
        "zzz-old/rule/6/match/0",  # /a + query param
        "zzz-old/rule/1/match/0",  # /a
        "zzz-old/rule/0/match/0",  # /
    ]


def test_hostname_intersection() -> None:
    assert effective_hostnames(None, ()) is None
    assert effective_hostnames("foo.com", ()) == ("foo.com",)
    assert effective_hostnames(None, ("A.com",)) == ("a.com",)
    assert effective_hostnames(
        "*.example.com", ("a.example.com", "a.b.example.com", "example.com", "x.org")
    ) == (
        "a.example.com",
        "a.b.example.com",
    )
    assert effective_hostnames("a.example.com", ("*.example.com",)) == ("a.example.com",)
    assert effective_hostnames("*.example.com", ("*.b.example.com", "*.com")) == (
        "*.b.example.com",
        "*.example.com",
    )
    assert effective_hostnames("foo.com", ("bar.com",)) == ()


def test_first_selecting_hostname() -> None:
    # Tried in order, most specific first: exact, wildcard, any.
    facts = selectors([("exact", "a.example.com"), ("wild", "*.example.com"), ("any", None)])
    assert first_selecting(facts, "a.example.com") == "exact"
    assert first_selecting(facts, "b.example.com") == "wild"
    assert first_selecting(facts, "x.b.example.com") == "wild"
    assert first_selecting(facts, "*.b.example.com") == "wild"  # a narrower wildcard
    assert first_selecting(facts, "example.com") == "any"  # the bare suffix is not covered
    assert first_selecting(facts, "*") == "any"  # a route without hostnames: only "any" takes it
    assert first_selecting(facts[:2], "*") is None
    assert first_selecting(facts[:2], "x.org") is None


def test_most_specific_listener_owns_a_domain() -> None:
    gw = gateway(
        "gw",
        listener("any"),
        listener("wild", hostname="*.example.com"),
        listener("exact", hostname="foo.example.com"),
    )
    r_any = http_route(
        "r-any",
        parents=(pref(section_name="any"),),
        hostnames=("foo.example.com", "bar.example.com", "other.org"),
    )
    r_wild = http_route("r-wild", parents=(pref(section_name="wild"),))
    r_exact = http_route("r-exact", parents=(pref(section_name="exact"),))
    res = run(base(gw, r_any, r_wild, r_exact))
    vh = vhosts(res)
    assert sorted(vh) == ["*.example.com", "foo.example.com", "other.org"]
    assert [r.name.split("/")[2] for r in vh["foo.example.com"].routes] == ["r-exact"]
    assert [r.name.split("/")[2] for r in vh["*.example.com"].routes] == ["r-wild"]
    assert [r.name.split("/")[2] for r in vh["other.org"].routes] == ["r-any"]
    # r-any still attached to "any" (status), even though two of its hosts belong to narrower
    # listeners
    assert listener_status(res, "gw", "any")["attachedRoutes"] == 1


def test_weights_and_grpc_method_matches() -> None:
    grpc_svc = service("g", m.ServicePort(name="grpc", port=50051))
    route = m.GRPCRoute(
        metadata=meta("gr"),
        spec=m.GRPCRouteSpec(
            parent_refs=(pref(),),
            rules=(
                m.GRPCRouteRule(
                    matches=(
                        m.GRPCRouteMatch(
                            method=m.GRPCMethodMatch(service="echo.Echo", method="Ping")
                        ),
                    ),
                    backend_refs=(
                        m.GRPCBackendRef(name="g", port=50051, weight=80),
                        m.GRPCBackendRef(name="svc", port=8080, weight=20),
                    ),
                ),
                m.GRPCRouteRule(
                    matches=(m.GRPCRouteMatch(method=m.GRPCMethodMatch(service="echo.Echo")),),
                    backend_refs=(m.GRPCBackendRef(name="g", port=50051),),
                ),
            ),
        ),
    )
    res = run(base(gateway(), grpc_svc, route))
    assert cond(parents_of(res, "GRPCRoute", "gr")[0], "Accepted") == ("True", "Accepted")
    (vh,) = vhosts(res).values()
    first, second = vh.routes
    assert first.match == ir.RouteMatch(path_type="Exact", path="/echo.Echo/Ping", grpc=True)
    assert [(w.cluster, w.weight) for w in first.backends] == [
        (f"{NS}/g/50051/h2c", 80),
        (f"{NS}/svc/8080/h2c", 20),
    ]
    assert (
        second.match.path_type == "RegularExpression" and second.match.path == r"/echo\.Echo/[^/]+"
    )


# ---------------------------------------------------------------- L4 and TLS ports


def _tls_secret(name: str = "cert") -> m.Secret:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gw")])
    now = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return m.Secret(
        metadata=meta(name),
        type="kubernetes.io/tls",
        string_data={
            "tls.crt": cert.public_bytes(serialization.Encoding.PEM).decode(),
            "tls.key": key_pem.decode(),
        },
    )


def _https(name: str, hostname: str | None = None) -> m.Listener:
    tls = m.ListenerTLSConfig(certificate_refs=(m.SecretObjectReference(name="cert"),))
    return listener(name, port=443, protocol="HTTPS", hostname=hostname, tls=tls)


def test_https_chains_answer_421_for_hosts_of_other_listeners() -> None:
    """The upstream GatewayHTTPSListenerDetectMisdirectedRequests layout: each chain (selected
    by SNI) serves its own hosts, 421 for hosts another listener of the port owns, 404 else."""
    gw = gateway(
        "gw",
        _https("any"),
        _https("exact", "second.org"),
        _https("wild", "*.wildcard.org"),
        _https("narrow", "fourth.wildcard.org"),
    )
    routes = [
        http_route(
            "r-any", parents=(pref(section_name="any"),), hostnames=("example.org", "second.org")
        ),
        http_route("r-exact", parents=(pref(section_name="exact"),)),
        http_route("r-wild", parents=(pref(section_name="wild"),)),
        http_route("r-narrow", parents=(pref(section_name="narrow"),)),
    ]
    res = run(base(gw, _tls_secret(), *routes))
    (port,) = res.xds[f"{NS}/gw"].ports
    chains = {fc.name.rsplit("/", 1)[1]: fc for fc in port.filter_chains}
    assert {n: fc.server_names for n, fc in chains.items()} == {
        "narrow": ("fourth.wildcard.org",),
        "exact": ("second.org",),
        "wild": ("*.wildcard.org",),
        "any": (),
    }

    def served(chain: str) -> dict[str, str]:
        """domain -> the route it serves, "421", or "404" (a routeless virtual host)."""
        http = chains[chain].http
        assert http is not None
        out = {}
        for vh in http.virtual_hosts:
            (domain,) = vh.domains
            if not vh.routes:
                out[domain] = "404"
            elif vh.routes[0].direct_status == 421:
                out[domain] = "421"
            else:
                out[domain] = vh.routes[0].name.split("/")[2]
        return out

    # second.org belongs to the listener "exact", even for r-any that names it
    assert served("any") == {
        "example.org": "r-any",
        "second.org": "421",
        "*.wildcard.org": "421",
        "fourth.wildcard.org": "421",
    }
    assert served("exact") == {
        "second.org": "r-exact",
        "*.wildcard.org": "421",
        "fourth.wildcard.org": "421",
        "*": "421",
    }
    assert served("wild") == {
        "*.wildcard.org": "r-wild",
        "second.org": "421",
        "fourth.wildcard.org": "421",
        "*": "421",
    }
    assert served("narrow") == {
        "fourth.wildcard.org": "r-narrow",
        "second.org": "421",
        "*.wildcard.org": "421",
        "*": "421",
    }

    # Without a catch-all listener, a host no listener matches is a 404 (no "*" virtual host);
    # a host of the chain's own listener without a route is a 404 too (routeless virtual host).
    gw2 = gateway("gw", _https("exact", "second.org"), _https("wild", "*.wildcard.org"))
    only = http_route("r-wild", parents=(pref(section_name="wild"),), hostnames=("a.wildcard.org",))
    res = run(base(gw2, _tls_secret(), only))
    (port,) = res.xds[f"{NS}/gw"].ports
    chains = {fc.name.rsplit("/", 1)[1]: fc for fc in port.filter_chains}
    assert served("wild") == {
        "a.wildcard.org": "r-wild",
        "*.wildcard.org": "404",
        "second.org": "421",
    }
    assert served("exact") == {"second.org": "404", "*.wildcard.org": "421"}


def test_tcp_oldest_route_wins_and_tls_passthrough_chains() -> None:
    gw = gateway(
        "gw",
        listener(
            "tcp",
            port=9000,
            protocol="TCP",
            allowed_routes=m.AllowedRoutes(kinds=(m.RouteGroupKind(kind="TCPRoute"),)),
        ),
        listener(
            "tls",
            port=443,
            protocol="TLS",
            hostname="*.example.com",
            tls=m.ListenerTLSConfig(mode="Passthrough"),
        ),
    )

    def tcp(name: str, svc: str, ts: str) -> m.TCPRoute:
        rule = m.L4RouteRule(backend_refs=(m.BackendRef(name=svc, port=8080),))
        return m.TCPRoute(
            metadata=meta(name, ts=ts), spec=m.L4RouteSpec(parent_refs=(pref(),), rules=(rule,))
        )

    tls = m.TLSRoute(
        metadata=meta("tr"),
        spec=m.TLSRouteSpec(
            parent_refs=(pref(),),
            hostnames=("a.example.com", "b.org"),
            rules=(m.L4RouteRule(backend_refs=(m.BackendRef(name="svc", port=8080),)),),
        ),
    )
    svc2 = service("svc2")
    res = run(
        base(
            gw,
            svc2,
            tcp("newer", "svc2", "2025-02-01T00:00:00Z"),
            tcp("older", "svc", "2025-01-01T00:00:00Z"),
            tls,
        )
    )
    assert listener_status(res, "gw", "tcp")["attachedRoutes"] == 2
    xgw = res.xds[f"{NS}/gw"]
    ports = {p.port: p for p in xgw.ports}
    assert ports[9000].tcp is not None
    assert [w.cluster for w in ports[9000].tcp.backends] == [f"{NS}/svc/8080/tcp"]
    (chain,) = ports[443].filter_chains
    assert chain.server_names == ("a.example.com",) and chain.tls is None
    assert chain.tcp is not None and [w.cluster for w in chain.tcp.backends] == [
        f"{NS}/svc/8080/tcp"
    ]


# ---------------------------------------------------------------- BackendTLSPolicy


def _ca_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _policy(
    name: str, svc: str, cm: str, host: str, ts: str, section: str | None = None
) -> m.BackendTLSPolicy:
    return m.BackendTLSPolicy(
        metadata=meta(name, ts=ts),
        spec=m.BackendTLSPolicySpec(
            target_refs=(
                m.LocalPolicyTargetReference(
                    group="", kind="Service", name=svc, section_name=section
                ),
            ),
            validation=m.BackendTLSPolicyValidation(
                ca_certificate_refs=(m.LocalObjectReference(group="", kind="ConfigMap", name=cm),),
                hostname=host,
                subject_alt_names=(m.SubjectAltName(type="Hostname", hostname="abc.example.com"),),
            ),
        ),
    )


def test_backend_tls_policy_applies_conflicts_and_invalid_ca() -> None:
    ca = _ca_pem()
    cms = [
        m.ConfigMap(metadata=meta("ca"), data={"ca.crt": ca}),
        m.ConfigMap(metadata=meta("junk"), data={"ca.crt": "not a certificate"}),
    ]
    bad_svc = service("bad")
    older = _policy("older", "svc", "ca", "abc.example.com", "2025-01-01T00:00:00Z")
    newer = _policy("newer", "svc", "ca", "other.example.com", "2025-03-01T00:00:00Z")
    invalid = _policy("invalid", "bad", "junk", "abc.example.com", "2025-01-01T00:00:00Z")
    unused = _policy("unused", "nobody", "ca", "x.example.com", "2025-01-01T00:00:00Z")
    routes = [
        http_route("r", m.HTTPRouteRule(matches=(prefix("/good"),), backend_refs=(bref("svc"),))),
        http_route("rb", m.HTTPRouteRule(matches=(prefix("/bad"),), backend_refs=(bref("bad"),))),
    ]
    res = run(base(gateway(), bad_svc, *cms, newer, older, invalid, unused, *routes))

    def ancestor(name: str) -> dict[str, Any]:
        ancestors: list[dict[str, Any]] = res.statuses[("BackendTLSPolicy", NS, name)]["ancestors"]  # type: ignore[assignment]
        (entry,) = ancestors
        assert entry["ancestorRef"] == {
            "group": G,
            "kind": "Gateway",
            "namespace": NS,
            "name": "gw",
        }
        return entry

    assert cond(ancestor("older"), "Accepted") == ("True", "Accepted")
    assert cond(ancestor("newer"), "Accepted") == ("False", "Conflicted")
    assert cond(ancestor("invalid"), "Accepted") == ("False", "NoValidCACertificate")
    assert cond(ancestor("invalid"), "ResolvedRefs") == ("False", "InvalidCACertificateRef")
    assert res.statuses[("BackendTLSPolicy", NS, "unused")] == {"ancestors": []}

    (cl,) = (c for c in res.xds[f"{NS}/gw"].clusters if c.name.startswith(f"{NS}/svc/"))
    assert cl.tls is not None
    assert cl.tls.sni == "abc.example.com" and cl.tls.ca_pem.strip() == ca.strip()
    assert cl.tls.subject_alt_names == (ir.SANMatch(type="DNS", value="abc.example.com"),)
    # the Service whose policy is invalid is never reached in clear text: its route answers 500
    (vh,) = vhosts(res).values()
    by_name = {r.name.split("/")[2]: r for r in vh.routes}
    assert by_name["rb"].direct_status == 500
    # and the route says so (httproute_types.go: an unmet BackendTLSPolicy makes the backendRef
    # invalid)
    assert cond(parents_of(res, "HTTPRoute", "rb")[0], "ResolvedRefs") == (
        "False",
        "InvalidBackendTLS",
    )


# ---------------------------------------------------------------- determinism


def test_shuffled_input_gives_byte_identical_result() -> None:
    objs: list[Any] = [
        gateway_class(),
        gateway("gw", listener("http"), listener("wild", port=8080, hostname="*.example.com")),
        gateway("gw2", listener("http")),
        service("svc"),
        service("svc2"),
        slice_for("svc", "10.0.0.2", "10.0.0.1", suffix="a"),
        slice_for("svc", "10.0.0.3", suffix="b"),
        slice_for("svc2", "10.0.1.1"),
    ]
    for i in range(12):
        rule = m.HTTPRouteRule(
            matches=(prefix(f"/p{i % 4}"),),
            backend_refs=(bref("svc", weight=i + 1), bref("svc2"), bref("missing")),
        )
        parents = (pref(), pref("gw2")) if i % 2 else (pref(port=8080),)
        objs.append(
            http_route(
                f"r{i}",
                rule,
                parents=parents,
                hostnames=(f"h{i % 3}.example.com",),
                ts=f"2025-01-0{1 + i % 3}T00:00:00Z",
            )
        )

    def encoded(snap: Snapshot) -> bytes:
        res = run(snap)
        # statuses are keyed by tuples: encode the items in their (deterministic) order
        return msgspec.json.encode([list(res.statuses.items()), res.infra, res.xds])

    expected = encoded(Snapshot.from_objects(objs))
    assert b"httproute/infra/r11" in expected
    rng = random.Random(7)
    for _ in range(5):
        shuffled = objs[:]
        rng.shuffle(shuffled)
        assert encoded(Snapshot.from_objects(shuffled)) == expected
