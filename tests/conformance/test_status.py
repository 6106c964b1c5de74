"""Replay the status steps of every upstream conformance case offline (one test per case file).

The case files live outside the repository (../shared/conformance); without them the
tests are skipped. A failing case prints the first unmet expectation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateweave_conformance import offline
from gateweave_conformance.cases import case_files

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CASES = SHARED / "conformance" / "cases"
MANIFESTS = SHARED / "conformance" / "manifests"
_MISSING = f"conformance cases not found at {CASES} (the shared data directory is absent)"

_FILES = case_files(CASES) if CASES.is_dir() and MANIFESTS.is_dir() else []


@pytest.mark.skipif(not _FILES, reason=_MISSING)
@pytest.mark.parametrize("path", _FILES, ids=[p.stem for p in _FILES])
def test_case_status(path: Path) -> None:
    result = offline.run_file(path, MANIFESTS)
    if result.outcome == "SKIP":
        pytest.skip(result.message)
    assert result.outcome == "PASS", result.message
    assert result.expects_checked > 0


@pytest.mark.skipif(not _FILES, reason=_MISSING)
def test_summary_command(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["HTTPRouteSimpleSameNamespace", "GatewayStaticAddresses"]
    offline.main(["--cases", str(CASES), "--manifests", str(MANIFESTS), *names])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("SKIP GatewayStaticAddresses: unsupported step 0")
    assert lines[1].split()[:2] in (
        ["PASS", "HTTPRouteSimpleSameNamespace"],
        ["FAIL", "HTTPRouteSimpleSameNamespace:"],
    )
    assert lines[2].endswith("1 skipped")
