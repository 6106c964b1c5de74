"""Invariant 1: the same objects in any order give a byte-identical result (statuses, infra IR, xDS
IR, Envoy resources).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.conformance_objects import all_case_files, case_objects
from tests.support.fingerprint import fingerprint

# Cases whose object sets exercise many code paths at once.
RICH = [
    "HTTPRouteMatching.yaml",
    "GatewayWithAttachedRoutes.yaml",
    "ListenerSetProtocolConflict.yaml",
    "TLSRouteMixedTerminationSameNamespace.yaml",
    "BackendTLSPolicyConflictResolution.yaml",
    "GatewayInvalidFrontendClientCertificateValidation.yaml",
    "UDPRouteWeightedRouting.yaml",
    "GRPCRouteWeight.yaml",
]


@pytest.mark.parametrize("case_file", RICH)
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_permutation_gives_identical_output(case_file: str, data: st.DataObject) -> None:
    objects = list(case_objects(case_file))
    expected = fingerprint(objects)
    shuffled = data.draw(st.permutations(objects))
    assert fingerprint(shuffled) == expected


def test_union_of_all_cases_is_order_independent() -> None:
    """Every case's objects at once (one big system), reversed and rotated."""
    merged: dict[tuple[str, str, str], Any] = {}
    for case_file in all_case_files():
        for obj in case_objects(case_file):
            merged.setdefault((obj.kind, obj.metadata.namespace, obj.metadata.name), obj)
    objects = list(merged.values())
    expected = fingerprint(objects)
    assert fingerprint(objects[::-1]) == expected
    assert fingerprint(objects[len(objects) // 3 :] + objects[: len(objects) // 3]) == expected
