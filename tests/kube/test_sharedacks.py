"""The merge of the replicas' reports of one Gateway's pods (gateweave/sinks/sharedacks.py)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from gateweave.sinks.sharedacks import PodsReport, SharedAcks, _decode, merge, report_name
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


class _Client:
    """Just enough of a KubeClient for a replica's exchange: its report exists, no others."""

    async def get(self, path: object) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1"}}

    async def replace(self, path: object, body: dict[str, Any]) -> dict[str, Any]:
        return body

    async def list(self, path: object) -> tuple[list[dict[str, Any]], str]:
        return [], "1"


async def test_stopping_the_exchange_is_not_lost_to_a_report_arriving_with_it() -> None:
    """Shutdown cancels ``run`` while a report may be waking it (pods disconnect as the
    controller stops). Whatever the order of the two in the loop, the task ends cancelled:
    asyncio.wait_for on Python 3.11 returned the report's wake-up instead and the loop went on,
    so the controller's shutdown waited for it forever (tests/kube/test_fleet.py hung)."""
    for turns in range(8):
        acks = SharedAcks(
            cast(Any, _Client()),
            namespace="gateweave-system",
            identity="a",
            publish=lambda gateway, state: None,
            pods=lambda gateway: 1,
            period=30.0,
        )
        task = asyncio.create_task(acks.run())
        while acks._written is None:  # the first round written: now parked on its wake-up
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        acks.report("default/gw", DataplaneState(acked=True))
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2.0)
        assert task in done and task.cancelled(), f"still running after {turns} loop turns"
