"""A ClientTrafficPolicy's early request headers live: ``serve`` with a real Envoy and an echo
backend showing the headers that reached it.

Once a policy on the Gateway sets, adds and removes request headers early, the backend sees the
header set (the client's own value replaced), the one added (after the client's) and not the
one removed; before the policy it sees the client's headers as sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.echo import RunningEcho
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import echo_backend, until
from tests.support.policies import client_traffic_policy

pytestmark = pytest.mark.timeout(60)

GATEWAY, ECHO = "127.40.17.6", "127.40.17.7"
SENT = {"Host": "app.test", "X-Set": "client", "X-Added": "client", "X-Gone": "client"}


@pytest.fixture
async def echo() -> AsyncIterator[RunningEcho]:
    async with echo_backend(ECHO) as running:
        yield running


async def seen(port: int) -> dict[str, list[str]] | None:
    """The request headers the echo backend saw (None: no answer from it)."""
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        try:
            reply = await client.get(f"http://{GATEWAY}:{port}/", headers=SENT)
        except httpx.HTTPError:
            return None
    if reply.status_code != 200:
        return None
    headers: dict[str, list[str]] = reply.json()["headers"]
    return headers


async def test_early_request_headers_reach_the_backend(tmp_path: Path, echo: RunningEcho) -> None:
    port = free_port(GATEWAY)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", port)]),
            *h.service("app", 80, echo.ports["http"], ECHO),
            h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("app", 80)])]),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        before, _ = await until(lambda: seen(port), 20, "the echo backend answering")
        assert (before["X-Set"], before["X-Added"], before["X-Gone"]) == (
            ["client"],
            ["client"],
            ["client"],
        )
        early = {
            "set": [{"name": "x-set", "value": "early"}],
            "add": [{"name": "x-added", "value": "early"}],
            "remove": ["x-gone"],
        }
        h.write_manifests(
            tmp_path / "policy.yaml",
            [client_traffic_policy("early", "gw", {"headers": {"earlyRequestHeaders": early}})],
        )

        async def changed() -> dict[str, list[str]] | None:
            headers = await seen(port)
            return headers if headers is not None and "X-Gone" not in headers else None

        after, _ = await until(changed, 20, "the early header mutation applied")
        assert after["X-Set"] == ["early"]
        assert after["X-Added"] in (["client", "early"], ["client,early"])
