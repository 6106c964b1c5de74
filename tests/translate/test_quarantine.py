"""Quarantined route objects (what a Gateway's Envoy rejects): translate leaves them out, and
the incremental translator agrees with a full one.

How the data plane finds them: tests/xds/test_culprits.py; live: tests/serve/test_nack_isolation.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from tests.support.incremental import Driver, Op, ops
from tests.support.quarantine import NS, route_names, route_objects
from tests.support.variants import BASE, universe

ENVOY = (
    "the Envoy of Gateway default/gw rejects it: regex '/x' RE2 program size of 50 > max program "
    "size of 30"
)


# ---------------------------------------------------------------- translate


def test_a_rejected_route_is_left_out_with_envoys_message() -> None:
    snap = Snapshot.from_objects(route_objects("a", "bad", "c"))
    res = translate(snap, TranslateOptions(rejected={("HTTPRoute", NS, "bad"): ENVOY}))
    (gw,) = res.xds.values()
    assert route_names(gw) == [f"httproute/{NS}/{n}/rule/0/match/0" for n in ("a", "c")]
    status: Any = res.statuses[("HTTPRoute", NS, "bad")]
    (parent,) = status["parents"]
    accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert accepted["message"] == "left out until it changes: " + ENVOY
    gateway: Any = res.statuses[("Gateway", NS, "gw")]
    listener = gateway["listeners"][0]
    assert listener["attachedRoutes"] == 2
    # Without the quarantine the same route is served: only the option decides.
    assert len(route_names(translate(snap).xds[f"{NS}/gw"])) == 3


# ---------------------------------------------------------------- incremental == full


class QuarantineDriver(Driver):
    """Driver whose op (-2, n) puts the n-th route in or out of the quarantine."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.routes = [it.key for it in self.u.items if it.key.kind in ("HTTPRoute", "GRPCRoute")]
        self.rejected: dict[tuple[str, str, str], str] = {}

    def options(self) -> TranslateOptions:
        return TranslateOptions(dataplane=dict(self.dataplane), rejected=dict(self.rejected))

    def apply(self, op: Op) -> None:
        i, what = op
        if i != -2:
            super().apply(op)
            return
        key = tuple(self.routes[what % len(self.routes)])
        if self.rejected.pop(key, None) is None:  # type: ignore[arg-type]
            self.rejected[key] = f"the Envoy of Gateway x/y rejects it: message {what}"  # type: ignore[index]


@st.composite
def quarantine_ops(draw: st.DrawFn, u: Any) -> list[Op]:
    toggles = st.tuples(st.just(-2), st.integers(0, 1000))
    plan = draw(ops(u, max_size=30))
    extra = draw(st.lists(toggles, min_size=1, max_size=15))
    order = draw(st.permutations(plan + extra))
    return list(order)


@pytest.mark.parametrize("name", ["union", "listenersets", "attached-routes"])
def test_incremental_equals_full_with_quarantines_in_the_options(name: str) -> None:
    u = universe(name)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=quarantine_ops(u), batch=st.sampled_from((1, 1, 4)))
    def check(plan: list[Op], batch: int) -> None:
        d = QuarantineDriver(u)
        d.translate()
        for start in range(0, len(plan), batch):
            for op in plan[start : start + batch]:
                d.apply(op)
            d.translate()  # check mode: raises IncrementalMismatch on any difference

    check()


def test_a_quarantine_change_takes_the_incremental_path() -> None:
    u = universe("union")
    d = QuarantineDriver(u)
    d.translate()
    for n in range(12):
        d.apply((-2, n % 5))
        d.translate()
    d.apply((0, BASE))
    d.translate()
    assert d.translator.full_translations == 1
