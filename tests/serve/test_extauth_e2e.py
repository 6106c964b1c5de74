"""The ExternalAuth filter end to end: ``serve`` on a directory, a real Envoy, an HTTP and a gRPC
auth service (tests/support/authservers.py) and an echo backend that shows what reached it.

The Gateway listens on 127.45.1.1; the backend and the auth services on 127.45.2.x.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.echo import RunningEcho
from tests.support.authservers import ALLOWED, USER, USER_HEADER, GrpcAuth, HttpAuth
from tests.support.live import echo_backend

pytestmark = pytest.mark.timeout(90)

GATEWAY = "127.45.1.1"
ECHO, HTTP_AUTH, GRPC_AUTH = "127.45.2.1", "127.45.2.2", "127.45.2.3"


@pytest.fixture
async def echo() -> AsyncIterator[RunningEcho]:
    async with echo_backend(ECHO) as running:
        yield running


def _auth_rule(path: str, auth: dict[str, Any]) -> dict[str, Any]:
    out = h.rule(path, [h.backend_ref("app", 80)])
    out["filters"] = [{"type": "ExternalAuth", "externalAuth": auth}]
    return out


def _objects(
    port: int, echo_port: int, http_auth: HttpAuth, grpc_auth: GrpcAuth
) -> list[dict[str, Any]]:
    route = h.http_route(
        "app",
        "gw",
        ["app.test"],
        [
            _auth_rule(
                "/http",
                {
                    "protocol": "HTTP",
                    "backendRef": {"name": "http-auth", "port": 9002},
                    "http": {"path": "/check", "allowedHeaders": ["X-Tenant"]},
                },
            ),
            # the Service port has no appProtocol: the gRPC service is spoken to over HTTP/2 all the
            # same
            _auth_rule(
                "/grpc",
                {"protocol": "GRPC", "backendRef": {"name": "grpc-auth", "port": 9001}, "grpc": {}},
            ),
            _auth_rule(
                "/broken",
                {"protocol": "HTTP", "backendRef": {"name": "nowhere", "port": 80}, "http": {}},
            ),
            h.rule("/", [h.backend_ref("app", 80)]),
        ],
    )
    return [
        h.gateway_class(),
        h.gateway("gw", GATEWAY, [h.listener("http", "HTTP", port)]),
        *h.service("app", 80, echo_port, ECHO),
        *h.service("http-auth", 9002, http_auth.port, HTTP_AUTH),
        *h.service("grpc-auth", 9001, grpc_auth.port, GRPC_AUTH),
        route,
    ]


async def _get(port: int, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return await client.get(
            f"http://{GATEWAY}:{port}{path}", headers={"Host": "app.test", **(headers or {})}
        )


async def test_requests_go_through_their_auth_service(tmp_path: Path, echo: RunningEcho) -> None:
    port = free_port(GATEWAY)
    http_auth, grpc_auth = HttpAuth(HTTP_AUTH), GrpcAuth(GRPC_AUTH)
    try:
        h.write_manifests(
            tmp_path / "app.yaml", _objects(port, echo.ports["http"], http_auth, grpc_auth)
        )
        async with h.running_serve(tmp_path) as served:
            deadline = time.monotonic() + 10
            while True:
                try:
                    if (await _get(port, "/open")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the route did not answer"
                await asyncio.sleep(0.05)
            assert not http_auth.checks and not grpc_auth.checks  # no ExternalAuth, nobody asked

            for path, service, auth in (
                ("/http/a?x=1", "http-auth", http_auth),
                ("/grpc/b", "grpc-auth", grpc_auth),
            ):
                allowed = await _get(
                    port, path, {"Authorization": ALLOWED, "X-Tenant": "t1", "X-Other": "o"}
                )
                seen = allowed.json()
                assert allowed.status_code == 200 and seen["path"] == path
                assert seen["headers"]["X-Auth-User"] == [USER]  # the header the service added
                denied = await _get(port, path, {"Authorization": "Bearer bad"})
                assert (denied.status_code, denied.text, denied.headers["x-denied-by"]) == (
                    403,
                    f"denied by {service}",
                    service,
                )
                assert auth.checks[-1].headers["authorization"] == "Bearer bad"
            asked = http_auth.checks[0]
            assert (
                asked.path == "/check/http/a?x=1"
                and asked.headers["x-tenant"] == "t1"
                and "x-other" not in asked.headers
            )
            assert grpc_auth.checks[0].headers["x-other"] == "o"
            assert USER_HEADER not in http_auth.checks[0].headers

            # an auth service that cannot be resolved: ResolvedRefs=False, and its requests get 500
            assert (await _get(port, "/broken", {"Authorization": ALLOWED})).status_code == 500
            route = await served.get("HTTPRoute", "app")
            assert route is not None
            (parent,) = route["status"]["parents"]
            resolved = next(c for c in parent["conditions"] if c["type"] == "ResolvedRefs")
            assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")
            assert "externalAuth: Service default/nowhere not found" in resolved["message"]
    finally:
        http_auth.close()
        grpc_auth.close()
