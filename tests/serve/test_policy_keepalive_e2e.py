"""``tcpKeepalive`` live: ``serve`` with real Envoys, the keepalive options read on the Envoys'
own sockets (tests/support/sockopts.py).

A ClientTrafficPolicy's keepalive is on the connection a client opened to the Gateway it
governs (inherited from the listening socket), not on one to another Gateway; a
BackendTrafficPolicy's is on the Envoy's connection to the backend of the route it governs,
not on its connection to another route's backend.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until
from tests.support.policies import backend_traffic_policy, client_traffic_policy
from tests.support.sockopts import Keepalive, keepalive_of

pytestmark = pytest.mark.timeout(60)

IPS = ("127.40.19.1", "127.40.19.2")  # the Gateways with and without the ClientTrafficPolicy
BACKENDS = ("127.40.19.3", "127.40.19.4")  # the routes' with and without the policy
CLIENT = Keepalive(on=True, probes=3, idle_s=1200, interval_s=60)
UPSTREAM = Keepalive(on=True, probes=5, idle_s=300, interval_s=7)


@pytest.fixture
def backends() -> Iterator[list[h.NameServer]]:
    servers = [h.NameServer(name, host) for name, host in zip("AB", BACKENDS, strict=True)]
    try:
        yield servers
    finally:
        for server in servers:
            server.close()


def request(address: str, port: int, host: str) -> socket.socket:
    """A connection to ``address:port`` that sent a GET for ``host`` and read its answer (200),
    left open."""
    sock = socket.create_connection((address, port), timeout=5)
    sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while not data.endswith(b"\r\n\r\nA") and not data.endswith(b"\r\n\r\nB"):
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data
    return sock


async def test_keepalive_on_the_governed_connections_only(
    tmp_path: Path, backends: list[h.NameServer]
) -> None:
    port = free_port(IPS[0])
    routes = [
        h.http_route(name, gw, [f"{name}.example"], [h.rule("/", [h.backend_ref(svc, 80)])])
        for gw in ("gw", "other")
        for name, svc in ((f"kept-{gw}", "a"), (f"plain-{gw}", "b"))
    ]
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            *(
                h.gateway(gw, ip, [h.listener("http", "HTTP", port)])
                for gw, ip in zip(("gw", "other"), IPS, strict=True)
            ),
            *h.service("a", 80, backends[0].port, BACKENDS[0]),
            *h.service("b", 80, backends[1].port, BACKENDS[1]),
            *routes,
            client_traffic_policy(
                "client",
                "gw",
                {"tcpKeepalive": {"probes": 3, "idleTime": "20m", "interval": "60s"}},
            ),
            *(
                backend_traffic_policy(
                    f"upstream-{gw}",
                    f"kept-{gw}",
                    {"tcpKeepalive": {"probes": 5, "idleTime": "5m", "interval": "7s"}},
                )
                for gw in ("gw", "other")
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:

        async def serving() -> bool:
            replies = [
                await h.fetch(ip, port, "/", f"{name}-{gw}.example", timeout=0.5)
                for gw, ip in zip(("gw", "other"), IPS, strict=True)
                for name in ("kept", "plain")
            ]
            return all(r is not None and r.status == 200 for r in replies)

        await until(serving, 20, "both Gateways serving their routes")
        pids = served.envoy_pids()
        for ip, gw, expected in ((IPS[0], "gw", CLIENT), (IPS[1], "other", None)):
            with request(ip, port, f"kept-{gw}.example") as client:
                (accepted,) = keepalive_of(pids, client.getsockname()[:2])
                if expected is None:
                    assert not accepted.on, accepted  # the other Gateway: the system's default
                else:
                    assert accepted == expected
        # Envoy keeps its connections to the backends open: each one's options, on both Gateways
        kept = keepalive_of(pids, (BACKENDS[0], backends[0].port))
        plain = keepalive_of(pids, (BACKENDS[1], backends[1].port))
        assert kept and set(kept) == {UPSTREAM}, kept
        assert plain and not any(k.on for k in plain), plain
