"""A BackendTrafficPolicy's local rate limit rules with client selectors, live: ``serve`` with a
real Envoy, requests from several source addresses on loopback and with chosen headers.

A rule picks clients by header (``Exact``; ``Distinct``: a bucket per value) or by source
range (``Distinct``: a bucket per address in it); the N+1th request of a client it picks gets
429, while other clients (another address, another header value, a request outside every
rule) keep getting through.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving, write_base
from tests.support.policies import backend_traffic_policy

pytestmark = pytest.mark.timeout(60)

IP = "127.40.16.1"


def btp(name: str, route: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return backend_traffic_policy(
        name, route, {"rateLimit": {"type": "Local", "local": {"rules": rules}}}
    )


def limit(requests: int) -> dict[str, Any]:
    # An hour: the window never refills while the test runs.
    return {"requests": requests, "unit": "Hour"}


async def statuses(
    port: int,
    host: str,
    n: int,
    source: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> list[int | None]:
    out: list[int | None] = []
    for _ in range(n):
        reply = await h.fetch(IP, port, "/", host, source=source, headers=headers)
        out.append(reply.status if reply is not None else None)
    return out


async def test_rules_with_client_selectors(tmp_path: Path, backends: dict[str, Any]) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            h.http_route(
                name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("svc-a", 80)])]
            )
            for name in ("by-address", "by-header")
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            btp(
                "per-address",
                "by-address",
                [
                    {
                        "clientSelectors": [
                            {"sourceCIDR": {"value": "127.40.0.0/16", "type": "Distinct"}}
                        ],
                        "limit": limit(2),
                    },
                ],
            ),
            btp(
                "per-header",
                "by-header",
                [
                    {
                        "clientSelectors": [{"headers": [{"name": "X-Plan", "value": "free"}]}],
                        "limit": limit(1),
                    },
                    {
                        "clientSelectors": [{"headers": [{"name": "x-user", "type": "Distinct"}]}],
                        "limit": limit(2),
                    },
                    {
                        "clientSelectors": [
                            {
                                "headers": [
                                    {
                                        "name": "x-bot",
                                        "type": "RegularExpression",
                                        "value": "crawl.*",
                                    }
                                ],
                                "sourceCIDR": {"value": "127.40.16.9/32"},
                            }
                        ],
                        "limit": limit(1),
                    },
                ],
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port)

        # sourceCIDR Distinct: each address in the range has its own two requests.
        assert await statuses(port, "by-address.example", 3, source="127.40.16.2") == [
            200,
            200,
            429,
        ]
        assert await statuses(port, "by-address.example", 3, source="127.40.16.3") == [
            200,
            200,
            429,
        ]
        assert await statuses(port, "by-address.example", 1, source="127.40.16.2") == [429]
        # outside the range: no rule picks it
        assert await statuses(port, "by-address.example", 4, source="127.41.0.1") == [200] * 4

        # header Exact: one request for the free plan; another value is not picked
        assert await statuses(port, "by-header.example", 2, headers={"x-plan": "free"}) == [
            200,
            429,
        ]
        assert await statuses(port, "by-header.example", 4, headers={"x-plan": "paid"}) == [200] * 4
        # header Distinct: two per user
        assert await statuses(port, "by-header.example", 3, headers={"x-user": "alice"}) == [
            200,
            200,
            429,
        ]
        assert await statuses(port, "by-header.example", 3, headers={"x-user": "bob"}) == [
            200,
            200,
            429,
        ]
        # a header RegularExpression and an address, both needed (ANDed)
        crawler = {"x-bot": "crawler-1"}
        assert (
            await statuses(port, "by-header.example", 3, source="127.40.16.8", headers=crawler)
            == [200] * 3
        )
        assert await statuses(
            port, "by-header.example", 2, source="127.40.16.9", headers=crawler
        ) == [200, 429]
        assert (
            await statuses(
                port, "by-header.example", 2, source="127.40.16.9", headers={"x-bot": "human"}
            )
            == [200] * 2
        )
