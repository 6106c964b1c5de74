"""SecurityPolicy live: ``serve`` on a directory with a real Envoy and real backends.

Basic auth: no credentials or wrong ones get 401, a user of the htpasswd Secret gets through;
a policy whose Secret is missing says so in its status and starts to apply once the Secret is
written. Authorization: a client address in a denied CIDR gets 403 (two loopback source
addresses, 127.0.0.1 and 127.0.0.2, are the two clients), the others reach the backend; a header
rule allows past a default Deny. CORS: a preflight from an allowed origin (a wildcard one) is
answered by Envoy with that origin reflected, one from another origin gets no CORS headers.
API key auth: no key or an unknown one gets 401, a key of the credential Secret (in a header or
a query parameter) gets through. JWT: a token signed with a key the test made (RS256 inline,
ES256 from a ConfigMap) gets through, a tampered one, an expired one, one of another issuer and
none get 401. extAuth: an in-test HTTP auth service (tests/support/authservers.py) by its Service
decides: its denial (403, its body) reaches the client, what it allows reaches the backend.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.authservers import ALLOWED, HttpAuth
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.jwts import SigningKey, ec_key, rsa_key, tampered
from tests.support.live import envoy_serving, until, write_base

pytestmark = pytest.mark.timeout(60)

IP = "127.40.16.1"
EG = "gateway.envoyproxy.io"


def security_policy(name: str, route: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "SecurityPolicy",
        "metadata": h.meta(name),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route}
            ],
            **spec,
        },
    }


def htpasswd_secret(name: str, users: dict[str, str]) -> dict[str, Any]:
    lines = "".join(
        f"{u}:{{SHA}}{base64.b64encode(hashlib.sha1(p.encode()).digest()).decode()}\n"
        for u, p in users.items()
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": h.meta(name),
        "type": "Opaque",
        "data": {".htpasswd": base64.b64encode(lines.encode()).decode()},
    }


def route(name: str, host: str, service: str) -> dict[str, Any]:
    return h.http_route(name, "gw", [host], [h.rule("/", [h.backend_ref(service, 80)])])


async def get(
    port: int,
    host: str,
    *,
    source: str = "127.0.0.1",
    auth: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(transport=transport, timeout=5.0, trust_env=False) as client:
        return await client.get(
            f"http://{IP}:{port}/", headers={"Host": host, **(headers or {})}, auth=auth
        )


async def test_security_policy_features(tmp_path: Path, backends: dict[str, Any]) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("a", "a.example", "svc-a"),
            route("b", "b.example", "svc-b"),
            route("c", "c.example", "svc-a"),
            route("d", "d.example", "svc-b"),
            route("e", "e.example", "svc-a"),
            route("f", "f.example", "svc-b"),
            route("g", "g.example", "svc-a"),
            route("h", "h.example", "svc-b"),
        ],
    )
    rsa, ec = rsa_key(), ec_key()
    auth = HttpAuth("127.40.16.2")
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            security_policy("basic", "a", {"basicAuth": {"users": {"name": "users"}}}),
            security_policy("late-secret", "d", {"basicAuth": {"users": {"name": "later"}}}),
            security_policy(
                "cidr",
                "b",
                {
                    "authorization": {
                        "defaultAction": "Allow",
                        "rules": [
                            {"action": "Deny", "principal": {"clientCIDRs": ["127.0.0.2/32"]}}
                        ],
                    }
                },
            ),
            security_policy(
                "header",
                "c",
                {
                    "authorization": {
                        "rules": [
                            {
                                "name": "team",
                                "action": "Allow",
                                "principal": {
                                    "headers": [{"name": "x-team", "values": ["blue", "green"]}]
                                },
                            }
                        ]
                    }
                },
            ),
            security_policy(
                "cors",
                "e",
                {
                    "cors": {
                        "allowOrigins": ["https://*.app.example"],
                        "allowMethods": ["GET", "PUT"],
                        "allowHeaders": ["x-token"],
                        "exposeHeaders": ["x-trace"],
                        "maxAge": "10m",
                        "allowCredentials": True,
                    }
                },
            ),
            security_policy(
                "keys",
                "f",
                {
                    "apiKeyAuth": {
                        "credentialRefs": [{"name": "api-keys"}],
                        "extractFrom": [{"headers": ["x-api-key"]}, {"params": ["key"]}],
                    }
                },
            ),
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": h.meta("api-keys"),
                "stringData": {"client-1": "s3cret"},
            },
            security_policy(
                "jwt",
                "g",
                {
                    "jwt": {
                        "providers": [
                            {
                                "name": "rsa",
                                "issuer": "https://issuer.example",
                                "audiences": ["gw"],
                                "localJWKS": {"type": "Inline", "inline": rsa.jwks()},
                            },
                            {
                                "name": "ec",
                                "issuer": "https://other.example",
                                "localJWKS": {
                                    "type": "ValueRef",
                                    "valueRef": {
                                        "group": "",
                                        "kind": "ConfigMap",
                                        "name": "ec-jwks",
                                    },
                                },
                            },
                        ]
                    }
                },
            ),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": h.meta("ec-jwks"),
                "data": {"jwks": ec.jwks()},
            },
            security_policy(
                "ext",
                "h",
                {
                    "extAuth": {
                        "http": {"backendRef": {"name": "auth", "port": 9002}, "path": "/check"},
                        "headersToExtAuth": ["x-tenant"],
                    }
                },
            ),
            *h.service("auth", 9002, auth.port, auth.host),
            htpasswd_secret("users", {"alice": "wonderland", "bob": "builder"}),
        ],
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(auth.close)
        served = await stack.enter_async_context(
            h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL)
        )
        await _checks(served, tmp_path, port, rsa, ec, auth)


async def _checks(
    served: Any, tmp_path: Path, port: int, rsa: SigningKey, ec: SigningKey, auth: HttpAuth
) -> None:
    """Each feature through the Envoy ``served`` runs, on its own route."""

    await envoy_serving(IP, port)

    # basic auth
    assert (await get(port, "a.example")).status_code == 401
    assert (await get(port, "a.example", auth=("alice", "nope"))).status_code == 401
    assert (await get(port, "a.example", auth=("mallory", "wonderland"))).status_code == 401
    for user, password in (("alice", "wonderland"), ("bob", "builder")):
        ok = await get(port, "a.example", auth=(user, password))
        assert (ok.status_code, ok.text) == (200, "A"), user

    # authorization by client address: 127.0.0.2 denied, 127.0.0.1 let through (default Allow)
    denied = await get(port, "b.example", source="127.0.0.2")
    assert denied.status_code == 403
    allowed = await get(port, "b.example", source="127.0.0.1")
    assert (allowed.status_code, allowed.text) == (200, "B")
    # authorization by header, default Deny
    assert (await get(port, "c.example")).status_code == 403
    assert (await get(port, "c.example", headers={"x-team": "red"})).status_code == 403
    assert (await get(port, "c.example", headers={"x-team": "green"})).text == "A"

    # CORS: the preflight answered by Envoy, the allowed origin reflected
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:

        def preflight(origin: str) -> Any:
            return client.options(
                f"http://{IP}:{port}/",
                headers={
                    "Host": "e.example",
                    "Origin": origin,
                    "Access-Control-Request-Method": "PUT",
                    "Access-Control-Request-Headers": "x-token",
                },
            )

        answer = await preflight("https://web.app.example")
        assert answer.status_code == 200 and answer.text == ""  # Envoy's, not the backend's "A"
        assert answer.headers["access-control-allow-origin"] == "https://web.app.example"
        assert "PUT" in answer.headers["access-control-allow-methods"]
        assert answer.headers["access-control-allow-headers"] == "x-token"
        assert answer.headers["access-control-max-age"] == "600"
        assert answer.headers["access-control-allow-credentials"] == "true"
        other = await preflight("https://evil.example")
        assert "access-control-allow-origin" not in other.headers
        simple = await client.get(
            f"http://{IP}:{port}/",
            headers={"Host": "e.example", "Origin": "https://web.app.example"},
        )
        assert simple.text == "A" and simple.headers["access-control-expose-headers"] == "x-trace"
        assert simple.headers["access-control-allow-origin"] == "https://web.app.example"

    # API key auth
    assert (await get(port, "f.example")).status_code == 401
    assert (await get(port, "f.example", headers={"x-api-key": "guess"})).status_code == 401
    assert (await get(port, "f.example", headers={"x-api-key": "s3cret"})).text == "B"
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        by_param = await client.get(
            f"http://{IP}:{port}/?key=s3cret", headers={"Host": "f.example"}
        )
        assert (by_param.status_code, by_param.text) == (200, "B")

    # JWT
    claims = {
        "iss": "https://issuer.example",
        "aud": "gw",
        "sub": "u1",
        "exp": int(time.time()) + 3600,
    }
    good = rsa.sign(claims)

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    assert (await get(port, "g.example", headers=bearer(good))).text == "A"
    assert (
        await get(
            port, "g.example", headers=bearer(ec.sign({**claims, "iss": "https://other.example"}))
        )
    ).text == "A"
    assert (await get(port, "g.example")).status_code == 401
    assert (
        await get(port, "g.example", headers=bearer(tampered(good, {**claims, "sub": "admin"})))
    ).status_code == 401
    assert (
        await get(port, "g.example", headers=bearer(rsa.sign({**claims, "exp": 1000})))
    ).status_code == 401
    assert (
        await get(
            port, "g.example", headers=bearer(rsa.sign({**claims, "iss": "https://evil.example"}))
        )
    ).status_code == 401
    assert (
        await get(port, "g.example", headers=bearer(ec.sign(claims)))
    ).status_code == 401  # not ec's issuer

    # extAuth: the service's verdict
    denied = await get(port, "h.example", headers={"x-tenant": "t1"})
    assert (denied.status_code, denied.text) == (403, "denied by http-auth")
    allowed = await get(port, "h.example", headers={"Authorization": ALLOWED, "x-tenant": "t1"})
    assert (allowed.status_code, allowed.text) == (200, "B")
    assert auth.checks[-1].path == "/check/" and auth.checks[-1].headers["x-tenant"] == "t1"

    # a missing Secret: refused, located, nothing applied; then written: applied
    def accepted(status: str) -> Any:
        async def probe() -> dict[str, Any] | None:
            pol = await served.get("SecurityPolicy", "late-secret")
            entries = (pol or {}).get("status", {}).get("ancestors", [])
            conds = [dict(c) for e in entries for c in e["conditions"] if c["type"] == "Accepted"]
            return conds[0] if conds and conds[0]["status"] == status else None

        return probe

    cond, _ = await until(accepted("False"), 10, "the late-secret policy refused")
    assert (cond["status"], cond["reason"]) == ("False", "Invalid")
    assert cond["message"] == "spec.basicAuth.users: Secret default/later does not exist"
    assert (await get(port, "d.example")).text == "B"  # not applied
    h.write_manifests(tmp_path / "later.yaml", [htpasswd_secret("later", {"carol": "pw"})])

    async def guarded() -> bool:
        return (await get(port, "d.example")).status_code == 401

    await until(guarded, 10, "the late Secret's users guarding route d")
    assert (await get(port, "d.example", auth=("carol", "pw"))).text == "B"
    cond, _ = await until(accepted("True"), 10, "the late-secret policy accepted")
    assert cond["reason"] == "Accepted"
