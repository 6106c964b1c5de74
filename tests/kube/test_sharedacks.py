"""The merge of the replicas' reports of one Gateway's pods (gateweave/sinks/sharedacks.py)."""

from __future__ import annotations

from gateweave.sinks.sharedacks import PodsReport, _decode, merge, report_name
from gateweave.translate.options import DataplaneState

PENDING = DataplaneState()
ACKED = PodsReport(pods=2, acked=True)


def test_every_connected_replica_must_have_acked() -> None:
    assert merge(PENDING, [ACKED, PodsReport(pods=1)]) == DataplaneState(acked=False)
    assert merge(PENDING, [ACKED, PodsReport(pods=0), PodsReport(pods=1, acked=True)]).acked
    assert merge(PENDING, []) == PENDING  # no pod anywhere: this replica's own state


def test_a_pod_just_connected_keeps_an_acknowledged_state_a_nack_ends_it() -> None:
    assert merge(PENDING, [ACKED, PodsReport(pods=1)], was_acked=True).acked
    assert not merge(PENDING, [PodsReport(pods=1)], was_acked=True).acked  # nothing acked any more
    rejected = merge(PENDING, [ACKED, PodsReport(pods=1, error="bad listener")], was_acked=True)
    assert rejected == DataplaneState(acked=False, error="bad listener")


def test_reports_decode_and_names() -> None:
    assert _decode({"gateways": '{"default/gw": {"pods": 1, "acked": true}}'}) == {
        "default/gw": PodsReport(1, True)
    }
    assert _decode({"gateways": '{"default/gw": {"pods": "x"}}'}) == {}  # malformed: ignored
    assert report_name("Pod_7.example") == "gateweave-acks-pod-7.example"


def test_named_pods_are_the_union_of_the_reports() -> None:
    # pod-b moved from one replica (whose report still stands, acked) to another (not yet)
    old = PodsReport(pods=2, acked=True, running=("pod-a", "pod-b"))
    new = PodsReport(pods=2, acked=False, running=("pod-c",), waiting=("pod-b", "pod-d"))
    merged = merge(PENDING, [old, new], was_acked=True)
    assert merged == DataplaneState(
        acked=True, running=("pod-a", "pod-b", "pod-c"), waiting=("pod-d",)
    )
    # a rejection names its pod, whichever replica reported it
    rejecting = PodsReport(pods=1, error="bad listener", waiting=("pod-e",), rejected_by="pod-e")
    merged = merge(PENDING, [old, rejecting])
    assert (merged.acked, merged.error, merged.rejected_by) == (False, "bad listener", "pod-e")
