"""A BackendTrafficPolicy's consistent hash load balancing and active health check, live:
``serve`` with a real Envoy and a Service of two endpoints (two backends answering their names).

Hashing on the client's address sends each client (a source address on loopback) to one
endpoint, every time, while the clients together reach both; hashing on a header does the
same per header value. A route without the policy keeps Envoy's round robin (both endpoints
for one client). An endpoint whose health check fails is taken out (every request goes to
the other) and put back once it passes again. An endpoint answering 500 is ejected by the
passive health check (outlier detection) of the routes the policy governs, while a route without
it still reaches the endpoint, and comes back after the ejection time once it answers again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.flaky import HealthServer
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until
from tests.support.policies import backend_traffic_policy as btp

pytestmark = pytest.mark.timeout(60)

IP = "127.40.18.1"
ENDPOINTS = ("127.40.18.2", "127.40.18.3")


@pytest.fixture
def pair() -> Iterator[tuple[int, list[h.NameServer]]]:
    port = free_port(ENDPOINTS[0])
    servers = [h.NameServer(name, host, port) for name, host in zip("AB", ENDPOINTS, strict=True)]
    try:
        yield port, servers
    finally:
        for server in servers:
            server.close()


def two_endpoint_service(port: int) -> list[dict[str, Any]]:
    svc, slice_ = h.service("pair", 80, port)
    slice_["endpoints"] = [{"addresses": [a], "conditions": {"ready": True}} for a in ENDPOINTS]
    return [svc, slice_]


async def answers(port: int, host: str, n: int, **kw: Any) -> set[str]:
    out = set()
    for _ in range(n):
        reply = await h.fetch(IP, port, "/", host, **kw)
        assert reply is not None and reply.status == 200, reply
        out.add(reply.body)
    return out


async def test_consistent_hash_sends_a_client_to_one_endpoint(
    tmp_path: Path, pair: tuple[int, list[h.NameServer]]
) -> None:
    backend_port, _ = pair
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *two_endpoint_service(backend_port),
            *(
                h.http_route(
                    name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("pair", 80)])]
                )
                for name in ("by-source", "by-header", "plain")
            ),
            btp(
                "source",
                "by-source",
                {
                    "loadBalancer": {
                        "type": "ConsistentHash",
                        "consistentHash": {"type": "SourceIP"},
                    }
                },
            ),
            btp(
                "header",
                "by-header",
                {
                    "loadBalancer": {
                        "type": "ConsistentHash",
                        "consistentHash": {"type": "Header", "header": {"name": "x-user"}},
                    }
                },
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def both() -> bool:
            replies = [await h.fetch(IP, port, "/", "plain.example", timeout=0.5) for _ in range(4)]
            return {r.body for r in replies if r is not None and r.status == 200} == {
                "A",
                "B",
            }  # round robin

        await until(both, 20, "Envoy serving both endpoints")

        seen: set[str] = set()
        for i in range(10, 26):
            got = await answers(port, "by-source.example", 4, source=f"127.40.18.{i}")
            assert len(got) == 1, (i, got)  # one client, one endpoint
            seen |= got
        assert seen == {"A", "B"}

        seen = set()
        for user in (f"user-{i}" for i in range(16)):
            got = await answers(port, "by-header.example", 4, headers={"x-user": user})
            assert len(got) == 1, (user, got)
            seen |= got
        assert seen == {"A", "B"}


@pytest.fixture
def health_pair() -> Iterator[tuple[int, tuple[HealthServer, HealthServer]]]:
    """Endpoints A and B of Service ``pair``: backends the test makes unhealthy or failing."""
    backend_port = free_port(ENDPOINTS[0])
    a, b = (
        HealthServer(name, host, backend_port) for name, host in zip("AB", ENDPOINTS, strict=True)
    )
    try:
        yield backend_port, (a, b)
    finally:
        a.close()
        b.close()


def checked_routes(path: Path, backend_port: int, health_check: dict[str, Any]) -> int:
    """Gateway ``gw`` (the port returned) with routes ``checked.example``, which a policy of
    ``health_check`` governs, and ``plain.example`` to the same pair of endpoints."""
    port = free_port(IP)
    h.write_manifests(
        path,
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *two_endpoint_service(backend_port),
            *(
                h.http_route(
                    name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("pair", 80)])]
                )
                for name in ("checked", "plain")
            ),
            btp("health", "checked", {"healthCheck": health_check}),
        ],
    )
    return port


async def replies(port: int, host: str) -> set[tuple[int, str]]:
    """The (status, body) of 6 requests, each on a fresh connection (0: none)."""
    out = set()
    for _ in range(6):
        r = await h.fetch(IP, port, "/", host, timeout=0.5)
        out.add((r.status, r.body) if r is not None else (0, ""))
    return out


BOTH = {(200, "A"), (200, "B")}


async def test_active_health_check_takes_an_endpoint_out_and_puts_it_back(
    tmp_path: Path, health_pair: tuple[int, tuple[HealthServer, HealthServer]]
) -> None:
    backend_port, (_, b) = health_pair
    active = {
        "type": "HTTP",
        "interval": "100ms",
        "timeout": "500ms",
        "healthyThreshold": 1,
        "unhealthyThreshold": 1,
        "http": {"path": "/healthz", "expectedStatuses": [200]},
    }
    port = checked_routes(tmp_path / "base.yaml", backend_port, {"active": active})
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def reached(want: set[tuple[int, str]]) -> bool:
            return await replies(port, "checked.example") == want

        await until(lambda: reached(BOTH), 20, "both endpoints healthy and served")
        b.set_healthy(False)
        await until(lambda: reached({(200, "A")}), 10, "B taken out by its failing health check")
        assert await reached({(200, "A")})
        b.set_healthy(True)
        await until(lambda: reached(BOTH), 10, "B put back once healthy")


async def test_passive_health_check_ejects_an_endpoint_answering_5xx(
    tmp_path: Path, health_pair: tuple[int, tuple[HealthServer, HealthServer]]
) -> None:
    backend_port, (_, b) = health_pair
    passive = {
        "consecutive5XxErrors": 2,
        "interval": "100ms",
        "baseEjectionTime": "1s",
        "maxEjectionPercent": 100,
    }
    port = checked_routes(tmp_path / "base.yaml", backend_port, {"passive": passive})
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def reached(want: set[tuple[int, str]]) -> bool:
            return await replies(port, "checked.example") == want

        await until(lambda: reached(BOTH), 20, "both endpoints served")
        b.set_failing(True)
        await until(lambda: reached({(200, "A")}), 10, "B ejected after its consecutive 500s")
        assert await reached({(200, "A")})

        async def plain_reaches_b() -> bool:
            return (500, "B") in await replies(port, "plain.example")

        await until(plain_reaches_b, 10, "the route without the policy still sending to B")
        b.set_failing(False)
        await until(lambda: reached(BOTH), 10, "B back after its ejection")
