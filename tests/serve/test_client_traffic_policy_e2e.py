"""A ClientTrafficPolicy live: ``serve`` with a real Envoy and real backends.

Client IP detection: before the policy, the client address is the connection's peer (an
``X-Forwarded-For`` address is not believed: a SecurityPolicy denying it lets the request
through); once a policy on the Gateway trusts one hop, the address the request's
``X-Forwarded-For`` gives is the client's: the authorization rule denying it answers 403,
another address gets through, and the access log shows the claimed address.

PROXY protocol: once a policy asks for it, a connection starting with a PROXY header (v1 text or
v2 binary) is the client its header names (the denied address gets 403, another 200), one
without a header is closed; with ``optional`` it is served as the peer's.

Timeouts: an idle HTTP connection and an idle proxied TCP connection are closed, a request whose
body never comes whole gets 408. A request header with an underscore is refused (400). A
connection limit of two closes the third connection at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving, until, write_base
from tests.support.policies import client_traffic_policy, policy

pytestmark = pytest.mark.timeout(60)

IP = "127.40.17.1"
DENIED = "198.51.100.7"


def route(name: str, host: str, service: str) -> dict[str, Any]:
    return h.http_route(name, "gw", [host], [h.rule("/", [h.backend_ref(service, 80)])])


async def get(port: int, host: str, xff: str | None = None) -> int:
    headers = {"Host": host} | ({"X-Forwarded-For": xff} if xff is not None else {})
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return (await client.get(f"http://{IP}:{port}/", headers=headers)).status_code


def proxy_v1(source: str, port: int) -> bytes:
    return f"PROXY TCP4 {source} {IP} 40000 {port}\r\n".encode()


def proxy_v2(source: str, port: int) -> bytes:
    addresses = (
        ipaddress.IPv4Address(source).packed
        + ipaddress.IPv4Address(IP).packed
        + struct.pack("!HH", 40000, port)
    )
    return (
        b"\r\n\r\n\x00\r\nQUIT\n"
        + bytes([0x21, 0x11])
        + struct.pack("!H", len(addresses))
        + addresses
    )


async def raw_get(port: int, host: str, preface: bytes = b"") -> int | None:
    """The status of a GET sent on a plain socket after ``preface``; None when the connection is
    closed without an answer."""
    try:
        reader, writer = await asyncio.open_connection(IP, port)
    except ConnectionError:
        return None
    try:
        writer.write(
            preface + f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readline(), 5.0)
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
        return None
    finally:
        writer.close()
    parts = head.split()
    return int(parts[1]) if len(parts) > 1 else None


def logged_from(path: Path, host: str) -> list[str]:
    """The client addresses (without port) of the access log's requests to ``host``."""
    try:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []
    return [
        str(e["downstream_address"]).rsplit(":", 1)[0] for e in lines if e.get("authority") == host
    ]


