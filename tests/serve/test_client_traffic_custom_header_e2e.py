"""A ClientTrafficPolicy's client address from a custom header live: ``serve`` with a real Envoy.

Before the policy an address in ``X-Real-IP`` is not believed: a SecurityPolicy denying it lets
the request through. Once a policy on the Gateway takes the client address from that header, the
denied address gets 403 and another one 200; a request without the header keeps the peer's
address, unless ``failClosed``: then it gets 403 (on a route without any authorization).
"""

from __future__ import annotations

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

IP = "127.40.17.8"
DENIED = "198.51.100.9"


async def get(port: int, host: str, real_ip: str | None = None) -> int:
    headers = {"Host": host} | ({"X-Real-IP": real_ip} if real_ip is not None else {})
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return (await client.get(f"http://{IP}:{port}/", headers=headers)).status_code


def write_policy(directory: Path, fail_closed: bool) -> None:
    custom = {"name": "X-Real-IP", "failClosed": fail_closed}
    h.write_manifests(
        directory / "ctp.yaml",
        [client_traffic_policy("ip", "gw", {"clientIPDetection": {"customHeader": custom}})],
    )


async def test_client_address_from_a_custom_header(
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
            h.http_route("a", "gw", ["a.example"], [h.rule("/", [h.backend_ref("svc-a", 80)])]),
            h.http_route("b", "gw", ["b.example"], [h.rule("/", [h.backend_ref("svc-b", 80)])]),
            policy("SecurityPolicy", "deny", "HTTPRoute", "b", deny),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="a.example", status=200)
        # no policy: the peer is the client, whatever the header claims
        assert await get(port, "b.example", DENIED) == 200

        write_policy(tmp_path, fail_closed=False)

        async def denied() -> bool:
            return await get(port, "b.example", DENIED) == 403

        await until(denied, 20, "the header's address denied")
        assert await get(port, "b.example", "203.0.113.5") == 200
        assert await get(port, "b.example") == 200  # none: the peer's
        assert await get(port, "a.example") == 200

        write_policy(tmp_path, fail_closed=True)

        async def closed() -> bool:
            return await get(port, "a.example") == 403

        await until(closed, 20, "a request without the header refused")
        assert await get(port, "a.example", "203.0.113.5") == 200
        assert await get(port, "b.example", DENIED) == 403
