"""A BackendTrafficPolicy's responseOverride, live: ``serve`` with a real Envoy.

A backend's 500 on a governed route reaches the client as the override says: its body (inline,
or a ConfigMap's ``response.body``), content type, headers added and set, and status (else the
backend's); the backend's other answers, and every answer on a route the policy does not
govern, pass as the backend sent them.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.flaky import FlakyServer
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving
from tests.support.policies import backend_traffic_policy as btp

pytestmark = pytest.mark.timeout(60)

IP = "127.40.20.1"
BODY = '{"error": "backend down (100%)"}'
PAGE = "<p>try again later</p>"

_keys = itertools.count()


def failing() -> str:
    """A path the backend answers with 500 (once: each call gives a new one)."""
    return f"/fail-once/{next(_keys)}"


def override(match: dict[str, object], response: dict[str, object]) -> dict[str, object]:
    return {"match": {"statusCodes": [match]}, "response": response}


async def test_backend_errors_overridden(tmp_path: Path, flaky: FlakyServer) -> None:
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *h.service("backend", 80, flaky.port),
            *(
                h.http_route(
                    name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("backend", 80)])]
                )
                for name in ("inline", "paged", "plain")
            ),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": h.meta("pages"),
                "data": {"response.body": PAGE},
            },
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            btp(
                "inline",
                "inline",
                {
                    "responseOverride": [
                        override(
                            {"type": "Value", "value": 500},
                            {
                                "contentType": "application/json",
                                "body": {"type": "Inline", "inline": BODY},
                                "statusCode": 503,
                                "header": {
                                    "add": [{"name": "X-Why", "value": "100% down"}],
                                    "set": [{"name": "Retry-After", "value": "30"}],
                                },
                            },
                        )
                    ]
                },
            ),
            btp(
                "paged",
                "paged",
                {
                    "responseOverride": [
                        override(
                            {"type": "Range", "range": {"start": 500, "end": 599}},
                            {
                                "contentType": "text/html",
                                "body": {
                                    "type": "ValueRef",
                                    "valueRef": {"group": "", "kind": "ConfigMap", "name": "pages"},
                                },
                            },
                        )
                    ]
                },
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="plain.example", status=200)

        async def get(host: str, path: str) -> tuple[int, str | None, str]:
            reply = await h.fetch(IP, port, path, host)
            assert reply is not None
            headers = {k.lower(): v for k, v in reply.headers.items()}
            return reply.status, headers.get("content-type"), reply.body

        assert await get("inline.example", "/ok") == (200, "text/plain", "200 /ok")
        assert await get("inline.example", failing()) == (503, "application/json", BODY)
        reply = await h.fetch(IP, port, failing(), "inline.example")
        assert reply is not None
        headers = {k.lower(): v for k, v in reply.headers.items()}
        assert (headers.get("x-why"), headers.get("retry-after")) == ("100% down", "30")
        reply = await h.fetch(IP, port, "/ok", "inline.example")
        assert reply is not None and "x-why" not in {k.lower() for k in reply.headers}
        assert await get("paged.example", failing()) == (500, "text/html", PAGE)
        path = failing()
        assert await get("plain.example", path) == (500, "text/plain", f"500 {path}")


async def test_backend_error_redirected(tmp_path: Path, flaky: FlakyServer) -> None:
    """An override's ``redirect``: the request that got the backend's 500 is sent again inside
    Envoy to the URL the redirect makes of it (here a full path on the same route), and the
    client gets that request's answer under the redirect's status; a request the override does
    not match gets the backend's answer."""
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *h.service("backend", 80, flaky.port),
            h.http_route(
                "redirecting",
                "gw",
                ["redirecting.example"],
                [h.rule("/", [h.backend_ref("backend", 80)])],
            ),
            btp(
                "redirecting",
                "redirecting",
                {
                    "responseOverride": [
                        {
                            "match": {"statusCodes": [{"type": "Value", "value": 500}]},
                            "redirect": {
                                "path": {"type": "ReplaceFullPath", "replaceFullPath": "/landing"},
                                "statusCode": 301,
                            },
                        }
                    ]
                },
            ),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="redirecting.example", status=200)
        reply = await h.fetch(IP, port, failing(), "redirecting.example")
        assert reply is not None
        assert (reply.status, reply.body) == (301, "200 /landing")
        reply = await h.fetch(IP, port, "/ok", "redirecting.example")  # not matched: passes
        assert reply is not None and (reply.status, reply.body) == (200, "200 /ok")
