"""Envoy Gateway policies live: ``serve`` on a directory with a real Envoy and real backends.

A BackendTrafficPolicy's local rate limit lets the first N requests of the window through and
answers the N+1th with 429; a route-level policy overrides the Gateway-level one for its
route (and the Gateway-level one says so, as Envoy Gateway writes it); a policy written
before its target starts limiting once the target appears.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving, until, write_base

pytestmark = pytest.mark.timeout(60)

IP = "127.40.15.1"
EG = "gateway.envoyproxy.io"


def rate_limit(name: str, target_kind: str, target: str, requests: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": h.meta(name),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": target_kind, "name": target}
            ],
            # An hour: the window never refills while the test runs.
            "rateLimit": {
                "type": "Local",
                "local": {"rules": [{"limit": {"requests": requests, "unit": "Hour"}}]},
            },
        },
    }


def route(name: str, host: str, service: str) -> dict[str, Any]:
    return h.http_route(name, "gw", [host], [h.rule("/", [h.backend_ref(service, 80)])])


async def limited_after(port: int, host: str, body: str, n: int) -> None:
    """The first ``n`` requests reach the backend answering ``body``; the next one gets 429."""
    for i in range(n):
        reply = await h.fetch(IP, port, "/", host)
        assert reply is not None and reply.status == 200 and reply.body == body, (host, i, reply)
    reply = await h.fetch(IP, port, "/", host)
    assert reply is not None and reply.status == 429, (host, reply)


async def test_rate_limit_route_overrides_gateway_and_a_late_target(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            rate_limit("per-gateway", "Gateway", "gw", 3),
            rate_limit("per-route", "HTTPRoute", "b", 1),
            rate_limit("early", "HTTPRoute", "late", 2),  # its route comes later
        ],
    )
    h.write_manifests(
        tmp_path / "routes.yaml",
        [route("a", "a.example", "svc-a"), route("b", "b.example", "svc-b")],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await envoy_serving(IP, port)
        await limited_after(port, "a.example", "A", 3)  # the Gateway's limit
        await limited_after(port, "b.example", "B", 1)  # its own, over the Gateway's

        async def overridden() -> dict[str, Any] | None:
            pol = await served.get("BackendTrafficPolicy", "per-gateway")
            entries = (pol or {}).get("status", {}).get("ancestors", [])
            return next(
                (dict(c) for e in entries for c in e["conditions"] if c["type"] == "Overridden"),
                None,
            )

        cond, _ = await until(overridden, 10, "the Gateway-level policy Overridden")
        assert cond["reason"] == "Overridden"
        assert cond["message"] == (
            "This policy is being overridden by other backendTrafficPolicies for these routes: "
            "[default/b]"
        )

        async def early_ancestors() -> list[Any]:
            pol = await served.get("BackendTrafficPolicy", "early")
            return list((pol or {}).get("status", {}).get("ancestors", []))

        assert await early_ancestors() == []  # no target of ours yet: nothing claimed
        h.write_manifests(tmp_path / "late.yaml", [route("late", "late.example", "svc-a")])

        async def late_served() -> bool:
            reply = await h.fetch(IP, port, "/", "late.example", timeout=0.5)
            return reply is not None and reply.status == 200

        await until(late_served, 10, "the late route served")
        # one request went through above: one more, then 429
        await limited_after(port, "late.example", "A", 1)
        entries, _ = await until(early_ancestors, 10, "the early policy's ancestors")
        assert entries[0]["ancestorRef"]["name"] == "gw"
        assert {c["type"]: c["status"] for c in entries[0]["conditions"]} == {"Accepted": "True"}
