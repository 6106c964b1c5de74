"""SecurityPolicy ``backendSettings`` live: ``serve`` on a directory with a real Envoy, real
backends, in-test auth services that fail every other check (tests/support/authservers.py) and
JWKS servers whose first answer is a 503 (tests/support/jwts.py).

extAuth: with ``backendSettings.retry`` on 5xx, every request gets through (the failed check is
retried, so each request costs the service two checks); without it, every other request is
refused. remoteJWKS: with ``backendSettings.retry``, Envoy's failed first fetch is retried at once
and a token signed with the published key gets through on its first try; without it, the JWKS
server sees that one failed fetch only. Both services are reached through the copies of their
clusters that carry the settings' circuit breaker and connect timeout.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.serve.test_security_jwt_e2e import ISSUER
from tests.serve.test_security_policy_e2e import route, security_policy
from tests.support.authservers import ALLOWED, HttpAuth
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.jwts import JwksServer, rsa_key
from tests.support.live import envoy_serving, until, write_base

pytestmark = pytest.mark.timeout(60)

IP = "127.40.31.1"
SERVICE_HOST = "127.40.31.2"

RETRY = {
    "numRetries": 2,
    "retryOn": {"triggers": ["5xx"]},
    "perRetry": {"backOff": {"baseInterval": "10ms", "maxInterval": "50ms"}},
}
SETTINGS = {
    "retry": RETRY,
    "circuitBreaker": {"maxConnections": 16},
    "timeout": {"tcp": {"connectTimeout": "2s"}},
}


async def get(port: int, host: str, authorization: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return await client.get(
            f"http://{IP}:{port}/", headers={"Host": host, "Authorization": authorization}
        )


def ext_auth(service: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    http: dict[str, Any] = {"backendRefs": [{"name": service, "port": 9002}]}
    if settings is not None:
        http["backendSettings"] = settings
    return {"extAuth": {"http": http}}


def jwt(uri: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    remote: dict[str, Any] = {"uri": uri, "failedRefetchDuration": "1h"}
    if settings is not None:
        remote["backendSettings"] = settings
    return {"jwt": {"providers": [{"name": "remote", "issuer": ISSUER, "remoteJWKS": remote}]}}


async def test_auth_service_and_jwks_retried_by_backend_settings(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    retried, plain = HttpAuth(SERVICE_HOST, flaky=True), HttpAuth(SERVICE_HOST, flaky=True)
    key = rsa_key("published")
    jwks_retried = JwksServer(SERVICE_HOST, [key], failures=1)
    jwks_plain = JwksServer(SERVICE_HOST, [key], failures=1)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("retried", "retried.example", "svc-a"),
            route("plain", "plain.example", "svc-b"),
            route("jwks-retried", "jwks-retried.example", "svc-a"),
            route("jwks-plain", "jwks-plain.example", "svc-b"),
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            *h.service("auth-retried", 9002, retried.port, SERVICE_HOST),
            *h.service("auth-plain", 9002, plain.port, SERVICE_HOST),
            security_policy("retried", "retried", ext_auth("auth-retried", SETTINGS)),
            security_policy("plain", "plain", ext_auth("auth-plain", None)),
            security_policy("jwks-retried", "jwks-retried", jwt(jwks_retried.uri, SETTINGS)),
            security_policy("jwks-plain", "jwks-plain", jwt(jwks_plain.uri, None)),
        ],
    )
    async with contextlib.AsyncExitStack() as stack:
        for server in (retried, plain, jwks_retried, jwks_plain):
            stack.callback(server.close)
        await stack.enter_async_context(
            h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL)
        )
        await envoy_serving(IP, port)

        # extAuth: the failed check retried, every request through, two checks each
        for i in range(4):
            ok = await get(port, "retried.example", ALLOWED)
            assert (ok.status_code, ok.text) == (200, "A")
            assert len(retried.checks) == 2 * (i + 1)
        # without the retry: every other request refused with the service's failure
        statuses = [(await get(port, "plain.example", ALLOWED)).status_code for _ in range(4)]
        assert sorted(statuses) == [200, 200, 403, 403] and len(plain.checks) == 4, statuses

        # remoteJWKS, fetched by Envoy when it takes the configuration: with the retry, the first
        # fetch's 503 retried at once; without it, the one failed fetch (the next is an hour
        # away, or on a request, and none is sent there)
        async def fetched() -> bool:
            return len(jwks_retried.fetches) == 2 and len(jwks_plain.fetches) == 1

        await until(fetched, 15, "the JWKS fetched, and retried only with the retry")
        token = key.sign({"iss": ISSUER, "sub": "u1", "exp": int(time.time()) + 3600})
        reply = await get(port, "jwks-retried.example", f"Bearer {token}")
        assert (reply.status_code, reply.text) == (200, "A")
        assert len(jwks_retried.fetches) == 2  # the keys the retry got, kept
        assert len(jwks_plain.fetches) == 1
