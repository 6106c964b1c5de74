"""SecurityPolicy JWT live, with a remote JWKS and authorization by claims, scopes and method:
``serve`` on a directory with a real Envoy, real backends and an in-test JWKS server
(tests/support/jwts.py) publishing the public half of a key the test made.

Remote JWKS: a token signed with the published key gets through, fetched by Envoy from the
server's URI (an IP address: a cluster of the policy's own) or through a Service named by
``backendRefs``; a tampered token, one signed with a key the server does not publish, and none
get 401. Authorization: a token with the wanted claim and scope is allowed, one without the
claim or without the scope gets 403; a rule on methods lets GET through and denies POST, one on a
path prefix denies that path and those under it, not a longer name.
``failOpen``: a tampered token, or none, passes too. ``recomputeRoute``: the header a claim is
copied to picks the route (one matching that header) once the route is chosen again.
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
from tests.serve.test_security_policy_e2e import route, security_policy
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.jwts import JwksServer, rsa_key, tampered
from tests.support.live import envoy_serving, until, write_base

pytestmark = pytest.mark.timeout(60)

IP = "127.40.23.1"
JWKS_HOST = "127.40.23.2"
ISSUER = "https://issuer.example"


def header_route(name: str, host: str, header: str, value: str, service: str) -> dict[str, Any]:
    """A route of ``host`` for requests with ``header: value``, to ``service``."""
    rule = {
        "matches": [
            {
                "path": {"type": "PathPrefix", "value": "/"},
                "headers": [{"name": header, "value": value}],
            }
        ],
        "backendRefs": [h.backend_ref(service, 80)],
    }
    return h.http_route(name, "gw", [host], [rule])


async def call(
    port: int, host: str, token: str | None = None, method: str = "GET", path: str = "/"
) -> httpx.Response:
    headers = {"Host": host}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
        return await client.request(method, f"http://{IP}:{port}{path}", headers=headers)


async def test_remote_jwks_and_authorization_by_claims(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    key, stranger = rsa_key("published"), rsa_key("unpublished")
    jwks = JwksServer(JWKS_HOST, [key])
    h.write_manifests(
        tmp_path / "routes.yaml",
        [
            route("by-uri", "uri.example", "svc-a"),
            route("by-service", "service.example", "svc-b"),
            route("claims", "claims.example", "svc-a"),
            route("methods", "methods.example", "svc-b"),
            route("open", "open.example", "svc-b"),
            route("recompute", "recompute.example", "svc-a"),
            header_route("recompute-admin", "recompute.example", "x-role", "admin", "svc-b"),
        ],
    )
    provider = {"name": "remote", "issuer": ISSUER}
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            security_policy(
                "by-uri",
                "by-uri",
                {"jwt": {"providers": [{**provider, "remoteJWKS": {"uri": jwks.uri}}]}},
            ),
            security_policy(
                "by-service",
                "by-service",
                {
                    "jwt": {
                        "providers": [
                            {
                                **provider,
                                "remoteJWKS": {
                                    "uri": "http://jwks.default/jwks.json",
                                    "backendRefs": [{"name": "jwks", "port": 80}],
                                },
                            }
                        ]
                    }
                },
            ),
            *h.service("jwks", 80, jwks.port, jwks.host),
            security_policy(
                "claims",
                "claims",
                {
                    "jwt": {"providers": [{**provider, "remoteJWKS": {"uri": jwks.uri}}]},
                    "authorization": {
                        "defaultAction": "Deny",
                        "rules": [
                            {
                                "action": "Allow",
                                "principal": {
                                    "jwt": {
                                        "provider": "remote",
                                        "claims": [{"name": "org.role", "values": ["admin"]}],
                                        "scopes": ["read"],
                                    }
                                },
                            }
                        ],
                    },
                },
            ),
            security_policy(
                "recompute",
                "recompute",
                {
                    "jwt": {
                        "providers": [
                            {
                                **provider,
                                "remoteJWKS": {"uri": jwks.uri},
                                "claimToHeaders": [{"claim": "role", "header": "x-role"}],
                                "recomputeRoute": True,
                            }
                        ]
                    }
                },
            ),
            security_policy(
                "open",
                "open",
                {
                    "jwt": {
                        "failOpen": True,
                        "providers": [{**provider, "remoteJWKS": {"uri": jwks.uri}}],
                    }
                },
            ),
            security_policy(
                "methods",
                "methods",
                {
                    "authorization": {
                        "defaultAction": "Deny",
                        "rules": [
                            {
                                "action": "Deny",
                                "principal": {"clientCIDRs": ["127.0.0.0/8"]},
                                "operation": {"path": {"type": "PathPrefix", "value": "/admin"}},
                            },
                            {
                                "action": "Allow",
                                "principal": {"clientCIDRs": ["127.0.0.0/8"]},
                                "operation": {"methods": ["GET"]},
                            },
                        ],
                    }
                },
            ),
        ],
    )
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(jwks.close)
        await stack.enter_async_context(
            h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL)
        )

        await envoy_serving(IP, port)
        claims = {"iss": ISSUER, "sub": "u1", "exp": int(time.time()) + 3600}
        good = key.sign(claims)

        for host, body in (("uri.example", "A"), ("service.example", "B")):

            async def accepted(host: str = host) -> bool:
                return (await call(port, host, good)).status_code == 200

            await until(accepted, 15, f"a token signed with the published key on {host}")
            assert (await call(port, host, good)).text == body
            assert (await call(port, host)).status_code == 401
            forged = tampered(good, {**claims, "sub": "admin"})
            assert (await call(port, host, forged)).status_code == 401
            assert (await call(port, host, stranger.sign(claims))).status_code == 401
        assert "/jwks.json" in jwks.fetches  # Envoy fetched the key set

        admin = {**claims, "org": {"role": "admin"}, "scope": "write read"}
        assert (await call(port, "claims.example", key.sign(admin))).text == "A"
        no_role = {**admin, "org": {"role": "viewer"}}
        assert (await call(port, "claims.example", key.sign(no_role))).status_code == 403
        no_scope = {**admin, "scope": "write"}
        assert (await call(port, "claims.example", key.sign(no_scope))).status_code == 403
        assert (await call(port, "claims.example")).status_code == 401

        # the claim's header set, the route chosen again: the one matching that header
        admin_token = key.sign({**claims, "role": "admin"})
        assert (await call(port, "recompute.example", admin_token)).text == "B"
        assert (await call(port, "recompute.example", good)).text == "A"  # no role claim

        forged = tampered(good, {**claims, "sub": "admin"})
        assert (await call(port, "open.example", forged)).text == "B"
        assert (await call(port, "open.example")).text == "B"

        assert (await call(port, "methods.example")).text == "B"
        assert (await call(port, "methods.example", method="POST")).status_code == 403
        for denied in ("/admin", "/admin/users?x=1"):
            assert (await call(port, "methods.example", path=denied)).status_code == 403, denied
        assert (await call(port, "methods.example", path="/administrator")).text == "B"
