"""``gateweave explain`` for Envoy Gateway policies: which one governs a route or a Gateway's
listener and by which scope, which lost and why, and a policy's own outcome."""

from __future__ import annotations

from gateweave.explain import explain
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions
from tests.translate.test_policies import base, models, policy


def snapshot() -> Snapshot:
    return Snapshot.from_objects(
        models(
            [
                *base(),
                policy("gwp", created="2026-01-01T00:00:00Z"),
                policy("late", created="2026-02-01T00:00:00Z"),
                policy("rp", target=("HTTPRoute", "r1"), spec={"useClientProtocol": True}),
                policy("away", target=("Gateway", "absent")),
            ]
        )
    )


def test_route_shows_governing_policy_scope_and_refusal() -> None:
    lines = explain(snapshot(), TranslateOptions(), "HTTPRoute", "ns", "r2")
    assert "  policies:" in lines
    assert any(
        "BackendTrafficPolicy on listener http" in line
        and "BackendTrafficPolicy ns/gwp, holding the Gateway ns/gw" in line
        for line in lines
    ), lines
    r1 = explain(snapshot(), TranslateOptions(), "HTTPRoute", "ns", "r1")
    assert any(
        "BackendTrafficPolicy ns/rp, holding the route ns/r1" in line
        and "NOT applied: spec.useClientProtocol is not supported" in line
        for line in r1
    ), r1


def test_gateway_shows_losers_and_policy_its_outcome() -> None:
    lines = explain(snapshot(), TranslateOptions(), "Gateway", "ns", "gw")
    assert any(
        "BackendTrafficPolicy ns/late lost the Gateway ns/gw: Unable to target Gateway gw" in line
        for line in lines
    ), lines
    gwp = explain(snapshot(), TranslateOptions(), "BackendTrafficPolicy", "ns", "gwp")
    assert "  holds the Gateway ns/gw" in gwp
    assert "  overridden for the route ns/r1 (held by another BackendTrafficPolicy)" in gwp
    away = explain(snapshot(), TranslateOptions(), "BackendTrafficPolicy", "ns", "away")
    assert any(line.startswith("  target Gateway ns/absent: not found") for line in away), away
