from __future__ import annotations

from typing import Any

from gateweave.api.kinds import Key
from gateweave.metrics import Metrics
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.sinks.statusmerge import merge_status
from tests.support.runtime import Clock

OURS = "gateweave.io/gateway-controller"
THEIRS = "example.com/other"
T0, T1 = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"


def cond(type_: str, status: str, when: str | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "reason": type_, **extra}
    if when is not None:
        c["lastTransitionTime"] = when
    return c


def parent(name: str, controller: str, *conds: dict[str, Any], **ref: Any) -> dict[str, Any]:
    return {
        "parentRef": {"name": name, **ref},
        "controllerName": controller,
        "conditions": list(conds),
    }


def test_new_conditions_stamped_with_now_or_left_out() -> None:
    computed = {"conditions": [cond("Accepted", "True")]}
    assert merge_status("GatewayClass", None, computed, OURS, T0) == {
        "conditions": [cond("Accepted", "True", T0)]
    }
    assert merge_status("GatewayClass", None, computed, OURS, None) == {
        "conditions": [cond("Accepted", "True")]
    }


def test_transition_time_kept_while_status_unchanged_per_scope() -> None:
    current = {
        "conditions": [cond("Accepted", "True", T0), cond("Programmed", "False", T0)],
        "listeners": [
            {"name": "http", "conditions": [cond("Accepted", "True", T0)]},
            {"name": "https", "conditions": [cond("Accepted", "True", T0)]},
        ],
    }
    computed = {
        "conditions": [
            cond("Accepted", "True", message="still", observedGeneration=2),
            cond("Programmed", "True"),
        ],
        "listeners": [
            {"name": "https", "conditions": [cond("Accepted", "False")]},
            {"name": "http", "conditions": [cond("Accepted", "True")]},
            {"name": "new", "conditions": [cond("Accepted", "True")]},
        ],
    }
    merged = merge_status("Gateway", current, computed, OURS, T1)
    assert merged["conditions"] == [
        cond(
            "Accepted", "True", T0, message="still", observedGeneration=2
        ),  # unchanged status: kept
        cond("Programmed", "True", T1),  # flipped: now
    ]
    assert merged["listeners"] == [
        {"name": "https", "conditions": [cond("Accepted", "False", T1)]},
        {
            "name": "http",
            "conditions": [cond("Accepted", "True", T0)],
        },  # matched by name, not position
        {"name": "new", "conditions": [cond("Accepted", "True", T1)]},
    ]


def test_route_parents_keep_other_controllers_and_drop_stale_ours() -> None:
    current = {
        "parents": [
            parent("theirs", THEIRS, cond("Accepted", "True", T0)),
            parent("gw", OURS, cond("Accepted", "True", T0)),
            parent("gone", OURS, cond("Accepted", "True", T0)),
        ]
    }
    computed = {
        "parents": [
            parent(
                "gw",
                OURS,
                cond("Accepted", "True"),
                cond("ResolvedRefs", "False"),
                group="gateway.networking.k8s.io",
                kind="Gateway",
                namespace="apps",
            ),
            parent("gw", OURS, cond("Accepted", "False"), sectionName="http"),
        ]
    }
    merged = merge_status("HTTPRoute", current, computed, OURS, T1, namespace="apps")
    assert merged["parents"] == [
        parent("theirs", THEIRS, cond("Accepted", "True", T0)),
        # same parentRef once defaults are applied: its unchanged condition keeps T0
        parent(
            "gw",
            OURS,
            cond("Accepted", "True", T0),
            cond("ResolvedRefs", "False", T1),
            group="gateway.networking.k8s.io",
            kind="Gateway",
            namespace="apps",
        ),
        # another parentRef (sectionName): a new entry
        parent("gw", OURS, cond("Accepted", "False", T1), sectionName="http"),
    ]
    emptied = merge_status("HTTPRoute", current, {"parents": []}, OURS, T1)
    assert emptied == {"parents": [parent("theirs", THEIRS, cond("Accepted", "True", T0))]}


def test_backend_tls_policy_ancestors_shared() -> None:
    theirs = {"ancestorRef": {"name": "other-gw"}, "controllerName": THEIRS, "conditions": []}
    ours = {
        "ancestorRef": {"name": "gw"},
        "controllerName": OURS,
        "conditions": [cond("Accepted", "True")],
    }
    merged = merge_status(
        "BackendTLSPolicy", {"ancestors": [theirs]}, {"ancestors": [ours]}, OURS, T0
    )
    assert merged["ancestors"][0] == theirs
    assert merged["ancestors"][1]["conditions"] == [cond("Accepted", "True", T0)]


def test_sink_writes_only_differences_and_keeps_transition_times() -> None:
    clock = Clock()
    metrics = Metrics()
    written: list[Key] = []
    sink = LocalStatusSink(
        OURS, clock=clock, metrics=metrics, on_write=lambda k, _s: written.append(k)
    )
    key = ("Gateway", "default", "gw")
    route = ("HTTPRoute", "default", "r")
    computed = {
        key: {"conditions": [cond("Accepted", "True"), cond("Programmed", "False")]},
        route: {"parents": [parent("gw", OURS, cond("Accepted", "True"))]},
    }
    stored_route = {"parents": [parent("x", THEIRS, cond("Accepted", "True", T0))]}

    def stored(k: Key) -> dict[str, Any] | None:
        return stored_route if k == Key(*route) else None

    assert sink.publish(computed, stored) == [Key(*key), Key(*route)]
    assert sink.writes == 2 and metrics.value("gateweave_status_writes_total") == 2
    assert sink.get(Key(*route))["parents"][0]["controllerName"] == THEIRS  # type: ignore[index]

    clock.now = T1
    assert sink.publish(computed, stored) == []  # same computed status: no write
    assert sink.writes == 2

    computed[key] = {"conditions": [cond("Accepted", "True"), cond("Programmed", "True")]}
    assert sink.publish(computed, stored) == [Key(*key)]
    assert sink.get(Key(*key)) == {
        "conditions": [cond("Accepted", "True", T0), cond("Programmed", "True", T1)]
    }
    assert written == [Key(*key), Key(*route), Key(*key)]

    sink.retain({Key(*route)})
    assert sink.get(Key(*key)) is None and sink.get(Key(*route)) is not None


def test_sink_does_not_write_what_is_already_stored() -> None:
    sink = LocalStatusSink(OURS, clock=lambda: T1)
    given = {"conditions": [cond("Accepted", "True", T0)]}
    computed = {("GatewayClass", "", "gc"): {"conditions": [cond("Accepted", "True")]}}
    assert sink.publish(computed, lambda _k: given) == []
    assert sink.writes == 0
