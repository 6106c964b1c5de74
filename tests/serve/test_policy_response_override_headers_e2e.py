"""A BackendTrafficPolicy's responseOverride matching the upstream's response headers, live:
``serve`` with a real Envoy and an echo backend that sets the response headers a request asks
for (``X-Echo-Set-Header``).

An answer whose ``X-State`` starts with ``maint`` is replaced by the first override (whatever its
status: the backend's 200), one with another ``X-State`` or none passes as the backend sent it;
the backend's 500 without the header is answered by the second override (its status only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.echo import RunningEcho
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import echo_backend, until
from tests.support.policies import backend_traffic_policy

pytestmark = pytest.mark.timeout(60)

GATEWAY, ECHO = "127.40.21.7", "127.40.21.8"
HOST = "app.test"


@pytest.fixture
async def echo() -> AsyncIterator[RunningEcho]:
    async with echo_backend(ECHO) as running:
        yield running


def inline(status: int, body: str) -> dict[str, object]:
    return {"statusCode": status, "body": {"type": "Inline", "inline": body}}


async def test_overrides_by_response_header(tmp_path: Path, echo: RunningEcho) -> None:
    port = free_port(GATEWAY)
    overrides = [
        {
            "match": {
                "responseHeaders": [
                    {"name": "X-State", "value": {"type": "Prefix", "value": "maint"}}
                ]
            },
            "response": inline(503, "down for maintenance"),
        },
        {
            "match": {"statusCodes": [{"type": "Value", "value": 500}]},
            "response": inline(500, "oops"),
        },
    ]
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", port)]),
            *h.service("app", 80, echo.ports["http"], ECHO),
            h.http_route("app", "gw", [HOST], [h.rule("/", [h.backend_ref("app", 80)])]),
            backend_traffic_policy("pages", "app", {"responseOverride": overrides}),
        ],
    )

    async def answer(path: str, state: str | None = None) -> tuple[int, str]:
        headers = {"X-Echo-Set-Header": f"X-State:{state}"} if state is not None else {}
        reply = await h.fetch(GATEWAY, port, path, HOST, headers=headers, timeout=5.0)
        assert reply is not None
        return reply.status, reply.body

    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def overridden() -> bool:
            try:
                return await answer("/", "maintenance") == (503, "down for maintenance")
            except AssertionError:
                return False

        await until(overridden, 20, "the route served with its overrides")
        status, body = await answer("/", "fine")
        assert status == 200 and '"path": "/"' in body
        assert (await answer("/"))[0] == 200
        assert await answer("/status/500") == (500, "oops")
