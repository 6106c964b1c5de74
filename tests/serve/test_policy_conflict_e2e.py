"""Two policies on one target, and a policy before its target, live: ``serve`` on a directory
with a real Envoy (issue 15, order independence).

Two SecurityPolicies target the same HTTPRoute: the older one applies (its authorization
denies the client: 403) and the younger one's status ancestor says ``Accepted=False``,
``Conflicted``, in Envoy Gateway's words. The older one deleted, the younger one applies
(200) and is ``Accepted``. A policy written before its route applies once the route arrives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until, write_base
from tests.support.policies import policy

pytestmark = pytest.mark.timeout(60)

IP = "127.40.21.1"


def authorization(name: str, route: str, allow: bool, created: str) -> dict[str, Any]:
    """A SecurityPolicy on HTTPRoute ``route`` whose only rule allows (or denies) loopback."""
    rule = {"action": "Allow" if allow else "Deny", "principal": {"clientCIDRs": ["127.0.0.0/8"]}}
    out = policy(
        "SecurityPolicy",
        name,
        "HTTPRoute",
        route,
        {
            "authorization": {
                "defaultAction": "Deny" if allow else "Allow",
                "rules": [rule],
            }
        },
    )
    out["metadata"]["creationTimestamp"] = created
    return out


def route(name: str, host: str) -> dict[str, Any]:
    return h.http_route(name, "gw", [host], [h.rule("/", [h.backend_ref("svc-a", 80)])])


async def test_conflicting_policies_and_a_policy_before_its_route(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, IP, port, backends)
    h.write_manifests(tmp_path / "routes.yaml", [route("shared", "shared.example")])
    h.write_manifests(
        tmp_path / "older.yaml",
        [authorization("older", "shared", allow=False, created="2026-01-01T00:00:00Z")],
    )
    h.write_manifests(
        tmp_path / "younger.yaml",
        [
            authorization("younger", "shared", allow=True, created="2026-02-01T00:00:00Z"),
            authorization("early", "late", allow=False, created="2026-03-01T00:00:00Z"),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:

        async def status(host: str, want: int) -> bool:
            reply = await h.fetch(IP, port, "/", host, timeout=0.5)
            return reply is not None and reply.status == want

        async def accepted(name: str) -> list[tuple[str, str, str]]:
            pol = await served.get("SecurityPolicy", name)
            return [
                (str(c["status"]), str(c["reason"]), str(c["message"]))
                for e in (pol or {}).get("status", {}).get("ancestors", [])
                for c in e["conditions"]
                if c["type"] == "Accepted"
            ]

        # The older policy holds the route: its rule denies loopback.
        await until(lambda: status("shared.example", 403), 20, "the older policy denying")
        conflicted = (
            "False",
            "Conflicted",
            "Unable to target HTTPRoute shared, another SecurityPolicy has already attached to it",
        )
        await until(
            lambda: _equals(accepted("younger"), [conflicted]), 10, "the younger one Conflicted"
        )
        assert await accepted("older") == [("True", "Accepted", "Policy has been accepted.")]
        assert await accepted("early") == []  # its route does not exist yet

        # The older one deleted: the younger one applies, and says so.
        (tmp_path / "older.yaml").unlink()
        await until(lambda: status("shared.example", 200), 10, "the younger policy allowing")
        await until(
            lambda: _equals(
                accepted("younger"), [("True", "Accepted", "Policy has been accepted.")]
            ),
            10,
            "the younger one Accepted",
        )

        # The route of the early policy arrives: it is denied from the start.
        h.write_manifests(tmp_path / "late.yaml", [route("late", "late.example")])
        await until(lambda: status("late.example", 403), 10, "the early policy applied")
        assert await accepted("early") == [("True", "Accepted", "Policy has been accepted.")]
        reply = await h.fetch(IP, port, "/", "shared.example")
        assert reply is not None and reply.status == 200


async def _equals(got: Any, want: Any) -> bool:
    return bool(await got == want)
