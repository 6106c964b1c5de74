"""The xDS builder's memoised virtual hosts and routes: same bytes as a cold build, and a
one-route change builds one route."""

from __future__ import annotations

import msgspec
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from gateweave import ir
from gateweave.api.decode import decode
from gateweave.snapshot import Snapshot
from gateweave.store import Store
from gateweave.translate import translate
from gateweave.xds import listeners
from gateweave.xds import routes as xds_routes
from gateweave.xds.build import build
from gateweave.xds.resources import serialize
from gateweave_bench import harness as h
from gateweave_bench.latency import route_doc
from tests.support.conformance_objects import all_case_files, case_objects


def _bytes(gw: ir.XdsGateway) -> list[bytes]:
    return [
        f"{type_url}:{name}:".encode() + serialize(msg)
        for type_url, items in build(gw).by_type().items()
        for name, msg in items.items()
    ]


def _cold(gw: ir.XdsGateway) -> list[bytes]:
    xds_routes.clear_caches()
    return _bytes(gw)


def _direct(config: ir.RouteConfig, port: int, https: bool) -> route_pb2.RouteConfiguration:
    """The RouteConfiguration built message by message, without the caches."""
    return route_pb2.RouteConfiguration(
        name=config.name,
        ignore_port_in_host_matching=True,
        virtual_hosts=[
            rc.VirtualHost(
                name=vh.name,
                domains=list(vh.domains),
                routes=[
                    built
                    for r in vh.routes
                    for built in xds_routes.routes(r, port, https, xds_routes._exact_host(vh))
                ],
            )
            for vh in config.virtual_hosts
        ],
    )


def _configs(gw: ir.XdsGateway) -> list[tuple[ir.RouteConfig, int, bool]]:
    out = [(p.http, p.port, False) for p in gw.ports if p.protocol == "HTTP" and p.http is not None]
    out += [
        (c.http, p.port, True)
        for p in gw.ports
        if p.protocol == "TLS"
        for c in p.filter_chains
        if c.http
    ]
    return out


def test_warm_builds_equal_cold_and_direct_builds_for_every_conformance_case() -> None:
    """Every case's Gateways built with a cache warmed by every other case (other ports,
    HTTPS chains, the same route names) give the bytes of a build from an empty cache,
    and each RouteConfiguration the bytes of one built message by message."""
    gateways: list[ir.XdsGateway] = []
    for case_file in all_case_files():
        gateways.extend(
            translate(Snapshot.from_objects(list(case_objects(case_file)))).xds.values()
        )
    configs = [c for gw in gateways for c in _configs(gw)]
    assert any(https for _, _, https in configs) and len(configs) > 50
    xds_routes.clear_caches()
    warm = [_bytes(gw) for gw in gateways]  # fills the cache across every case
    again = [_bytes(gw) for gw in gateways]  # served from it
    assert xds_routes._VHOSTS.cache_info().hits > 0
    assert again == warm
    assert [_cold(gw) for gw in gateways] == warm
    for config, port, https in configs:
        built = xds_routes.route_configuration(config, port, https)
        assert built == _direct(config, port, https)
        assert serialize(built) == serialize(_direct(config, port, https))


def _bench_gateway(routes: int, version_of: dict[int, int]) -> ir.XdsGateway:
    store = Store()
    docs = [
        h.gateway_class(),
        h.gateway("bench", "127.40.200.1", [h.listener("http", "HTTP", 8080)]),
        *h.service("backend", 80, 9999),
        *(route_doc(i, version_of.get(i, 0)) for i in range(routes)),
    ]
    for doc in docs:
        decoded, errors = decode(doc, "test")
        assert decoded is not None, errors
        store.apply(decoded, source="test")
    return translate(store.snapshot()).xds["default/bench"]


def test_a_one_route_change_builds_one_route() -> None:
    before = _bench_gateway(40, {})
    after = _bench_gateway(40, {7: 1})
    xds_routes.clear_caches()
    _bytes(before)
    vh_misses = xds_routes._VHOSTS.cache_info().misses
    route_misses = xds_routes._ROUTES.cache_info().misses
    assert vh_misses == 40 and route_misses == 40
    changed = _bytes(after)
    assert xds_routes._VHOSTS.cache_info().misses == vh_misses + 1
    assert xds_routes._ROUTES.cache_info().misses == route_misses + 1
    assert changed == _cold(after)
    assert changed != _cold(before)


