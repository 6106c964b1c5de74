"""Incremental xDS snapshots: equal to a cold ``make_snapshot(build(gw))``, at the cost of what
changed.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from gateweave import ir
from gateweave.sinks.xds import XdsPublisher
from gateweave.snapshot import Snapshot
from gateweave.store import Store
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.options import DataplaneState
from gateweave.xds import clusters as xds_clusters
from gateweave.xds import incremental
from gateweave.xds import routes as xds_routes
from gateweave.xds.build import build
from gateweave.xds.incremental import GatewaySnapshots, IncrementalSnapshots
from gateweave.xds.server import AdsServer
from gateweave.xds.snapshot_cache import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    NodeSnapshot,
    make_snapshot,
)
from gateweave_bench.objects import generate
from gateweave_bench.run import decode_all
from tests.support.conformance_objects import all_case_files, case_objects

replace = msgspec.structs.replace

# ---------------------------------------------------------------- helpers


def _flat(snapshot: NodeSnapshot) -> tuple[Any, ...]:
    """Everything observable of a snapshot: version, type and name order, versions, bytes."""
    return (
        snapshot.version,
        list(snapshot.resources),
        [
            [(name, r.name, r.version, r.body.type_url, r.body.value) for name, r in table.items()]
            for table in snapshot.resources.values()
        ],
    )


def _cold(gw: ir.XdsGateway) -> NodeSnapshot:
    """The reference: a full build from empty caches, packed and versioned from scratch."""
    xds_routes.clear_caches()
    return make_snapshot(build(gw).by_type())


def _assert_same(got: NodeSnapshot, gw: ir.XdsGateway) -> None:
    want = _cold(gw)
    assert _flat(got) == _flat(want)
    assert got == want


@functools.cache
def _conformance_gateways() -> tuple[ir.XdsGateway, ...]:
    out: list[ir.XdsGateway] = []
    for case_file in all_case_files():
        out.extend(translate(Snapshot.from_objects(list(case_objects(case_file)))).xds.values())
    return tuple(out)


@functools.cache
def _bench_gateways(routes: int) -> tuple[ir.XdsGateway, ...]:
    """The bench's Gateways (HTTP on 80, HTTPS with two SNI chains on 443)."""
    store = Store()
    for decoded in decode_all(generate(routes, 7).manifests):
        store.apply(decoded)
    return tuple(translate(store.snapshot(), TranslateOptions()).xds.values())


# ---------------------------------------------------------------- IR edits that keep what they do
# not touch


def _configs(gw: ir.XdsGateway) -> list[tuple[int, int | None]]:
    """(port index, chain index or None) of every RouteConfig of ``gw``."""
    out: list[tuple[int, int | None]] = []
    for i, port in enumerate(gw.ports):
        if port.http is not None:
            out.append((i, None))
        out += [(i, j) for j, chain in enumerate(port.filter_chains) if chain.http is not None]
    return out


def _with_config(
    gw: ir.XdsGateway,
    where: tuple[int, int | None],
    edit: Callable[[ir.RouteConfig], ir.RouteConfig],
) -> ir.XdsGateway:
    """``gw`` with one RouteConfig edited: new RouteConfig, Port and XdsGateway, the rest the same
    instances.
    """
    i, j = where
    port = gw.ports[i]
    if j is None:
        assert port.http is not None
        port = replace(port, http=edit(port.http))
    else:
        chains = list(port.filter_chains)
        config = chains[j].http
        assert config is not None
        chains[j] = replace(chains[j], http=edit(config))
        port = replace(port, filter_chains=tuple(chains))
    ports = list(gw.ports)
    ports[i] = port
    return replace(gw, ports=tuple(ports))


def _vhosts(
    edit: Callable[[list[ir.VirtualHost]], None],
) -> Callable[[ir.RouteConfig], ir.RouteConfig]:
    def apply(config: ir.RouteConfig) -> ir.RouteConfig:
        vhosts = list(config.virtual_hosts)
        edit(vhosts)
        return replace(config, virtual_hosts=tuple(vhosts))

    return apply


