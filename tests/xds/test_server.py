"""The ADS server against a real Envoy (SotW and Delta), started by HostInfra.

Each test uses its own loopback addresses (127.30.<test>.x) and free ports, and stops
every process it started.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import any_pb2, duration_pb2, wrappers_pb2
from google.protobuf.message import Message
from prometheus_client import CollectorRegistry

from gateweave.infra.host import HostInfra, free_port
from gateweave.infra.statedir import running
from gateweave.ir import InfraGateway
from gateweave.xds.server import AdsServer, NodeStatus, split_node
from gateweave.xds.snapshot_cache import CLUSTER, ENDPOINT, LISTENER, ROUTE, make_snapshot

T = TypeVar("T")
GW = "default/gw"

# ---------------------------------------------------------------- resources by hand


def _ads() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.ApiVersion.V3,
    )


def _any(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def listener(name: str, host: str, port: int, route: str = "main") -> listener_pb2.Listener:
    hcm = hcm_pb2.HttpConnectionManager(
        stat_prefix=name,
        rds=hcm_pb2.Rds(config_source=_ads(), route_config_name=route),
        http_filters=[
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.router", typed_config=_any(router_pb2.Router())
            )
        ],
    )
    return listener_pb2.Listener(
        name=name,
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=host, port_value=port)
        ),
        enable_reuse_port=wrappers_pb2.BoolValue(value=False),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    listener_components_pb2.Filter(
                        name="envoy.filters.network.http_connection_manager",
                        typed_config=_any(hcm),
                    )
                ]
            )
        ],
    )


def direct(prefix: str, status: int, body: str = "") -> route_components_pb2.Route:
    return route_components_pb2.Route(
        match=route_components_pb2.RouteMatch(prefix=prefix),
        direct_response=route_components_pb2.DirectResponseAction(
            status=status, body=base_pb2.DataSource(inline_string=body)
        ),
    )


def to_cluster(prefix: str, cluster: str) -> route_components_pb2.Route:
    return route_components_pb2.Route(
        match=route_components_pb2.RouteMatch(prefix=prefix),
        route=route_components_pb2.RouteAction(cluster=cluster),
    )


def routes(
    *entries: route_components_pb2.Route, name: str = "main"
) -> route_pb2.RouteConfiguration:
    return route_pb2.RouteConfiguration(
        name=name,
        virtual_hosts=[route_components_pb2.VirtualHost(name="all", domains=["*"], routes=entries)],
    )


def eds_cluster(name: str, connect_timeout: float = 1.0) -> cluster_pb2.Cluster:
    timeout = duration_pb2.Duration()
    timeout.FromNanoseconds(int(connect_timeout * 1e9))
    return cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.EDS,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=_ads()),
        connect_timeout=timeout,
    )


def cla(name: str, host: str, port: int) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[
                    endpoint_components_pb2.LbEndpoint(
                        endpoint=endpoint_components_pb2.Endpoint(
                            address=address_pb2.Address(
                                socket_address=address_pb2.SocketAddress(
                                    address=host, port_value=port
                                )
                            )
                        )
                    )
                ]
            )
        ],
    )


def snapshot(
    listeners: Sequence[listener_pb2.Listener],
    route_configs: Sequence[route_pb2.RouteConfiguration],
    clusters: Sequence[cluster_pb2.Cluster] = (),
    assignments: Sequence[endpoint_pb2.ClusterLoadAssignment] = (),
) -> dict[str, dict[str, Message]]:
    return {
        LISTENER: {x.name: x for x in listeners},
        ROUTE: {x.name: x for x in route_configs},
        CLUSTER: {x.name: x for x in clusters},
        ENDPOINT: {x.cluster_name: x for x in assignments},
    }


# ---------------------------------------------------------------- plumbing


async def fetch(host: str, port: int, path: str, timeout: float = 1.0) -> tuple[int, str] | None:
    """GET over a fresh connection: (status, body), or None if it could not connect.

    Reads ``Content-Length`` bytes rather than up to EOF: Envoy delays closing after a
    local reply (``delayed_close_timeout``, 1 s).
    """
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode()
                )
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ", 2)[1])
                headers = {}
                for line in lines[1:]:
                    key, _, value = line.partition(":")
                    headers[key.strip().lower()] = value.strip()
                if headers.get("transfer-encoding") == "chunked":
                    body = b""
                    while size := int((await reader.readline()).strip(), 16):
                        body += await reader.readexactly(size + 2)
                        body = body[:-2]
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
        return None
    return status, body.decode(errors="replace")


async def eventually(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: T | None = None
    while True:
        last = await check()
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what} (last: {last!r})")
        await asyncio.sleep(0.01)


@contextmanager
def backend(host: str, body: str) -> Iterator[int]:
    """A tiny HTTP server answering ``body`` (TCP_NODELAY: no Nagle delays)."""

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)


@dataclass
class Plane:
    server: AdsServer
    infra: HostInfra
    registry: CollectorRegistry
    statuses: list[tuple[str, NodeStatus]]

    async def up(self, host: str) -> None:
        gw = InfraGateway(
            name=GW, namespace="default", gateway_name="gw", gateway_class="gateweave", address=host
        )
        await self.infra.reconcile({GW: gw})

    async def acked(self, timeout: float = 2.0) -> NodeStatus:
        async def check() -> NodeStatus | None:
            status = self.server.status(GW)
            return status if status.acked else None

        return await eventually(check, timeout, "snapshot ACKed")

    async def admin(self, path: str) -> str:
        info = self.infra.process(GW)
        assert info is not None
        host, port = info.admin_address.rsplit(":", 1)
        result = await fetch(host, int(port), path)
        assert result is not None and result[0] == 200, result
        return result[1]


@pytest.fixture(params=["sotw", "delta"])
async def plane(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Plane]:
    registry = CollectorRegistry()
    server = AdsServer(registry=registry, ack_timeout=3.0)
    statuses: list[tuple[str, NodeStatus]] = []
    server.on_status(lambda node, status: statuses.append((node, status)))
    port = await server.start("127.0.0.1", 0)
    infra = HostInfra(
        xds_host="127.0.0.1",
        xds_port=port,
        work_dir=tmp_path,
        delta=request.param == "delta",
        backoff_base=0.1,
        stop_timeout=2.0,
        register_atexit=False,
    )
    plane = Plane(server, infra, registry, statuses)
    try:
        yield plane
    finally:
        pids = [p.pid for p in infra.processes().values() if p.pid]
        await infra.close()
        await server.stop(0.2)
        await plane.server.stop(0.2)  # a test may have replaced it
        for pid in pids:
            assert not running(pid)  # (gone, or init's zombie for a moment)


# ---------------------------------------------------------------- tests


def test_versions_follow_content() -> None:
    a = snapshot([listener("l", "127.0.0.1", 1)], [routes(direct("/", 200))])
    b = snapshot([listener("l", "127.0.0.1", 1)], [routes(direct("/", 200))])
    c = snapshot([listener("l", "127.0.0.1", 1)], [routes(direct("/", 201))])
    assert make_snapshot(a).version == make_snapshot(b).version != make_snapshot(c).version
    # a CLA's version covers its cluster: changing the cluster re-sends the endpoints
    one = make_snapshot(snapshot([], [], [eds_cluster("b", 1)], [cla("b", "127.0.0.1", 1)]))
    two = make_snapshot(snapshot([], [], [eds_cluster("b", 2)], [cla("b", "127.0.0.1", 1)]))
    assert one.of(ENDPOINT)["b"].version != two.of(ENDPOINT)["b"].version
    with pytest.raises(ValueError, match="RouteConfiguration"):
        make_snapshot({LISTENER: {"x": routes()}})


async def test_traffic_updates_and_make_before_break(plane: Plane) -> None:
    host = "127.30.1.1" if plane.infra.delta is False else "127.30.2.1"
    port = free_port(host)
    with backend("127.30.9.1", "A") as port_a, backend("127.30.9.2", "B") as port_b:
        base = [direct("/direct", 200, "hello"), to_cluster("/", "backend")]
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("http", host, port)],
                [routes(*base)],
                [eds_cluster("backend")],
                [cla("backend", "127.30.9.1", port_a)],
            ),
        )
        await plane.up(host)
        assert await eventually(lambda: fetch(host, port, "/"), 3.0, "backend reachable") == (
            200,
            "A",
        )
        assert await fetch(host, port, "/direct") == (200, "hello")
        status = await plane.acked()
        assert status.connected and status.error is None
        assert set(status.acked_versions) >= {CLUSTER, ENDPOINT, LISTENER, ROUTE}
        assert await plane.infra.ready(GW)

        async def get(path: str, expect: int) -> bool:
            return (await fetch(host, port, path) or (0, ""))[0] == expect

        # a route change is visible within 1 s; removing it gives 404 again
        loop = asyncio.get_running_loop()
        start = loop.time()
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("http", host, port)],
                [routes(direct("/teapot", 418), *base)],
                [eds_cluster("backend")],
                [cla("backend", "127.30.9.1", port_a)],
            ),
        )
        await eventually(lambda: get("/teapot", 418), 1.0, "new route")
        await eventually(lambda: get("/direct", 200), 0.1, "old route kept")

        only_direct = snapshot([listener("http", host, port)], [routes(direct("/direct", 200))])
        plane.server.set_snapshot(GW, only_direct)
        await eventually(lambda: get("/teapot", 404), 1.0, "route removed")
        await plane.acked()

        # back with the cluster, then modify it (connect_timeout) together with a route:
        # the cluster's endpoints are re-sent, so it does not warm for 15 s
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("http", host, port)],
                [routes(*base)],
                [eds_cluster("backend")],
                [cla("backend", "127.30.9.1", port_a)],
            ),
        )
        await eventually(lambda: get("/", 200), 1.0, "backend back")
        await plane.acked()
        start = loop.time()
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("http", host, port)],
                [routes(direct("/after", 200), *base)],
                [eds_cluster("backend", connect_timeout=2.5)],
                [cla("backend", "127.30.9.1", port_a)],
            ),
        )
        await eventually(lambda: get("/after", 200), 1.0, "route after cluster change")

        async def new_timeout_active() -> bool:
            dump = await plane.admin("/config_dump?resource=dynamic_active_clusters")
            return '"2.500s"' in dump

        await eventually(new_timeout_active, 1.0 - (loop.time() - start), "cluster active")
        assert "2.500s" not in await plane.admin("/config_dump?resource=dynamic_warming_clusters")

        # make-before-break: move "/" to a new cluster and drop the old one; a poller
        # must never see an error while that happens
        seen: list[int] = []
        stop = asyncio.Event()

        async def poll() -> None:
            while not stop.is_set():
                result = await fetch(host, port, "/")
                seen.append(result[0] if result else 0)

        poller = asyncio.create_task(poll())
        await asyncio.sleep(0.05)
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("http", host, port)],
                [routes(direct("/after", 200), to_cluster("/", "backend2"))],
                [eds_cluster("backend2")],
                [cla("backend2", "127.30.9.2", port_b)],
            ),
        )
        assert await eventually(lambda: fetch(host, port, "/"), 1.0, "new backend") in (
            (200, "A"),
            (200, "B"),
        )
        await eventually(lambda: fetch_body_is(host, port, "B"), 1.0, "switched to B")

        async def old_cluster_gone() -> bool:
            dump = await plane.admin("/config_dump?resource=dynamic_active_clusters")
            return '"backend"' not in dump and '"backend2"' in dump

        await eventually(old_cluster_gone, 2.0, "old cluster removed")
        await asyncio.sleep(0.05)
        stop.set()
        await poller
        assert seen and set(seen) == {200}, sorted(set(seen))
        final = await plane.acked()
        assert final.snapshot_version == plane.server.snapshot(GW).version  # type: ignore[union-attr]
        pushes = plane.registry.get_sample_value("gateweave_xds_pushes_total", {"type_url": ROUTE})
        assert pushes is not None and pushes >= 5
        protocol = "delta" if plane.infra.delta else "sotw"
        assert (
            plane.registry.get_sample_value(
                "gateweave_xds_connected_streams", {"protocol": protocol}
            )
            == 1
        )
        assert any(s.acked for _, s in plane.statuses)


async def fetch_body_is(host: str, port: int, body: str) -> bool:
    result = await fetch(host, port, "/")
    return result is not None and result == (200, body)


async def test_nack_keeps_last_good_config(plane: Plane) -> None:
    host = "127.30.3.1" if plane.infra.delta is False else "127.30.4.1"
    good, busy = free_port(host), free_port(host)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind((host, busy))
        holder.listen(1)
        plane.server.set_snapshot(
            GW, snapshot([listener("good", host, good)], [routes(direct("/", 200, "ok"))])
        )
        await plane.up(host)
        assert await eventually(lambda: fetch(host, good, "/"), 3.0, "good listener") == (200, "ok")
        await plane.acked()

        # a listener on a port another socket holds: Envoy NACKs it
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("good", host, good), listener("bad", host, busy)],
                [routes(direct("/", 200, "ok"))],
            ),
        )

        async def nacked() -> NodeStatus | None:
            status = plane.server.status(GW)
            return status if status.error else None

        status = await eventually(nacked, 2.0, "NACK surfaced")
        assert "Address already in use" in (status.error or "")
        assert not status.acked and status.connected
        assert status.last_nack is not None and status.last_nack.type_url == LISTENER
        assert (
            plane.registry.get_sample_value("gateweave_xds_nacks_total", {"type_url": LISTENER})
            or 0
        ) >= 1
        assert await fetch(host, good, "/") == (200, "ok")
        assert any(s.error and "Address already in use" in s.error for _, s in plane.statuses)

        # fixing it (another port) clears the error
        fixed = free_port(host)
        plane.server.set_snapshot(
            GW,
            snapshot(
                [listener("good", host, good), listener("bad", host, fixed)],
                [routes(direct("/", 200, "ok"))],
            ),
        )
        status = await plane.acked()
        assert status.error is None
        assert status.last_nack is not None  # history is kept, the error is gone
        assert await eventually(lambda: fetch(host, fixed, "/"), 1.0, "fixed listener") == (
            200,
            "ok",
        )
        assert await fetch(host, good, "/") == (200, "ok")
    finally:
        holder.close()


async def test_reconnect_after_control_plane_restart(plane: Plane) -> None:
    """Envoy keeps serving while the server is down, and resyncs with a new one."""
    host = "127.30.5.1" if plane.infra.delta is False else "127.30.6.1"
    port = free_port(host)
    first = snapshot([listener("http", host, port)], [routes(direct("/", 200, "one"))])
    plane.server.set_snapshot(GW, first)
    await plane.up(host)
    assert await eventually(lambda: fetch(host, port, "/"), 3.0, "served") == (200, "one")
    await plane.acked()

    xds_port = plane.server.port
    await plane.server.stop(0.1)
    assert await fetch(host, port, "/") == (200, "one")  # the data plane keeps going

    registry = CollectorRegistry()
    plane.server, plane.registry = AdsServer(registry=registry, ack_timeout=3.0), registry
    plane.server.set_snapshot(
        GW, snapshot([listener("http", host, port)], [routes(direct("/", 200, "two"))])
    )
    await plane.server.start("127.0.0.1", xds_port)

    async def updated() -> bool:
        return await fetch(host, port, "/") == (200, "two")

    await eventually(updated, 2.0, "resynced after reconnect")
    status = await plane.acked()
    assert status.connected and status.error is None


async def test_burst_of_snapshots_converges_to_the_last(plane: Plane) -> None:
    host = "127.30.7.1" if plane.infra.delta is False else "127.30.8.1"
    port = free_port(host)
    with backend("127.30.9.3", "C") as port_c:

        def version(i: int) -> dict[str, dict[str, Message]]:
            # every other snapshot adds / drops a cluster, so phases interleave
            clusters = [eds_cluster(f"c{i}")] if i % 2 else []
            assignments = [cla(f"c{i}", "127.30.9.3", port_c)] if i % 2 else []
            route = [to_cluster("/c", f"c{i}")] if i % 2 else []
            return snapshot(
                [listener("http", host, port)],
                [routes(*route, direct("/", 200, str(i)))],
                clusters,
                assignments,
            )

        plane.server.set_snapshot(GW, version(0))
        await plane.up(host)
        assert await eventually(lambda: fetch(host, port, "/"), 3.0, "served") == (200, "0")
        for i in range(1, 22):
            plane.server.set_snapshot(GW, version(i))
            await asyncio.sleep(0.002 if i % 3 else 0)

        async def last() -> bool:
            return await fetch(host, port, "/") == (200, "21") and await fetch(
                host, port, "/c"
            ) == (200, "C")

        await eventually(last, 2.0, "last snapshot served")
        await plane.acked()
        dump = await plane.admin("/config_dump?resource=dynamic_active_clusters")
        assert '"c21"' in dump and '"c19"' not in dump


@pytest.mark.parametrize(
    ("node_id", "split"),
    [
        (
            "default/gw/gateweave-gw-7c9d-x2k4p",
            ("default/gw", "gateweave-gw-7c9d-x2k4p"),
        ),  # a pod of a Gateway
        ("default/gw", ("default/gw", "")),  # one Envoy (host data plane)
        ("gw", ("gw", "")),
        ("default//pod", ("default//pod", "")),  # an empty segment names no pod
    ],
)
def test_a_node_id_names_its_node_and_pod(node_id: str, split: tuple[str, str]) -> None:
    assert split_node(node_id) == split
