"""Replay offline the status steps of the conformance cases transcribed in this repository.

tests/conformance_extra/cases holds case files (FORMAT.md of ../shared/conformance) for the
upstream Gateway API conformance tests that the shared case directory lacks. They are
replayed against the shared upstream manifests; without those the tests are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateweave_conformance import offline
from gateweave_conformance.cases import case_files, load_case

HERE = Path(__file__).resolve().parent
CASES = HERE / "conformance_extra" / "cases"
MANIFESTS = HERE.parents[1] / "shared" / "conformance" / "manifests"
_MISSING = f"upstream conformance manifests not found at {MANIFESTS}"

_FILES = case_files(CASES)


def test_case_files_load() -> None:
    """Every case file parses and is named after its ShortName (needs no shared data)."""
    assert len(_FILES) >= 27
    for path in _FILES:
        case = load_case(path)
        assert case.name == path.stem
        assert case.steps, path.name


@pytest.mark.skipif(not MANIFESTS.is_dir(), reason=_MISSING)
@pytest.mark.parametrize("path", _FILES, ids=[p.stem for p in _FILES])
def test_case_status(path: Path) -> None:
    result = offline.run_file(path, MANIFESTS)
    if result.outcome == "SKIP":
        pytest.skip(result.message)
    assert result.outcome == "PASS", result.message
    assert result.expects_checked > 0
