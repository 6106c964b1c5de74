"""Which route objects a rejection of route tables is theirs: suspects, trials and the search
(gateweave/xds/culprits.py); a fake Envoy refuses any trial that still holds a culprit.

Live, with a real Envoy: tests/serve/test_nack_isolation.py.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from gateweave.api.kinds import Key
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.xds.culprits import (
    MAX_TRIALS,
    Search,
    find_culprits,
    routes_by_owner,
    suspects,
    without,
)
from tests.support.quarantine import NS, route_names, route_objects

# ---------------------------------------------------------------- suspects and trials


def test_suspects_are_the_route_objects_whose_routes_changed() -> None:
    before = translate(Snapshot.from_objects(route_objects("a", "b", "c"))).xds[f"{NS}/gw"]
    objs = route_objects("a", "b", "c", "d")
    changed = [o for o in objs if not (o.kind == "HTTPRoute" and o.metadata.name == "b")]
    after = translate(Snapshot.from_objects(changed + route_objects("b2")[-1:])).xds[f"{NS}/gw"]
    assert suspects(before, after) == [Key("HTTPRoute", NS, "b2"), Key("HTTPRoute", NS, "d")]
    assert suspects(None, after) == sorted(routes_by_owner(after))  # nothing ACKed: every one
    # Without the suspects, what Envoy had (less what was deleted: b, which is no suspect).
    left = without(after, {Key("HTTPRoute", NS, "d"), Key("HTTPRoute", NS, "b2")})
    assert route_names(left) == [n for n in route_names(before) if "/b/" not in n]


def _envoy(culprits: set[Key], log: list[frozenset[Key]]) -> Any:
    """A fake Envoy: refuses any trial that still holds a culprit."""

    async def trial(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        log.append(left_out)
        bad = sorted(k for k in culprits if k not in left_out)
        return (not bad, f"refused {bad[0].name}" if bad else "")

    return trial


def _keys(n: int) -> list[Key]:
    return [Key("HTTPRoute", NS, f"r{i:04d}") for i in range(n)]


def _search(
    candidates: list[Key], culprits: set[Key], max_trials: int = MAX_TRIALS
) -> tuple[Search | None, list[frozenset[Key]]]:
    log: list[frozenset[Key]] = []
    found = asyncio.run(find_culprits(candidates, "refused", _envoy(culprits, log), max_trials))
    return found, log


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000, 4096])
def test_one_culprit_costs_about_log2_n_trials(n: int) -> None:
    keys = _keys(n)
    for culprit in (keys[0], keys[n // 2], keys[-1]):
        found, log = _search(keys, {culprit})
        assert found is not None and found.complete
        assert set(found.culprits) == {culprit} and found.culprits[culprit] in (
            "refused",
            f"refused {culprit.name}",
        )
        assert found.accepted == frozenset(keys) - {culprit}
        assert len(log) <= math.ceil(math.log2(n)) + 2, len(
            log
        )  # the first, the halvings, the rest
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
    assert (
        set(found.culprits) <= culprits
    )  # what was found is right; the rest waits for the next search


def test_a_rejection_no_candidate_explains_is_not_theirs() -> None:
    async def always_refused(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        return (False, "cannot bind 127.0.0.1:80")

    found = asyncio.run(find_culprits(_keys(8), "cannot bind", always_refused))
    assert found is not None and found.culprits == {} and found.trials == 1


def test_a_trial_without_an_answer_stops_the_search() -> None:
    async def gone(left_out: frozenset[Key]) -> tuple[bool, str] | None:
        return None

    assert asyncio.run(find_culprits(_keys(8), "x", gone)) is None
