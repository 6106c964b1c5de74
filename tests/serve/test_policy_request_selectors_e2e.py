"""A BackendTrafficPolicy's local rate limit rules picking requests by method, path and query
parameter, live: ``serve`` with a real Envoy.

One rule limits POST and PUT requests under ``/api`` to 2: the third such request gets 429
while GETs there and POSTs elsewhere keep getting through. Another gives each value of the
query parameter ``user`` a bucket of 1: a second request of one user gets 429, another user
and a request without the parameter do not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until, write_base
from tests.support.policies import backend_traffic_policy

pytestmark = pytest.mark.timeout(60)

IP = "127.40.21.5"
HOST = "app.example"
HOUR = "Hour"  # the window never refills while the test runs


async def status(client: httpx.AsyncClient, port: int, method: str, target: str) -> int:
    reply = await client.request(method, f"http://{IP}:{port}{target}", headers={"Host": HOST})
    return reply.status_code


async def test_rules_by_method_path_and_query_parameter(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    rules = [
        {
            "clientSelectors": [
                {
                    "methods": [{"value": "POST"}, {"value": "PUT"}],
                    "path": {"type": "PathPrefix", "value": "/api"},
                }
            ],
            "limit": {"requests": 2, "unit": HOUR},
        },
        {
            "clientSelectors": [{"queryParams": [{"name": "user", "type": "Distinct"}]}],
            "limit": {"requests": 1, "unit": HOUR},
        },
    ]
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            h.http_route("app", "gw", [HOST], [h.rule("/", [h.backend_ref("svc-a", 80)])]),
            backend_traffic_policy(
                "limits", "app", {"rateLimit": {"type": "Local", "local": {"rules": rules}}}
            ),
        ],
    )
    async with (
        h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL),
        httpx.AsyncClient(timeout=5.0, trust_env=False) as client,
    ):

        async def limited() -> bool:
            # the policy applies once the route is served with its descriptors: the user's
            # second request is refused
            try:
                return await status(client, port, "GET", "/probe?user=probe") == 429
            except httpx.HTTPError:
                return False

        await until(limited, 20, "the route served with its rate limits")
        assert [await status(client, port, "POST", "/api/items") for _ in range(2)] == [200, 200]
        assert await status(client, port, "PUT", "/api") == 429  # the same bucket: third
        assert [await status(client, port, "GET", "/api/items") for _ in range(3)] == [200] * 3
        assert [await status(client, port, "POST", "/apis") for _ in range(3)] == [200] * 3
        assert [await status(client, port, "POST", "/other") for _ in range(3)] == [200] * 3

        assert await status(client, port, "GET", "/?user=ann") == 200
        assert await status(client, port, "GET", "/x?user=ann&page=2") == 429
        assert await status(client, port, "GET", "/?user=bob") == 200
        assert [await status(client, port, "GET", "/") for _ in range(3)] == [200] * 3
