"""SecurityPolicy extAuth live: ``serve`` on a directory with a real Envoy, real backends and an
in-test HTTP auth service (tests/support/authservers.py).

``bodyToExtAuth``: the request's body reaches the auth service with the headers, a body over
``maxRequestBytes`` gets 413. ``statusOnError``: with the auth service down, a request gets that
status; with ``failOpen`` it reaches the backend instead. ``timeout``: an auth service that takes
the request and never answers is given up on after the policy's timeout (the client's own limit is
well below the 10 s default), the request getting ``statusOnError``. ``recomputeRoute``: the
header the service adds picks the route (one matching that header) once it is chosen again.
``contextExtensions``: a gRPC auth service gets them, inline and from a ConfigMap, with each check.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.serve.test_security_jwt_e2e import header_route
from tests.serve.test_security_policy_e2e import route, security_policy
from tests.support.authservers import ALLOWED, USER, USER_HEADER, GrpcAuth, HttpAuth
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving, until, write_base

pytestmark = pytest.mark.timeout(60)

IP = "127.40.24.1"
AUTH_HOST = "127.40.24.2"


async def post(port: int, host: str, body: bytes) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return await client.post(
            f"http://{IP}:{port}/",
            headers={"Host": host, "Authorization": ALLOWED},
            content=body,
        )


def ext_auth(service: str, port: int, **extra: Any) -> dict[str, Any]:
    return {"extAuth": {"http": {"backendRef": {"name": service, "port": port}}, **extra}}


async def test_ext_auth_body_status_on_error_fail_open_and_timeout(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    auth, grpc_auth = HttpAuth(AUTH_HOST), GrpcAuth(AUTH_HOST)
    down = free_port(AUTH_HOST)  # nothing listens there
    silent = socket.socket()  # takes connections (its backlog), never answers
    silent.bind((AUTH_HOST, 0))
    silent.listen(16)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("body", "body.example", "svc-a"),
            route("down", "down.example", "svc-a"),
            route("open", "open.example", "svc-b"),
            route("slow", "slow.example", "svc-b"),
            route("recompute", "recompute.example", "svc-a"),
            route("context", "context.example", "svc-b"),
            header_route("recompute-user", "recompute.example", USER_HEADER, USER, "svc-b"),
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            *h.service("auth", 9002, auth.port, auth.host),
            *h.service("down", 9003, down, AUTH_HOST),
            *h.service("grpc-auth", 9005, grpc_auth.port, grpc_auth.host),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": h.meta("plans"),
                "data": {"plan": "gold"},
            },
            security_policy(
                "context",
                "context",
                {
                    "extAuth": {
                        "grpc": {"backendRef": {"name": "grpc-auth", "port": 9005}},
                        "contextExtensions": [
                            {"name": "tenant", "value": "t1"},
                            {
                                "name": "plan",
                                "type": "ValueRef",
                                "valueRef": {
                                    "group": "",
                                    "kind": "ConfigMap",
                                    "name": "plans",
                                    "key": "plan",
                                },
                            },
                        ],
                    }
                },
            ),
            *h.service("silent", 9004, silent.getsockname()[1], AUTH_HOST),
            security_policy(
                "body", "body", ext_auth("auth", 9002, bodyToExtAuth={"maxRequestBytes": 64})
            ),
            security_policy("down", "down", ext_auth("down", 9003, statusOnError=503)),
            security_policy(
                "recompute",
                "recompute",
                {
                    "extAuth": {
                        "http": {
                            "backendRef": {"name": "auth", "port": 9002},
                            "headersToBackend": [USER_HEADER],
                        },
                        "recomputeRoute": True,
                    }
                },
            ),
            security_policy("open", "open", ext_auth("down", 9003, failOpen=True)),
            security_policy(
                "slow", "slow", ext_auth("silent", 9004, timeout="300ms", statusOnError=504)
            ),
        ],
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(auth.close)
        stack.callback(grpc_auth.close)
        stack.callback(silent.close)
        await stack.enter_async_context(
            h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL)
        )

        await envoy_serving(IP, port)

        async def guarded() -> bool:
            return (await post(port, "body.example", b"")).status_code == 200 and bool(auth.checks)

        await until(guarded, 20, "the auth service asked about route body")
        ok = await post(port, "body.example", b"hello auth")
        assert (ok.status_code, ok.text) == (200, "A")
        assert auth.checks[-1].body == b"hello auth"  # the body went to the auth service
        assert (await post(port, "body.example", b"x" * 100)).status_code == 413

        assert (await post(port, "down.example", b"")).status_code == 503
        opened = await post(port, "open.example", b"")
        assert (opened.status_code, opened.text) == (200, "B")
        assert (await post(port, "slow.example", b"")).status_code == 504
        # the service's header on the request, the route chosen again: the one matching it
        assert (await post(port, "recompute.example", b"")).text == "B"
        # the context extensions (inline, and a ConfigMap's key) reach the gRPC service
        assert (await post(port, "context.example", b"")).text == "B"
        assert grpc_auth.checks[-1].context == {"tenant": "t1", "plan": "gold"}


async def test_ext_auth_path_override(tmp_path: Path, backends: dict[str, Any]) -> None:
    """``http.pathOverride``: the auth service is asked at that path in place of the request's
    (``http.path`` instead: put before it)."""
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    auth = HttpAuth(AUTH_HOST)
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            route("override", "override.example", "svc-a"),
            route("prefix", "prefix.example", "svc-b"),
            *h.service("auth", 9002, auth.port, auth.host),
            security_policy(
                "override",
                "override",
                {
                    "extAuth": {
                        "http": {
                            "backendRef": {"name": "auth", "port": 9002},
                            "pathOverride": "/check",
                        }
                    }
                },
            ),
            security_policy(
                "prefix",
                "prefix",
                {
                    "extAuth": {
                        "http": {"backendRef": {"name": "auth", "port": 9002}, "path": "/auth"}
                    }
                },
            ),
        ],
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(auth.close)
        await stack.enter_async_context(
            h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL)
        )
        await envoy_serving(IP, port, host="override.example", status=403)

        async def get(host: str) -> httpx.Response:
            async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
                return await client.get(
                    f"http://{IP}:{port}/some/page?q=1",
                    headers={"Host": host, "Authorization": ALLOWED},
                )

        reply = await get("override.example")
        assert (reply.status_code, reply.text) == (200, "A")
        assert auth.checks[-1].path == "/check"
        reply = await get("prefix.example")
        assert (reply.status_code, reply.text) == (200, "B")
        assert auth.checks[-1].path == "/auth/some/page?q=1"