async def test_client_address_from_forwarded_for_and_proxy_protocol(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("a", "a.example", "svc-a"),
            route("b", "b.example", "svc-b"),
            policy(
                "SecurityPolicy",
                "deny",
                "HTTPRoute",
                "b",
                {
                    "authorization": {
                        "defaultAction": "Allow",
                        "rules": [
                            {"action": "Deny", "principal": {"clientCIDRs": [f"{DENIED}/32"]}}
                        ],
                    }
                },
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await envoy_serving(IP, port)
        # no policy: the peer (127.0.0.1) is the client, whatever X-Forwarded-For claims
        assert await get(port, "b.example", DENIED) == 200

        h.write_manifests(
            tmp_path / "ctp.yaml",
            [
                client_traffic_policy(
                    "xff", "gw", {"clientIPDetection": {"xForwardedFor": {"numTrustedHops": 1}}}
                )
            ],
        )

        async def denied() -> bool:
            return await get(port, "b.example", DENIED) == 403

        await until(denied, 20, "the X-Forwarded-For address denied once one hop is trusted")
        assert await get(port, "b.example", "203.0.113.5") == 200  # another claimed address
        assert await get(port, "b.example") == 200  # none: the peer's
        # the last hop is the trusted one: the address before it is not the client's
        assert await get(port, "b.example", f"{DENIED}, 203.0.113.5") == 200
        assert await get(port, "b.example", f"203.0.113.5, {DENIED}") == 403

        assert await get(port, "a.example", "192.0.2.44") == 200
        envoys = served.admin.envoys
        assert envoys is not None
        path = envoys.access_log("default/gw")
        assert path is not None

        async def logged() -> bool:
            return "192.0.2.44" in logged_from(path, "a.example")

        await until(logged, 15, "the access log showing the X-Forwarded-For client address")

        # PROXY protocol, required: the header's source address is the client
        h.write_manifests(
            tmp_path / "ctp.yaml", [client_traffic_policy("xff", "gw", {"proxyProtocol": {}})]
        )

        async def proxied_denied() -> bool:
            return await raw_get(port, "b.example", proxy_v1(DENIED, port)) == 403

        await until(proxied_denied, 20, "the PROXY v1 header's address denied")
        assert await raw_get(port, "b.example", proxy_v2(DENIED, port)) == 403
        assert await raw_get(port, "b.example", proxy_v1("203.0.113.5", port)) == 200
        assert await raw_get(port, "b.example", proxy_v2("203.0.113.5", port)) == 200
        assert await raw_get(port, "b.example") is None  # no header: closed

        # optional: a connection without a header is the peer's
        h.write_manifests(
            tmp_path / "ctp.yaml",
            [client_traffic_policy("xff", "gw", {"proxyProtocol": {"optional": True}})],
        )

        async def plain_served() -> bool:
            return await raw_get(port, "b.example") == 200

        await until(
            plain_served, 20, "a connection without a PROXY header served once it is optional"
        )
        assert await raw_get(port, "b.example", proxy_v2(DENIED, port)) == 403


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """Whether the other end closes the connection (bounded wait: the timeouts under test are
    a second, the defaults an hour)."""
    try:
        while await asyncio.wait_for(reader.read(65536), 15.0):
            pass
    except (ConnectionError, TimeoutError):
        return False
    return True


async def test_client_timeouts_and_headers_with_underscores(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port, tcp_port = free_port(IP), free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway(
                "gw", IP, [h.listener("http", "HTTP", port), h.listener("tcp", "TCP", tcp_port)]
            ),
            *h.service("svc-a", 80, backends["A"].port),
            *h.service("svc-echo", 9000, backends["echo"].port),
            route("a", "a.example", "svc-a"),
            h.tcp_route("echo", "gw", "tcp", [h.backend_ref("svc-echo", 9000)]),
            client_traffic_policy(
                "timeouts",
                "gw",
                {
                    "timeout": {
                        "http": {"idleTimeout": "1s", "requestReceivedTimeout": "1s"},
                        "tcp": {"idleTimeout": "1s"},
                    },
                    "headers": {"withUnderscoresAction": "RejectRequest"},
                },
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="a.example", status=200)

        # a request header with an underscore in its name: the request is refused
        reply = await h.fetch(IP, port, "/", "a.example", headers={"x_team": "blue"})
        assert reply is not None and reply.status == 400

        # an HTTP connection left idle after its request is closed
        reader, writer = await asyncio.open_connection(IP, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        await writer.drain()
        assert (await asyncio.wait_for(reader.readline(), 5.0)).startswith(b"HTTP/1.1 200")
        assert await closed_by_peer(reader)
        writer.close()

        # a request whose body never comes whole gets 408
        reader, writer = await asyncio.open_connection(IP, port)
        writer.write(b"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        assert (await asyncio.wait_for(reader.readline(), 15.0)).startswith(b"HTTP/1.1 408")
        writer.close()

        # a proxied TCP connection without bytes either way is closed, after echoing
        reader, writer = await asyncio.open_connection(IP, tcp_port)
        writer.write(b"ping")
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(4), 5.0) == b"ping"
        assert await closed_by_peer(reader)
        writer.close()


async def test_connection_limit_closes_the_connection_beyond_it(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("a", "a.example", "svc-a"),
            client_traffic_policy(
                "limit",
                "gw",
                {"connection": {"connectionLimit": {"value": 2}, "bufferLimit": "64Ki"}},
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def up() -> bool:
            return await raw_get(port, "a.example") == 200

        await until(up, 20, "Envoy serving the Gateway")
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        try:

            async def hold_two() -> bool:
                # two kept-alive connections, each served (a closed one left over from up() may
                # still count)
                while len(held) < 2:
                    reader, writer = await asyncio.open_connection(IP, port)
                    try:
                        writer.write(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
                        await writer.drain()
                        line = await asyncio.wait_for(reader.readline(), 5.0)
                    except (ConnectionError, TimeoutError):
                        line = b""
                    if not line.startswith(b"HTTP/1.1 200"):
                        writer.close()
                        return False
                    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
                    held.append((reader, writer))
                return True

            await until(hold_two, 20, "two connections held open")
            # the third concurrent connection is closed without an answer
            assert await raw_get(port, "a.example") is None
            # one of the two closed: a new connection is served again
            held.pop()[1].close()

            async def served_again() -> bool:
                return await raw_get(port, "a.example") == 200

            await until(served_again, 20, "a connection served once one of the two is closed")
        finally:
            for _, writer in held:
                writer.close()
