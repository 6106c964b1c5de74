"""Session persistence end to end: ``serve`` on a directory, a real Envoy, a Service of three
endpoints, a client that keeps what the Gateway gave it (a cookie, or a header).

Without a session the Service's requests spread over its endpoints; with one, a client sticks to
the endpoint that first answered it, and moves (with a new session) when that endpoint goes.
The Gateway listens on 127.44.1.1, the endpoints on 127.44.2.x.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave import ir
from gateweave.infra.host import free_port
from gateweave.xds.routes import pin_cookie
from gateweave_bench import harness as h

pytestmark = pytest.mark.timeout(90)

GATEWAY = "127.44.1.1"
ENDPOINTS = ("127.44.2.1", "127.44.2.2", "127.44.2.3")  # Service shop
ANNEX = "127.44.2.4"  # Service annex
HOST = "shop.test"
PAIR_PIN = pin_cookie(ir.Session(type="Cookie", name="pair"))  # the /pair rule's second cookie


@pytest.fixture
def endpoints() -> Iterator[dict[str, h.NameServer]]:
    """One name server per endpoint address, all on one port (a Service's targetPort)."""
    port = free_port(ENDPOINTS[0])
    servers: dict[str, h.NameServer] = {}
    try:
        for i, address in enumerate((*ENDPOINTS, ANNEX)):
            servers[address] = h.NameServer(f"e{i + 1}", address, port)
        yield servers
    finally:
        for server in servers.values():
            server.close()


def _slice(addresses: list[str], port: int) -> dict[str, Any]:
    """The EndpointSlice of Service shop."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": h.meta("shop-1", labels={"kubernetes.io/service-name": "shop"}),
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
        "ports": [{"name": "p", "port": port, "protocol": "TCP"}],
    }


def _rule(path: str, session: dict[str, Any] | None) -> dict[str, Any]:
    out = h.rule(path, [h.backend_ref("shop", 80)])
    if session is not None:
        out["sessionPersistence"] = session
    return out


def _objects(listener_port: int, target_port: int, shop: list[str]) -> list[dict[str, Any]]:
    service, _ = h.service("shop", 80, target_port)
    pair = h.rule("/pair", [h.backend_ref("shop", 80, 1), h.backend_ref("annex", 80, 1)])
    pair["sessionPersistence"] = {"type": "Cookie", "cookie": {"name": "pair"}}
    route = h.http_route(
        "shop",
        "gw",
        [HOST],
        [
            pair,
            _rule("/cookie", {"type": "Cookie", "cookie": {"name": "sticky"}}),
            _rule(
                "/permanent",
                {
                    "type": "Cookie",
                    "absoluteTimeout": "1h",
                    "cookie": {"lifetimeType": "Permanent", "path": "/permanent"},
                },
            ),
            _rule("/header", {"type": "Header", "header": {"name": "X-Session"}}),
            _rule("/plain", None),
        ],
    )
    return [
        h.gateway_class(),
        h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", listener_port)]),
        service,
        _slice(shop, target_port),
        *h.service("annex", 80, target_port, ANNEX),
        route,
    ]


class Client:
    """Requests to the Gateway on fresh connections (so nothing but the session can stick)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://{GATEWAY}:{port}"

    async def get(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
            return await client.get(self.base + path, headers={"Host": HOST, **(headers or {})})

    async def until(self, path: str, timeout: float = 10.0) -> httpx.Response:
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = await self.get(path)
                if reply.status_code == 200:
                    return reply
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not answer 200 within {timeout} s")
            await asyncio.sleep(0.05)


def _cookies(reply: httpx.Response) -> dict[str, tuple[str, dict[str, str]]]:
    """The cookies a reply sets: name -> (value, attributes by lowercase name)."""
    out = {}
    for raw in reply.headers.get_list("set-cookie"):
        pair, *attrs = [part.strip() for part in raw.split(";")]
        name, _, value = pair.partition("=")
        attributes = {}
        for attr in attrs:
            key, _, val = attr.partition("=")
            attributes[key.lower()] = val
        out[name] = (value, attributes)
    return out


def _cookie(reply: httpx.Response) -> tuple[str, str, dict[str, str]]:
    """The one cookie a reply sets: (name, value, attributes)."""
    cookies = _cookies(reply)
    assert len(cookies) == 1, f"expected one Set-Cookie in {dict(reply.headers)}"
    ((name, (value, attributes)),) = cookies.items()
    return name, value, attributes


async def _backends(
    client: Client, path: str, headers: dict[str, str] | None, n: int = 12
) -> set[str]:
    seen = set()
    for _ in range(n):
        reply = await client.get(path, headers)
        assert reply.status_code == 200, reply.status_code
        seen.add(reply.text)
    return seen


async def test_a_client_sticks_to_its_endpoint_and_moves_when_it_goes(
    tmp_path: Path, endpoints: dict[str, h.NameServer]
) -> None:
    listener_port = free_port(GATEWAY)
    target_port = next(iter(endpoints.values())).port
    h.write_manifests(tmp_path / "shop.yaml", _objects(listener_port, target_port, list(ENDPOINTS)))
    client = Client(listener_port)
    async with h.running_serve(tmp_path):
        await client.until("/plain")
        # Without a session, requests spread over the endpoints (so what sticks below is the
        # session).
        assert len(await _backends(client, "/plain", None)) > 1

        # Cookie: the first answer sets it (a session cookie: no Max-Age, no Expires; Path /).
        first = await client.get("/cookie")
        name, value, attributes = _cookie(first)
        assert name == "sticky" and value
        assert (
            attributes.get("path") == "/"
            and "max-age" not in attributes
            and "expires" not in attributes
        )
        pinned = first.text
        assert await _backends(client, "/cookie", {"Cookie": f"sticky={value}"}) == {pinned}

        # Permanent: Max-Age is absoluteTimeout; the cookie's own Path; a name made for the rule.
        name_p, value_p, attributes_p = _cookie(await client.get("/permanent"))
        assert name_p.startswith("session-") and attributes_p.get("max-age") == "3600"
        assert attributes_p.get("path") == "/permanent"
        assert len(await _backends(client, "/permanent", {"Cookie": f"{name_p}={value_p}"})) == 1

        # Header: the answer carries the session in X-Session; a client that sends it back sticks.
        reply = await client.get("/header")
        token = reply.headers.get("x-session")
        assert token, dict(reply.headers)
        assert await _backends(client, "/header", {"X-Session": token}) == {reply.text}

        # Over two backendRefs (weights 1:1): a second cookie keeps the client on its backendRef,
        # whatever the weights pick, and the session cookie on its endpoint there.
        pinned_to: set[str] = set()
        for _ in range(20):
            reply = await client.get("/pair")
            cookies = _cookies(reply)
            assert set(cookies) == {"pair", PAIR_PIN}, cookies
            assert cookies[PAIR_PIN][1].get("path") == "/" and "max-age" not in cookies[PAIR_PIN][1]
            sent = "; ".join(f"{name}={value}" for name, (value, _) in cookies.items())
            assert await _backends(client, "/pair", {"Cookie": sent}) == {reply.text}
            pinned_to.add("annex" if reply.text == endpoints[ANNEX].name else "shop")
            if len(pinned_to) == 2:
                break
        assert pinned_to == {"annex", "shop"}

        # The endpoint goes: the cookie's client moves to another one, with a new cookie, and sticks
        # there.
        gone = next(address for address, server in endpoints.items() if server.name == pinned)
        rest = [a for a in ENDPOINTS if a != gone]
        h.write_manifests(tmp_path / "shop.yaml", _objects(listener_port, target_port, rest))
        endpoints[gone].close()
        deadline = time.monotonic() + 10
        while True:
            moved = await client.get("/cookie", {"Cookie": f"sticky={value}"})
            if moved.status_code == 200 and moved.text != pinned:
                break
            assert time.monotonic() < deadline, (
                "the session did not move off the endpoint that went"
            )
            await asyncio.sleep(0.05)
        name2, value2, _ = _cookie(moved)
        assert name2 == "sticky" and value2 != value
        assert await _backends(client, "/cookie", {"Cookie": f"sticky={value2}"}) == {moved.text}
