"""Replay offline the status steps of the conformance cases transcribed in this repository.

tests/conformance_extra/cases holds case files (FORMAT.md of third_party/gateway-api/conformance)
for the upstream Gateway API conformance tests that the upstream case directory lacks. They are
replayed against the upstream manifests (third_party/gateway-api/conformance/manifests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateweave_conformance import offline
from gateweave_conformance.cases import load_case
from tests.support.data import EXTRA_CASES, MANIFESTS, case_files

_FILES = case_files(EXTRA_CASES)


def test_case_files_load() -> None:
    """Every case file parses and is named after its ShortName."""
    assert len(_FILES) >= 27
    for path in _FILES:
        case = load_case(path)
        assert case.name == path.stem
        assert case.steps, path.name


@pytest.mark.parametrize("path", _FILES, ids=[p.stem for p in _FILES])
def test_case_status(path: Path) -> None:
    result = offline.run_file(path, MANIFESTS)
    if result.outcome == "SKIP":
        pytest.skip(result.message)
    assert result.outcome == "PASS", result.message
    assert result.expects_checked > 0
