"""Replay offline the status steps of every conformance case (one test per case file): the
upstream cases (third_party/gateway-api/conformance/cases) and those transcribed in this
repository for the upstream tests that set lacks (tests/conformance_extra/cases), both against
the upstream manifests. A failing case prints the first unmet expectation. A case marked
unsupported, or one that applies only to implementations without a feature gateweave has, is
skipped, as the live runner skips it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateweave_conformance import offline
from gateweave_conformance.cases import load_case
from tests.support.data import CASES, EXTRA_CASES, MANIFESTS, case_files

_EXTRA = case_files(EXTRA_CASES)
_FILES = case_files(CASES) + _EXTRA


def test_transcribed_case_files_load() -> None:
    """Every case file transcribed here parses and is named after its ShortName."""
    assert len(_EXTRA) >= 27
    for path in _EXTRA:
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
