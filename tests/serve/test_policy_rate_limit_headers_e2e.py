"""A BackendTrafficPolicy's local rate limit answers, live (``serve`` with a real Envoy): the
draft-03 ``x-ratelimit-*`` headers Envoy Gateway sends by default, turned off on a listener by a
ClientTrafficPolicy's ``headers.disableRateLimitHeaders`` and per rule by ``xRateLimitHeaders``
(or on by it, whatever the listener says), a rule in ``shadowMode`` never refusing, a rule's
``cost`` taking several tokens, and a request a rule picks leaving the route's own bucket alone.

One route is served on two listeners of one Gateway (each Envoy listener has its own buckets);
the ClientTrafficPolicy governs the second only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until
from tests.support.policies import backend_traffic_policy, policy

pytestmark = pytest.mark.timeout(60)

IP = "127.40.21.9"
HOST = "app.example"
HOUR = "Hour"  # the windows never refill while the test runs
HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")


def user(name: str, limit: int, **extra: Any) -> dict[str, Any]:
    """A rule limiting the requests of ``x-user-id: name``."""
    return {
        "clientSelectors": [{"headers": [{"name": "x-user-id", "value": name}]}],
        "limit": {"requests": limit, "unit": HOUR},
        **extra,
    }


RULES = [
    {"limit": {"requests": 4, "unit": HOUR}},  # the route's own bucket: everybody else
    user("john", 2),
    user("shadow", 1, shadowMode=True),
    user("heavy", 4, cost={"request": {"from": "Number", "number": 2}}),
    user("silent", 5, xRateLimitHeaders="Off"),
    user("loud", 5, xRateLimitHeaders="DraftVersion03"),
]


async def get(client: httpx.AsyncClient, port: int, who: str) -> httpx.Response:
    return await client.get(f"http://{IP}:{port}/", headers={"Host": HOST, "x-user-id": who})


def limits(reply: httpx.Response) -> tuple[int, str | None, str | None, bool]:
    """The status, x-ratelimit-limit and -remaining, and whether x-ratelimit-reset is there."""
    return (
        reply.status_code,
        reply.headers.get("x-ratelimit-limit"),
        reply.headers.get("x-ratelimit-remaining"),
        "x-ratelimit-reset" in reply.headers,
    )


async def test_rate_limit_headers_shadow_mode_and_cost(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port, quiet = free_port(IP), free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway(
                "gw", IP, [h.listener("http", "HTTP", port), h.listener("quiet", "HTTP", quiet)]
            ),
            *h.service("svc-a", 80, backends["A"].port),
        ],
    )
    ctp = policy(
        "ClientTrafficPolicy",
        "no-headers",
        "Gateway",
        "gw",
        {"headers": {"disableRateLimitHeaders": True}},
    )
    ctp["spec"]["targetRefs"][0]["sectionName"] = "quiet"
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            h.http_route("app", "gw", [HOST], [h.rule("/", [h.backend_ref("svc-a", 80)])]),
            backend_traffic_policy(
                "limits", "app", {"rateLimit": {"type": "Local", "local": {"rules": RULES}}}
            ),
            ctp,
        ],
    )
    async with (
        h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL),
        httpx.AsyncClient(timeout=5.0, trust_env=False) as client,
    ):

        async def served(at: int) -> bool:
            # the route is served with its limits once an answer to the loud rule's user (its
            # bucket of 5 is not used up by the test) carries its headers, on either listener
            try:
                reply = await get(client, at, "loud")
            except httpx.HTTPError:
                return False
            return "x-ratelimit-limit" in reply.headers

        await until(lambda: served(port), 20, "the route served with its rate limits")
        await until(lambda: served(quiet), 20, "the quiet listener served with its rate limits")

        # john's own bucket of 2: its headers; then 429, none left
        assert [limits(await get(client, port, "john")) for _ in range(3)] == [
            (200, "2", "1", True),
            (200, "2", "0", True),
            (429, "2", "0", True),
        ]
        # everybody else takes from the route's bucket of 4, which john's requests left alone
        assert [limits(await get(client, port, "mike")) for _ in range(5)] == [
            (200, "4", "3", True),
            (200, "4", "2", True),
            (200, "4", "1", True),
            (200, "4", "0", True),
            (429, "4", "0", True),
        ]
        # shadow mode: the bucket of 1 counts, but never refuses
        assert [(await get(client, port, "shadow")).status_code for _ in range(4)] == [200] * 4
        # a cost of 2 in a bucket of 4: the third request finds it empty
        assert [(await get(client, port, "heavy")).status_code for _ in range(3)] == [
            200,
            200,
            429,
        ]
        # a rule with xRateLimitHeaders: Off answers without them
        silent = await get(client, port, "silent")
        assert silent.status_code == 200
        assert not any(name in silent.headers for name in HEADERS)

        # the listener whose ClientTrafficPolicy disables the headers: none, its limits still
        # applied (its own buckets); a rule saying DraftVersion03 still sends them
        answers = [await get(client, quiet, "mike") for _ in range(5)]
        assert [a.status_code for a in answers] == [200] * 4 + [429]
        assert not any(name in a.headers for a in answers for name in HEADERS)
        assert limits(await get(client, quiet, "loud"))[:2] == (200, "5")
