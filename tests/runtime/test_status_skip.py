"""The status sink skips objects whose computed status did not change, without giving up
lastTransitionTime semantics or the withdrawal of stale statuses."""

from __future__ import annotations

from typing import Any

import pytest

from gateweave.api.kinds import Key
from gateweave.sinks import localstatus as status_module
from gateweave.sinks.localstatus import LocalStatusSink
from tests.support.runtime import Clock

OURS = "gateweave.io/gateway-controller"
THEIRS = "example.com/other"
T0, T1, T2 = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z", "2024-09-01T00:00:00Z"
GW = ("Gateway", "default", "gw")
ROUTE = ("HTTPRoute", "default", "r")


def cond(type_: str, status: str, when: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "reason": type_}
    if when is not None:
        c["lastTransitionTime"] = when
    return c


def parent(controller: str, *conds: dict[str, Any]) -> dict[str, Any]:
    return {"parentRef": {"name": "gw"}, "controllerName": controller, "conditions": list(conds)}


@pytest.fixture
def merges(monkeypatch: pytest.MonkeyPatch) -> list[Key]:
    """The keys merge_status is called for."""
    calls: list[Key] = []
    real = status_module.merge_status

    def counting(kind: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(Key(kind, kwargs.get("namespace", ""), ""))
        return real(kind, *args, **kwargs)

    monkeypatch.setattr(status_module, "merge_status", counting)
    return calls


def computed_gw(programmed: str) -> dict[str, Any]:
    return {"conditions": [cond("Accepted", "True"), cond("Programmed", programmed)]}


def test_an_equal_computed_status_is_not_merged_again(merges: list[Key]) -> None:
    clock = Clock()
    sink = LocalStatusSink(OURS, clock=clock)
    assert sink.publish(
        {GW: computed_gw("True"), ROUTE: {"parents": [parent(OURS, cond("Accepted", "True"))]}}
    )
    assert len(merges) == 2
    first = {k: sink.get(Key(*k)) for k in (GW, ROUTE)}
    clock.now = T1
    # Equal values, new objects (as each translation makes them).
    assert (
        sink.publish(
            {GW: computed_gw("True"), ROUTE: {"parents": [parent(OURS, cond("Accepted", "True"))]}}
        )
        == []
    )
    assert len(merges) == 2  # neither merged
    assert {k: sink.get(Key(*k)) for k in (GW, ROUTE)} == first
    assert sink.writes == 2


def test_a_changed_status_is_merged_with_transition_times_kept_per_condition(
    merges: list[Key],
) -> None:
    clock = Clock()
    sink = LocalStatusSink(OURS, clock=clock)
    sink.publish({GW: computed_gw("False")})
    clock.now = T1
    sink.publish({GW: computed_gw("False")})  # skipped
    clock.now = T2
    assert sink.publish({GW: computed_gw("True")}) == [Key(*GW)]
    assert len(merges) == 2
    assert sink.get(Key(*GW)) == {
        "conditions": [cond("Accepted", "True", T0), cond("Programmed", "True", T2)]
    }


def test_a_withdrawn_status_is_written_again_when_reported_again() -> None:
    """Our route entry is withdrawn (their entry stays held); reported again with the
    very status it was merged from before, it must be merged back, not skipped."""
    given = {"parents": [parent(THEIRS, cond("Accepted", "True", T0))]}
    sink = LocalStatusSink(OURS, clock=lambda: T1)
    ours = {"parents": [parent(OURS, cond("Accepted", "True"))]}
    sink.publish({ROUTE: ours}, lambda _k: given)
    assert sink.get(Key(*ROUTE)) == {
        "parents": [
            parent(THEIRS, cond("Accepted", "True", T0)),
            parent(OURS, cond("Accepted", "True", T1)),
        ]
    }
    assert sink.publish({}, lambda _k: {"parents": []}) == [Key(*ROUTE)]  # withdrawn; theirs kept
    assert sink.get(Key(*ROUTE)) == {"parents": [parent(THEIRS, cond("Accepted", "True", T0))]}
    assert sink.publish({ROUTE: {"parents": [parent(OURS, cond("Accepted", "True"))]}}) == [
        Key(*ROUTE)
    ]
    assert sink.get(Key(*ROUTE)) == {
        "parents": [
            parent(THEIRS, cond("Accepted", "True", T0)),
            parent(OURS, cond("Accepted", "True", T1)),
        ]
    }


def test_a_deleted_and_recreated_object_is_merged_afresh() -> None:
    sink = LocalStatusSink(OURS, clock=lambda: T0)
    sink.publish({GW: computed_gw("True")})
    sink.retain(set())  # the object is gone
    assert sink.get(Key(*GW)) is None
    assert sink.publish({GW: computed_gw("True")}) == [Key(*GW)]


class _Counted(dict[str, Any]):
    """A computed status that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None


def test_the_same_computed_status_object_is_neither_compared_nor_merged(
    merges: list[Key],
) -> None:
    """Translate hands out the same status object while an object's status does not change:
    the sink skips it without comparing it (its cost does not grow with the objects)."""
    sink = LocalStatusSink(OURS, clock=lambda: T0)
    statuses = {
        ("HTTPRoute", "default", f"r{i}"): _Counted(
            parents=[parent(OURS, cond("Accepted", "True"))]
        )
        for i in range(50)
    }
    assert len(sink.publish(statuses)) == 50
    _Counted.compared = 0
    merged = len(merges)
    changed = ("HTTPRoute", "default", "r7")
    again = {**statuses, changed: {"parents": [parent(OURS, cond("Accepted", "False"))]}}
    assert sink.publish(again) == [Key(*changed)]
    # Only the changed one's previous status is compared (with its new one), and merged.
    assert _Counted.compared == 1 and len(merges) == merged + 1


def test_a_status_no_longer_reported_is_withdrawn_beside_one_merged_to_what_is_stored() -> None:
    """One reported status equal to the one given with its object (merged, not held) and one
    held status no longer reported: the second is still withdrawn."""
    sink = LocalStatusSink(OURS, clock=lambda: T0)
    sink.publish({GW: computed_gw("True")})
    given = {"parents": [parent(OURS, cond("Accepted", "True", T0))]}
    ours = {"parents": [parent(OURS, cond("Accepted", "True"))]}
    written = sink.publish({ROUTE: ours}, lambda k: given if k == Key(*ROUTE) else None)
    assert written == [Key(*GW)]  # withdrawn (back to no status); the route needs no write
    assert sink.get(Key(*GW)) is None and sink.get(Key(*ROUTE)) is None