def test_the_caches_are_bounded_and_keyed_by_value() -> None:
    assert xds_routes._VHOSTS.cache_info().maxsize == xds_routes.VHOST_CACHE_SIZE
    assert xds_routes._ROUTES.cache_info().maxsize == xds_routes.ROUTE_CACHE_SIZE
    gw = _bench_gateway(3, {})
    xds_routes.clear_caches()
    first = _bytes(gw)
    copy = msgspec.json.decode(msgspec.json.encode(gw), type=ir.XdsGateway)  # equal, not identical
    assert copy == gw and copy is not gw
    assert _bytes(copy) == first
    assert xds_routes._VHOSTS.cache_info().hits == 3


def test_listener_filters_follow_a_replaced_virtual_host_not_an_equal_one() -> None:
    """The HCM's filters come from the routes that need one, memoised per virtual host by
    identity: a new virtual host instance is looked at again, whatever it equals."""
    plain = ir.Route(name="httproute/ns/a/rule/0/match/0", match=ir.RouteMatch(), direct_status=200)
    gzip = msgspec.structs.replace(plain, compression=(ir.Compressor(kind="Gzip"),))
    vh = ir.VirtualHost(name="v", domains=("a.test",), routes=(plain,))
    config = ir.RouteConfig(name="ns/gw/80", virtual_hosts=(vh,))
    assert listeners.filter_routes(config) == []
    assert listeners.filter_routes(config) == []  # memoised
    with_gzip = ir.RouteConfig(
        name="ns/gw/80", virtual_hosts=(msgspec.structs.replace(vh, routes=(plain, gzip)),)
    )
    assert listeners.filter_routes(with_gzip) == [gzip]
    port = ir.Port(name="ns/gw/80", port=80, protocol="HTTP", http=with_gzip)
    gw = ir.XdsGateway(name="ns/gw", address="127.0.0.1", ports=(port,))
    assert "envoy.filters.http.compressor/gzip" in str(listeners.http_listener(gw, port))
    # every field the filters are chosen by is one ir.Route has
    assert set(listeners.FILTER_FIELDS) <= set(ir.Route.__struct_fields__)


def test_a_route_is_built_once_for_every_listener_unless_a_redirect_reads_the_listener() -> None:
    """A route's Envoy routes depend on the listener (port, scheme, exact hostname) only
    through a redirect's defaults: without one, the HTTP and the HTTPS listener share one
    build (and its bytes); with one, each listener gets its own, and they differ."""
    plain = ir.Route(name="httproute/ns/a/rule/0/match/0", match=ir.RouteMatch(), direct_status=200)
    redirect = ir.Route(
        name="httproute/ns/b/rule/0/match/0",
        match=ir.RouteMatch(),
        redirect=ir.Redirect(status_code=302),
    )
    vh = ir.VirtualHost(name="v", domains=("a.test",), routes=(plain, redirect))
    xds_routes.clear_caches()
    http = xds_routes.virtual_host_field(vh, 8080, False)
    https = xds_routes.virtual_host_field(vh, 443, True)
    assert xds_routes._ROUTES.cache_info().misses == 3  # plain once, redirect twice
    assert http[1] is https[1]  # the plain route's bytes, held once
    assert http[2] != https[2]  # the redirect keeps the listener's port (8080)
    config = ir.RouteConfig(name="c", virtual_hosts=(vh,))
    for port, tls in ((80, False), (443, True), (8080, False)):
        assert serialize(xds_routes.route_configuration(config, port, tls)) == serialize(
            _direct(config, port, tls)
        )


def test_a_full_memo_drops_its_oldest_entry() -> None:
    memo: xds_routes._Memo[bytes] = xds_routes._Memo(2)
    for key in "abc":
        assert memo.get(key) is None
        memo.put(key, key.encode())
    assert memo.get("a") is None  # the oldest, dropped for "c"
    assert memo.get("b") == b"b" and memo.get("c") == b"c"
    assert memo.cache_info() == (2, 4, 2, 2)
    memo.cache_clear()
    assert memo.cache_info() == (0, 0, 2, 0)
