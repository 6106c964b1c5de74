"""A ClientTrafficPolicy's request path normalisation live: ``serve`` with a real Envoy and an
echo backend showing the path that reached it.

Without a policy a path reaches the backend as sent (``//a//b``, ``/a%2Fb``). With
``path: {}`` (Envoy Gateway's defaults) adjacent slashes are merged, dot segments resolved, and a
path with an escaped slash is redirected to its unescaped form; with ``UnescapeAndForward`` and
``disableMergeSlashes`` the unescaped path is forwarded and the slashes kept; ``RejectRequest``
answers 400.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.echo import RunningEcho
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import echo_backend, until
from tests.support.policies import client_traffic_policy

pytestmark = pytest.mark.timeout(60)

GATEWAY, ECHO = "127.40.21.1", "127.40.21.2"
HOST = "app.test"


@pytest.fixture
async def echo() -> AsyncIterator[RunningEcho]:
    async with echo_backend(ECHO) as running:
        yield running


async def reached(port: int, path: str) -> tuple[int, str]:
    """(the status, the path the backend saw, or the redirect's Location when not 200)."""
    reply = await h.fetch(GATEWAY, port, path, HOST, timeout=5.0)
    assert reply is not None
    if reply.status == 200:
        seen: str = json.loads(reply.body)["path"]
        return 200, seen
    return reply.status, reply.headers.get("location", "")


def write_policy(directory: Path, spec: dict[str, Any]) -> None:
    h.write_manifests(directory / "policy.yaml", [client_traffic_policy("paths", "gw", spec)])


async def test_paths_as_the_policy_says(tmp_path: Path, echo: RunningEcho) -> None:
    port = free_port(GATEWAY)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", port)]),
            *h.service("app", 80, echo.ports["http"], ECHO),
            h.http_route("app", "gw", [HOST], [h.rule("/", [h.backend_ref("app", 80)])]),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def up() -> bool:
            reply = await h.fetch(GATEWAY, port, "/", HOST, timeout=0.5)
            return reply is not None and reply.status == 200

        await until(up, 20, "Envoy serving the echo backend")
        # no policy: as sent
        assert await reached(port, "//a//b") == (200, "//a//b")
        assert await reached(port, "/a%2Fb") == (200, "/a%2Fb")

        write_policy(tmp_path, {"path": {}})

        async def merged() -> bool:
            return await reached(port, "//a//b") == (200, "/a/b")

        await until(merged, 20, "slashes merged")
        assert await reached(port, "/x/../a") == (200, "/a")
        status, location = await reached(port, "/a%2Fb")
        assert status in (301, 307, 308) and location.endswith("/a/b"), (status, location)

        write_policy(
            tmp_path,
            {"path": {"escapedSlashesAction": "UnescapeAndForward", "disableMergeSlashes": True}},
        )

        async def forwarded() -> bool:
            return await reached(port, "/a%2Fb") == (200, "/a/b")

        await until(forwarded, 20, "escaped slashes unescaped and forwarded")
        assert await reached(port, "//a//b") == (200, "//a//b")

        write_policy(tmp_path, {"path": {"escapedSlashesAction": "RejectRequest"}})

        async def rejected() -> bool:
            return (await reached(port, "/a%2Fb"))[0] == 400

        await until(rejected, 20, "escaped slashes refused")
        assert await reached(port, "/a/b") == (200, "/a/b")
