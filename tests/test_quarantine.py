"""Quarantined route objects (what a Gateway's Envoy rejects): translate leaves them out, the
incremental translator agrees with a full one, and the data plane's search finds them.

The live behaviour (real Envoy, real traffic) is in tests/test_nack_isolation.py.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specletter_objects import models
from test_incremental import BASE, Driver, Op, bench_universe, ops

from gateweave import ir
from gateweave.api.kinds import Key
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds.culprits import (
    MAX_TRIALS,
    Search,
    find_culprits,
    routes_by_owner,
    suspects,
    without,
)

NS = "default"
GW = "gateway.networking.k8s.io/v1"
ENVOY = "the Envoy of Gateway default/gw rejects it: regex '/x' RE2 program size of 50 > max program size of 30"


def _objects(*routes: str) -> list[Any]:
    raws: list[dict[str, Any]] = [
        {"apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": "gw"},
         "spec": {"controllerName": "gateweave.io/gateway-controller"}},
        {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "gw", "namespace": NS},
         "spec": {"gatewayClassName": "gw", "listeners": [{"name": "http", "protocol": "HTTP", "port": 8080}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": NS},
         "spec": {"ports": [{"name": "http", "port": 80}]}},
    ]
    for name in routes:
        raws.append({
            "apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": NS},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}],
                 "backendRefs": [{"name": "svc", "port": 80}]}]},
        })
    return models(raws)


def _route_names(gw: ir.XdsGateway) -> list[str]:
    return [r.name for p in gw.ports if p.http for vh in p.http.virtual_hosts for r in vh.routes]


# ---------------------------------------------------------------- translate


def test_a_rejected_route_is_left_out_with_envoys_message() -> None:
    snap = Snapshot.from_objects(_objects("a", "bad", "c"))
    res = translate(snap, TranslateOptions(rejected={("HTTPRoute", NS, "bad"): ENVOY}))
    (gw,) = res.xds.values()
    assert _route_names(gw) == [f"httproute/{NS}/{n}/rule/0/match/0" for n in ("a", "c")]
    (parent,) = res.statuses[("HTTPRoute", NS, "bad")]["parents"]
    accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert accepted["message"] == "left out until it changes: " + ENVOY
    listener = res.statuses[("Gateway", NS, "gw")]["listeners"][0]
    assert listener["attachedRoutes"] == 2
    # Without the quarantine the same route is served: only the option decides.
    assert len(_route_names(translate(snap).xds[f"{NS}/gw"])) == 3


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


@pytest.mark.parametrize("routes,seed", [(40, 3), (120, 11)])
def test_incremental_equals_full_with_quarantines_in_the_options(routes: int, seed: int) -> None:
    u = bench_universe(routes, seed)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
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
    u = bench_universe(120, 11)
    d = QuarantineDriver(u)
    d.translate()
    for n in range(12):
        d.apply((-2, n % 5))
        d.translate()
    d.apply((0, BASE))
    d.translate()
    assert d.translator.full_translations == 1


# ---------------------------------------------------------------- suspects and trials


def test_suspects_are_the_route_objects_whose_routes_changed() -> None:
    before = translate(Snapshot.from_objects(_objects("a", "b", "c"))).xds[f"{NS}/gw"]
    objs = _objects("a", "b", "c", "d")
    changed = [o for o in objs if not (o.kind == "HTTPRoute" and o.metadata.name == "b")]
    after = translate(Snapshot.from_objects(changed + _objects("b2")[-1:])).xds[f"{NS}/gw"]
    assert suspects(before, after) == [Key("HTTPRoute", NS, "b2"), Key("HTTPRoute", NS, "d")]
    assert suspects(None, after) == sorted(routes_by_owner(after))  # nothing ACKed: every one
    # Without the suspects, what Envoy had (less what was deleted: b, which is no suspect).
    left = without(after, {Key("HTTPRoute", NS, "d"), Key("HTTPRoute", NS, "b2")})
    assert _route_names(left) == [n for n in _route_names(before) if "/b/" not in n]


def _envoy(culprits: set[Key], log: list[frozenset[Key]]) -> Any:
    """A fake Envoy: refuses any trial that still holds a culprit."""
    async def trial(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        log.append(left_out)
        bad = sorted(k for k in culprits if k not in left_out)
        return (not bad, f"refused {bad[0].name}" if bad else "")
    return trial


def _keys(n: int) -> list[Key]:
    return [Key("HTTPRoute", NS, f"r{i:04d}") for i in range(n)]


def _search(candidates: list[Key], culprits: set[Key], max_trials: int = MAX_TRIALS) -> tuple[Search | None, list[frozenset[Key]]]:
    log: list[frozenset[Key]] = []
    found = asyncio.run(find_culprits(candidates, "refused", _envoy(culprits, log), max_trials))
    return found, log


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000, 4096])
def test_one_culprit_costs_about_log2_n_trials(n: int) -> None:
    keys = _keys(n)
    for culprit in (keys[0], keys[n // 2], keys[-1]):
        found, log = _search(keys, {culprit})
        assert found is not None and found.complete
        assert set(found.culprits) == {culprit} and found.culprits[culprit] in ("refused", f"refused {culprit.name}")
        assert found.accepted == frozenset(keys) - {culprit}
        assert len(log) <= math.ceil(math.log2(n)) + 2, len(log)  # the first, the halvings, the rest
        assert log[0] == frozenset(keys)  # first: everything left out


def test_several_culprits_are_all_found() -> None:
    keys = _keys(1000)
    culprits = {keys[3], keys[500], keys[501], keys[998]}
    found, log = _search(keys, culprits)
    assert found is not None and found.complete and set(found.culprits) == culprits
    assert found.accepted == frozenset(keys) - culprits
    assert len(log) <= MAX_TRIALS


def test_the_number_of_trials_is_bounded() -> None:
    keys = _keys(1000)
    culprits = set(keys[::50])  # 20 culprits
    found, log = _search(keys, culprits, max_trials=10)
    assert found is not None and not found.complete
    assert len(log) == 10
    assert set(found.culprits) <= culprits  # what was found is right; the rest waits for the next search


def test_a_rejection_no_candidate_explains_is_not_theirs() -> None:
    async def always_refused(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        return (False, "cannot bind 127.0.0.1:80")

    found = asyncio.run(find_culprits(_keys(8), "cannot bind", always_refused))
    assert found is not None and found.culprits == {} and found.trials == 1


def test_a_trial_without_an_answer_stops_the_search() -> None:
    async def gone(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        return None

    assert asyncio.run(find_culprits(_keys(8), "x", gone)) is None