def _changed_vhost(vh: ir.VirtualHost, n: int) -> ir.VirtualHost:
    if not vh.routes:
        return replace(vh, domains=(*vh.domains, f"extra-{n}.example"))
    first = replace(vh.routes[0], timeout_s=float(n % 50 + 1))
    return replace(vh, routes=(first, *vh.routes[1:]))


Edit = Callable[[ir.XdsGateway, random.Random, int], ir.XdsGateway | None]


def _edit_vhost(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    configs = [c for c in _configs(gw) if _config_at(gw, c).virtual_hosts]
    if not configs:
        return None
    where = rng.choice(configs)

    def edit(vhosts: list[ir.VirtualHost]) -> None:
        k = rng.randrange(len(vhosts))
        vhosts[k] = _changed_vhost(vhosts[k], n)

    return _with_config(gw, where, _vhosts(edit))


def _equal_copies(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    """Equal values, new instances: a virtual host, a cluster, or the whole Gateway."""
    choice = rng.randrange(3)
    if choice == 0 and gw.clusters:
        listed = list(gw.clusters)
        k = rng.randrange(len(listed))
        listed[k] = msgspec.json.decode(msgspec.json.encode(listed[k]), type=ir.Cluster)
        return replace(gw, clusters=tuple(listed))
    if choice == 1:
        return msgspec.json.decode(msgspec.json.encode(gw), type=ir.XdsGateway)
    configs = [c for c in _configs(gw) if _config_at(gw, c).virtual_hosts]
    if not configs:
        return None

    def copy(vhosts: list[ir.VirtualHost]) -> None:
        k = rng.randrange(len(vhosts))
        vhosts[k] = msgspec.json.decode(msgspec.json.encode(vhosts[k]), type=ir.VirtualHost)

    return _with_config(gw, rng.choice(configs), _vhosts(copy))


def _toggle_filters(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    """A route that turns a connection manager filter on (or off): its Listener changes."""
    configs = [c for c in _configs(gw) if any(vh.routes for vh in _config_at(gw, c).virtual_hosts)]
    if not configs:
        return None

    def edit(vhosts: list[ir.VirtualHost]) -> None:
        k = rng.choice([i for i, vh in enumerate(vhosts) if vh.routes])
        first = vhosts[k].routes[0]
        kinds = (
            ()
            if first.compression
            else (ir.Compressor(kind=rng.choice(("Gzip", "Brotli", "Zstd"))),)
        )
        vhosts[k] = replace(
            vhosts[k], routes=(replace(first, compression=kinds), *vhosts[k].routes[1:])
        )

    return _with_config(gw, rng.choice(configs), _vhosts(edit))


def _insert_remove_swap(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    configs = _configs(gw)
    if not configs:
        return None
    op = rng.randrange(3)

    def edit(vhosts: list[ir.VirtualHost]) -> None:
        if op == 0 or len(vhosts) < 2:
            vhosts.insert(
                rng.randrange(len(vhosts) + 1),
                ir.VirtualHost(name=f"inserted-{n}", domains=(f"inserted-{n}.example",)),
            )
        elif op == 1:
            del vhosts[rng.randrange(len(vhosts))]
        else:
            a, b = rng.sample(range(len(vhosts)), 2)
            vhosts[a], vhosts[b] = vhosts[b], vhosts[a]

    return _with_config(gw, rng.choice(configs), _vhosts(edit))


def _edit_cluster(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    """New endpoints (the CLA changes) or a new protocol (the
    Cluster changes, so its CLA version).
    """
    if not gw.clusters:
        return None
    listed = list(gw.clusters)
    k = rng.randrange(len(listed))
    c = listed[k]
    if rng.random() < 0.5:
        listed[k] = replace(
            c, endpoints=(*c.endpoints, ir.Endpoint(address=f"127.0.{n % 200}.9", port=8000 + n))
        )
    else:
        listed[k] = replace(c, protocol="HTTP2" if c.protocol != "HTTP2" else "HTTP1")
    return replace(gw, clusters=tuple(listed))


def _move(gw: ir.XdsGateway, rng: random.Random, n: int) -> ir.XdsGateway | None:
    """A new address (every Listener changes), or a port dropped."""
    if rng.random() < 0.5 or len(gw.ports) < 2:
        return replace(gw, address=f"127.20.{n % 250}.{rng.randrange(1, 250)}")
    ports = list(gw.ports)
    del ports[rng.randrange(len(ports))]
    return replace(gw, ports=tuple(ports))


def _config_at(gw: ir.XdsGateway, where: tuple[int, int | None]) -> ir.RouteConfig:
    i, j = where
    config = gw.ports[i].http if j is None else gw.ports[i].filter_chains[j].http
    assert config is not None
    return config


EDITS: tuple[Edit, ...] = (
    _edit_vhost,
    _edit_vhost,
    _toggle_filters,
    _equal_copies,
    _insert_remove_swap,
    _edit_cluster,
    _move,
)


def _walk(start: ir.XdsGateway, rng: random.Random, steps: int) -> Iterator[ir.XdsGateway]:
    """A bounded sequence of Gateways, each an edit of the previous one or an earlier one again."""
    history = [start]
    gw = start
    for n in range(steps):
        if rng.random() < 0.12:
            gw = rng.choice(history)  # back to an earlier IR (the same instance)
        else:
            edited = rng.choice(EDITS)(gw, rng, n)
            gw = edited if edited is not None else gw
        history.append(gw)
        yield gw


# ---------------------------------------------------------------- equal to a cold build


def test_every_conformance_gateway_equals_a_cold_build() -> None:
    """A first build, a rebuild of the same IR, and one builder taking every Gateway of
    every case in turn under one name (so each build follows a different IR)."""
    gateways = _conformance_gateways()
    protocols = {port.protocol for gw in gateways for port in gw.ports}
    assert protocols == {"HTTP", "TLS", "TCP", "UDP"} and len(gateways) > 100
    shared = GatewaySnapshots()
    for gw in gateways:
        fresh = GatewaySnapshots()
        first = fresh.snapshot(gw)
        _assert_same(first, gw)
        assert fresh.snapshot(gw) is first
        assert _flat(fresh.snapshot(replace(gw))) == _flat(first)
        _assert_same(shared.snapshot(gw), gw)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sequences_of_partly_reused_ir_equal_cold_builds(seed: int) -> None:
    """Edits that keep every untouched instance (one virtual host, inserted, removed or
    swapped ones, equal copies, clusters, addresses, ports) and returns to earlier IRs."""
    rng = random.Random(seed)
    conformance = [gw for gw in _conformance_gateways() if _configs(gw) or gw.clusters]
    starts = [*_bench_gateways(120), *rng.sample(conformance, 6)]
    for start in starts:
        builder = GatewaySnapshots()
        _assert_same(builder.snapshot(start), start)
        for gw in _walk(start, rng, 40):
            _assert_same(builder.snapshot(gw), gw)


def test_equal_snapshots_whatever_the_history() -> None:
    """The snapshot of an IR does not depend on what the builder saw before."""
    gw0, gw1 = _bench_gateways(120)[:2]
    rng = random.Random(5)
    target = list(_walk(gw0, rng, 12))[-1]
    direct = GatewaySnapshots().snapshot(target)
    builder = GatewaySnapshots()
    for gw in (gw1, gw0, *list(_walk(gw0, random.Random(6), 8)), target):
        got = builder.snapshot(gw)
    assert _flat(got) == _flat(direct)


# ---------------------------------------------------------------- work proportional to what changed


class _Counter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {}
        for module, name in (
            (xds_routes, "virtual_host_field"),
            (xds_clusters, "cluster"),
            (xds_clusters, "load_assignment"),
            (incremental.listeners, "http_listener"),
            (incremental.listeners, "tls_listener"),
            (incremental, "pack"),
        ):
            monkeypatch.setattr(module, name, self._counted(name, getattr(module, name)))

    def _counted(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper

    def take(self) -> dict[str, int]:
        out, self.calls = self.calls, {}
        return out


def test_one_changed_virtual_host_builds_and_versions_one_virtual_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gw = _bench_gateways(120)[0]
    counter = _Counter(monkeypatch)
    builder = GatewaySnapshots()
    first = builder.snapshot(gw)
    calls = counter.take()
    vhosts = sum(len(_config_at(gw, c).virtual_hosts) for c in _configs(gw))
    assert calls["virtual_host_field"] == vhosts > 50
    assert calls["cluster"] == len(gw.clusters) > 5

    # One virtual host of the HTTPS chain with the most of them: a new Port, chain, RouteConfig.
    where = max(_configs(gw), key=lambda c: len(_config_at(gw, c).virtual_hosts))
    assert where[1] is not None
    changed = _with_config(gw, where, _vhosts(lambda v: v.__setitem__(3, _changed_vhost(v[3], 1))))
    second = builder.snapshot(changed)
    # The port's Listener is not rebuilt (no filter of its connection manager was turned on
    # or off); one virtual host is built; one resource, the RouteConfiguration, is versioned
    # anew.
    assert counter.take() == {"virtual_host_field": 1, "pack": 1}
    _assert_same(second, changed)
    counter.take()  # (the cold build's calls)
    name = _config_at(gw, where).name
    for type_url, table in second.resources.items():
        for resource_name, resource in table.items():
            same = resource is first.of(type_url)[resource_name]
            assert same == (type_url != ROUTE or resource_name != name), (type_url, resource_name)
    # Untouched types keep their tables.
    assert second.of(CLUSTER) is first.of(CLUSTER) and second.of(ENDPOINT) is first.of(ENDPOINT)

    # The same virtual hosts in a new RouteConfig/Port/Gateway: nothing is built or versioned.
    rewrapped = _with_config(changed, where, lambda config: replace(config))
    third = builder.snapshot(rewrapped)
    assert counter.take() == {}
    assert third.version == second.version

    # A cluster's endpoints: its CLA alone is built and versioned.
    listed = list(rewrapped.clusters)
    listed[0] = replace(listed[0], endpoints=listed[0].endpoints[:1])
    fourth = builder.snapshot(replace(rewrapped, clusters=tuple(listed)))
    assert counter.take() == {"cluster": 1, "load_assignment": 1, "pack": 1}
    assert fourth.of(CLUSTER) is third.of(CLUSTER)
    assert fourth.of(ROUTE) is third.of(ROUTE)


def test_a_route_turning_a_filter_on_rebuilds_its_listener(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Listener follows its routes' connection manager filters: compression turned on by
    one route adds the compressor filter, turned off again removes it; a change of the same
    route that turns nothing on or off keeps the Listener's bytes (and resource)."""
    gw = _bench_gateways(120)[0]
    where = next(c for c in _configs(gw) if c[1] is None)  # the plain HTTP port
    builder = GatewaySnapshots()
    first = builder.snapshot(gw)
    counter = _Counter(monkeypatch)

    def compress(kinds: tuple[ir.Compressor, ...], timeout: float | None = None) -> ir.XdsGateway:
        def edit(vhosts: list[ir.VirtualHost]) -> None:
            k = next(i for i, vh in enumerate(vhosts) if vh.routes)
            route = replace(vhosts[k].routes[0], compression=kinds)
            if timeout is not None:
                route = replace(route, timeout_s=timeout)
            vhosts[k] = replace(vhosts[k], routes=(route, *vhosts[k].routes[1:]))

        return _with_config(gw, where, _vhosts(edit))

    on = compress((ir.Compressor(kind="Gzip"),))
    second = builder.snapshot(on)
    assert counter.take()["http_listener"] == 1
    _assert_same(second, on)
    listener = gw.ports[where[0]].name
    assert second.of(LISTENER)[listener].version != first.of(LISTENER)[listener].version
    assert b"envoy.compression.gzip.compressor" in second.of(LISTENER)[listener].body.value
    counter.take()

    still_on = compress((ir.Compressor(kind="Gzip"),), timeout=7.0)
    third = builder.snapshot(still_on)
    assert "http_listener" not in counter.take()
    _assert_same(third, still_on)
    assert third.of(LISTENER)[listener] is second.of(LISTENER)[listener]
    counter.take()

    off = compress(())
    fourth = builder.snapshot(off)
    assert counter.take()["http_listener"] == 1
    _assert_same(fourth, off)
    assert fourth.of(LISTENER)[listener].version == first.of(LISTENER)[listener].version


def test_an_unchanged_gateway_costs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    gw = _bench_gateways(120)[1]
    builder = GatewaySnapshots()
    first = builder.snapshot(gw)
    counter = _Counter(monkeypatch)
    assert builder.snapshot(gw) is first
    assert builder.snapshot(replace(gw)) is first  # same ports and clusters, new Gateway
    assert counter.take() == {}


# ---------------------------------------------------------------- errors, several Gateways, the
# publisher


def test_an_ir_build_rejects_is_rejected_and_the_previous_build_kept() -> None:
    gw = _bench_gateways(120)[0]
    builder = GatewaySnapshots()
    first = builder.snapshot(gw)
    clash = replace(gw, clusters=(*gw.clusters, replace(gw.clusters[0], protocol="TCP")))
    with pytest.raises(ValueError, match="two different clusters named"):
        build(clash)
    with pytest.raises(ValueError, match="two different clusters named"):
        builder.snapshot(clash)
    same_name = replace(gw, ports=(*gw.ports, replace(gw.ports[0], port=81)))
    with pytest.raises(ValueError, match="two different Listener resources named"):
        build(same_name)
    with pytest.raises(ValueError, match="two different Listener resources named"):
        builder.snapshot(same_name)
    assert builder.snapshot(gw) is first
    edited = _edit_vhost(gw, random.Random(1), 1)
    assert edited is not None
    _assert_same(builder.snapshot(edited), edited)


def test_incremental_snapshots_keep_one_builder_per_gateway() -> None:
    gw0, gw1 = _bench_gateways(120)[:2]
    snapshots = IncrementalSnapshots()
    a, b = snapshots.snapshot(gw0), snapshots.snapshot(gw1)
    assert snapshots.snapshot(gw0) is a and snapshots.snapshot(gw1) is b
    assert gw0.name in snapshots and gw1.name in snapshots
    snapshots.forget(gw0.name)
    assert gw0.name not in snapshots
    again = snapshots.snapshot(gw0)
    assert again is not a and _flat(again) == _flat(a)


def test_the_publisher_serves_incremental_snapshots_equal_to_cold_ones() -> None:
    server = AdsServer()
    reports: list[tuple[str, DataplaneState | None]] = []
    publisher = XdsPublisher(server, lambda name, state: reports.append((name, state)))
    gw0, gw1 = _bench_gateways(120)[:2]
    publisher.update({gw0.name: gw0, gw1.name: gw1}, [])
    edited = _edit_vhost(gw0, random.Random(3), 3)
    assert edited is not None
    publisher.update({gw0.name: edited}, [])
    for name, gw in ((gw0.name, edited), (gw1.name, gw1)):
        served = server.snapshot(name)
        assert served is not None
        assert _flat(served) == _flat(_cold(gw))
    broken = replace(gw1, clusters=(*gw1.clusters, replace(gw1.clusters[0], protocol="TCP")))
    publisher.update({gw1.name: broken}, [])
    assert reports[-1][0] == gw1.name and reports[-1][1] is not None and not reports[-1][1].acked
    assert server.snapshot(gw1.name) is not None  # the last good one stays
    publisher.update({}, [gw0.name])
    assert server.snapshot(gw0.name) is None and gw0.name not in publisher.snapshots
