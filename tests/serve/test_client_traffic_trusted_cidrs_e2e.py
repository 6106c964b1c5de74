"""A ClientTrafficPolicy's trusted address ranges live: ``serve`` with a real Envoy.

With the peer's range (loopback) and 10.0.0.0/8 trusted, the client address is the rightmost
``X-Forwarded-For`` entry outside them: a SecurityPolicy denying 198.51.100.9 refuses a request
forwarded for it (also through a trusted 10.x hop) and lets another through. Trusting only
10.0.0.0/8, the peer is not trusted: its ``X-Forwarded-For`` is not believed.

The peer's address is appended to the ``X-Forwarded-For`` an echo backend sees, without a policy
and with trusted hops or ranges, but not with ``disableXForwardedForAppend``.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.echo import RunningEcho
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import echo_backend, envoy_serving, until, write_base
from tests.support.policies import client_traffic_policy, policy

pytestmark = pytest.mark.timeout(60)

IP, ECHO = "127.40.21.3", "127.40.21.6"
DENIED = "198.51.100.9"


async def status(port: int, forwarded_for: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for is not None else {}
    reply = await h.fetch(IP, port, "/", "b.example", headers=headers, timeout=5.0)
    assert reply is not None
    return reply.status


def write_detection(directory: Path, xff: dict[str, Any]) -> None:
    detection = {"xForwardedFor": xff}
    h.write_manifests(
        directory / "ctp.yaml",
        [client_traffic_policy("ip", "gw", {"clientIPDetection": detection})],
    )


def write_policy(directory: Path, cidrs: list[str]) -> None:
    write_detection(directory, {"trustedCIDRs": cidrs})


async def test_client_address_past_the_trusted_ranges(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    deny = {
        "authorization": {
            "defaultAction": "Allow",
            "rules": [{"action": "Deny", "principal": {"clientCIDRs": [f"{DENIED}/32"]}}],
        }
    }
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            h.http_route("b", "gw", ["b.example"], [h.rule("/", [h.backend_ref("svc-b", 80)])]),
            policy("SecurityPolicy", "deny", "HTTPRoute", "b", deny),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="b.example", status=200)
        # no policy: the peer is the client, whatever X-Forwarded-For claims
        assert await status(port, DENIED) == 200

        write_policy(tmp_path, ["127.0.0.0/8", "10.0.0.0/8"])

        async def denied() -> bool:
            return await status(port, DENIED) == 403

        await until(denied, 20, "the forwarded address denied")
        assert await status(port, f"{DENIED}, 10.1.2.3") == 403  # a trusted hop passed over
        assert await status(port, f"{DENIED}, 203.0.113.5") == 200  # the rightmost untrusted
        assert await status(port, "203.0.113.5") == 200
        assert await status(port) == 200

        write_policy(tmp_path, ["10.0.0.0/8"])

        async def untrusted_peer() -> bool:
            return await status(port, DENIED) == 200

        await until(untrusted_peer, 20, "an untrusted peer's X-Forwarded-For ignored")


@pytest.fixture
async def echo() -> AsyncIterator[RunningEcho]:
    async with echo_backend(ECHO) as running:
        yield running


async def forwarded_for(port: int) -> list[str] | None:
    """The X-Forwarded-For the echo backend saw for a request forwarded for 203.0.113.5 (None:
    no answer from it)."""
    headers = {"X-Forwarded-For": "203.0.113.5"}
    reply = await h.fetch(IP, port, "/", "echo.example", headers=headers, timeout=5.0)
    if reply is None or reply.status != 200:
        return None
    seen: dict[str, list[str]] = json.loads(reply.body)["headers"]
    return seen.get("X-Forwarded-For", [])


async def test_the_peer_appended_unless_disabled(tmp_path: Path, echo: RunningEcho) -> None:
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *h.service("echo", 80, echo.ports["http"], ECHO),
            h.http_route(
                "echo", "gw", ["echo.example"], [h.rule("/", [h.backend_ref("echo", 80)])]
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        # no policy: the peer appended. For a loopback peer Envoy appends its own local address:
        # the host's first non-loopback interface address, or 127.0.0.1 where there is none.
        got, _ = await until(lambda: forwarded_for(port), 20, "the echo backend answering")
        assert len(got) == 1 and got[0].startswith("203.0.113.5,"), got
        ipaddress.ip_address(got[0].split(",", 1)[1])  # one address appended
        appended = got
        for xff in ({"numTrustedHops": 1}, {"trustedCIDRs": ["127.0.0.0/8"]}):
            write_detection(tmp_path, {**xff, "disableXForwardedForAppend": True})

            async def kept() -> bool:
                return await forwarded_for(port) == ["203.0.113.5"]

            await until(kept, 20, f"X-Forwarded-For as the client sent it ({xff})")
            write_detection(tmp_path, xff)

            async def back() -> bool:
                return await forwarded_for(port) == appended

            await until(back, 20, f"the peer appended again ({xff})")
