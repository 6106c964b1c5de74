"""SecurityPolicy basicAuth ``forwardUsernameHeader`` live: ``serve`` with a real Envoy and an
echo backend showing the headers that reached it. A request with a listed user's credentials
reaches the backend with that user's name in the header; one without credentials gets 401."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.serve.test_security_policy_e2e import htpasswd_secret, security_policy
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import echo_backend, envoy_serving, until

pytestmark = pytest.mark.timeout(60)

GATEWAY, ECHO = "127.40.25.1", "127.40.25.2"


async def test_basic_auth_forwards_the_user_name(tmp_path: Path) -> None:
    port = free_port(GATEWAY)
    async with echo_backend(ECHO) as echo:
        h.write_manifests(
            tmp_path / "base.yaml",
            [
                h.gateway_class(),
                h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", port)]),
                *h.service("app", 80, echo.ports["http"], ECHO),
                h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("app", 80)])]),
                htpasswd_secret("users", {"alice": "wonderland"}),
                security_policy(
                    "basic",
                    "app",
                    {
                        "basicAuth": {
                            "users": {"name": "users"},
                            "forwardUsernameHeader": "x-user",
                        }
                    },
                ),
            ],
        )
        async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
            await envoy_serving(GATEWAY, port)
            credentials = base64.b64encode(b"alice:wonderland").decode()
            async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:

                async def guarded() -> httpx.Response | None:
                    reply = await client.get(
                        f"http://{GATEWAY}:{port}/", headers={"Host": "app.test"}
                    )
                    return reply if reply.status_code == 401 else None

                await until(guarded, 20, "the route guarded by basic auth")
                reply = await client.get(
                    f"http://{GATEWAY}:{port}/",
                    headers={"Host": "app.test", "Authorization": f"Basic {credentials}"},
                )
                assert reply.status_code == 200
                assert reply.json()["headers"]["X-User"] == ["alice"]
