"""The live conformance runner: real Envoys, echo backends and traffic on 127.0.0.0/8.

Runs a handful of upstream cases (HTTP, weights, path matching, TLS, TCP, UDP, gRPC) and
asserts they pass, that the report parses with the five profiles, that a deliberately wrong
expectation fails with a precise message and that ``--run`` filters. Address pools differ from
the defaults so a concurrently running suite does not collide.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateweave.translate.gatewayclass import SUPPORTED_FEATURES
from gateweave_conformance import report as rp
from gateweave_conformance.runner import RunnerOptions, exit_code, run
from gateweave_conformance.traffic import backend_of
from tests.support.data import CASES, MANIFESTS, ROOT
from tests.support.incremental_check import CHECK_INCREMENTAL

LIVE_CASES = (
    "HTTPRouteSimpleSameNamespace",
    "HTTPRouteWeight",
    "HTTPRouteExactPathMatching",
    "TLSRouteMixedTerminationSameNamespace",
    "TCPRouteWeightedRouting",
    "UDPRouteWeightedRouting",
    "GRPCRouteWeight",
)


@pytest.mark.timeout(240)
async def test_live_cases_pass_and_report(tmp_path: Path) -> None:
    lines: list[str] = []
    report_path = tmp_path / "report.yaml"
    options = RunnerOptions(
        cases_dir=CASES,
        manifests_dir=MANIFESTS,
        run="^(" + "|".join(LIVE_CASES) + ")$",
        report=report_path,
        address_pool="127.31.0.0/16",
        backend_prefix="127.32",
        check_incremental=CHECK_INCREMENTAL,
        out=lines.append,
    )
    results, claimed = await run(options)
    assert [r.name for r in results] == sorted(LIVE_CASES)
    failed = [r.line() for r in results if r.outcome != "PASS"]
    assert not failed, failed
    assert lines[-1] == f"{len(LIVE_CASES)} passed, 0 failed, 0 skipped"
    assert all(line.startswith("PASS ") for line in lines[:-1])
    assert exit_code(results) == 0
    assert "TCPRoute" in claimed

    report = yaml.safe_load(report_path.read_text())
    assert report["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert report["kind"] == "ConformanceReport"
    assert report["implementation"]["project"] == "gateweave"
    assert report["gatewayAPIVersion"].startswith("v1.6")
    profiles = {p["name"]: p for p in report["profiles"]}
    assert set(profiles) == {
        "GATEWAY-HTTP",
        "GATEWAY-GRPC",
        "GATEWAY-TLS",
        "GATEWAY-TCP",
        "GATEWAY-UDP",
    }
    # [Gateway, HTTPRoute] cases are core HTTP; TLSRouteMixedTermination needs TLSRouteModeMixed:
    # extended TLS.
    assert profiles["GATEWAY-HTTP"]["core"]["statistics"] == {
        "Passed": 3,
        "Failed": 0,
        "Skipped": 0,
    }
    assert profiles["GATEWAY-HTTP"]["core"]["result"] == "success"
    assert profiles["GATEWAY-TLS"]["extended"]["statistics"]["Passed"] == 1
    assert profiles["GATEWAY-TCP"]["core"]["statistics"]["Passed"] == 1
    assert profiles["GATEWAY-UDP"]["core"]["statistics"]["Passed"] == 1
    assert profiles["GATEWAY-GRPC"]["core"]["statistics"]["Passed"] == 1
    assert "TLSRouteModeMixed" in profiles["GATEWAY-TLS"]["extended"]["supportedFeatures"]


def _case(name: str, http: dict[str, object]) -> dict[str, object]:
    return {
        "name": name,
        "features": ["Gateway", "HTTPRoute"],
        "manifests": ["tests/httproute-simple-same-namespace.yaml"],
        "steps": [
            {
                "expect": {
                    "kind": "Gateway",
                    "name": "gateway-conformance-infra/same-namespace",
                    "has_address": True,
                    "timeout_s": 60,
                }
            },
            {
                "http": {
                    "gateway": "gateway-conformance-infra/same-namespace",
                    "request": {"path": "/"},
                    **http,
                }
            },
        ],
    }


@pytest.mark.timeout(180)
def test_wrong_expectation_fails_precisely_and_run_filters(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    good = _case(
        "GoodCase",
        {
            "response": {"status": 200},
            "backend": "infra-backend-v1",
            "namespace": "gateway-conformance-infra",
        },
    )
    bad = _case(
        "BadCase",
        {
            "response": {"status": 200},
            "backend": "infra-backend-v2",
            "namespace": "gateway-conformance-infra",
            "timeout_s": 2,
        },
    )
    bad_weights = {
        "name": "BadWeights",
        "features": ["Gateway", "HTTPRoute"],
        "manifests": ["tests/httproute-simple-same-namespace.yaml"],
        "steps": [
            {
                "distribution": {
                    "http": {
                        "gateway": "gateway-conformance-infra/same-namespace",
                        "request": {"path": "/"},
                        "namespace": "gateway-conformance-infra",
                    },
                    "weights": {"infra-backend-v1": 0.5, "infra-backend-v2": 0.5},
                    "requests": 20,
                    "tolerance": 0.05,
                }
            },
        ],
    }
    filtered = _case("FilteredOut", {"response": {"status": 200}})
    for case in (good, bad, bad_weights, filtered):
        (cases / f"{case['name']}.yaml").write_text(yaml.safe_dump(case))
    report = tmp_path / "r.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateweave.cli",
            "conformance",
            "--cases",
            str(cases),
            "--manifests",
            str(MANIFESTS),
            "--run",
            "Case$|Weights$",
            "--report",
            str(report),
            "--address-pool",
            "127.33.0.0/16",
            "--backend-prefix",
            "127.34",
        ],
        capture_output=True,
        text=True,
        timeout=170,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_name = {line.split()[1].rstrip(":"): line for line in lines[:-1]}
    assert set(by_name) == {"GoodCase", "BadCase", "BadWeights"}  # --run filtered FilteredOut
    assert by_name["GoodCase"].startswith("PASS GoodCase")
    assert by_name["BadCase"].startswith(
        "FAIL BadCase: step 1 (http): not met within 2s; last: expected pod name to start with "
        "infra-backend-v2, got 'infra-backend-v1-"
    )
    assert by_name["BadWeights"].startswith(
        "FAIL BadWeights: step 0 (distribution): weights not met after 10 samples; last: "
    )
    assert "infra-backend-v2 has weight 0.5 but received no request" in by_name["BadWeights"]
    assert lines[-1] == "1 passed, 2 failed, 0 skipped"
    profiles = {p["name"]: p for p in yaml.safe_load(report.read_text())["profiles"]}
    assert profiles["GATEWAY-HTTP"]["core"]["statistics"] == {
        "Passed": 1,
        "Failed": 2,
        "Skipped": 0,
    }
    assert profiles["GATEWAY-HTTP"]["core"]["result"] == "failure"
    assert profiles["GATEWAY-HTTP"]["core"]["failedTests"] == ["BadCase", "BadWeights"]


def test_report_profiles_follow_upstream_rules() -> None:
    outcomes = [
        rp.Outcome("A", ("Gateway", "HTTPRoute"), "PASS"),
        rp.Outcome("B", ("Gateway", "HTTPRoute", "HTTPRouteCORS"), "SKIP"),
        rp.Outcome("C", ("Gateway",), "FAIL"),
        rp.Outcome("D", ("Gateway", "TCPRoute"), "PASS"),
    ]
    report = rp.build_report(
        outcomes, {"Gateway", "HTTPRoute", "TCPRoute", "GatewayPort8080"}, version="0.1.0"
    )
    profiles = {p["name"]: p for p in report["profiles"]}
    http = profiles["GATEWAY-HTTP"]
    assert http["core"]["statistics"] == {"Passed": 1, "Failed": 1, "Skipped": 0}
    assert http["core"]["result"] == "failure"
    assert http["extended"]["statistics"] == {"Passed": 0, "Failed": 0, "Skipped": 1}
    assert http["extended"]["result"] == "partial"
    assert "HTTPRouteCORS" in http["extended"]["unsupportedFeatures"]
    assert "GatewayPort8080" in http["extended"]["supportedFeatures"]
    tcp = profiles["GATEWAY-TCP"]
    # A [Gateway]-only case counts under every profile; D only under TCP.
    assert tcp["core"]["statistics"] == {"Passed": 1, "Failed": 1, "Skipped": 0}
    assert profiles["GATEWAY-UDP"]["core"]["statistics"] == {"Passed": 0, "Failed": 1, "Skipped": 0}


def test_readme_lists_the_claimed_features() -> None:
    """The README's list of claimed features is the GatewayClass's, and each extended one is in the
    ConformanceReport's supportedFeatures of some profile."""
    text = (ROOT / "README.md").read_text()
    block = text.split("\nClaimed (", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"\b[A-Z][A-Za-z0-9]+\b", block))
    assert listed == set(SUPPORTED_FEATURES)
    report = rp.build_report([], SUPPORTED_FEATURES, version="0")
    extended = {f for p in report["profiles"] for f in p["extended"]["supportedFeatures"]}
    core = {
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "UDPRoute",
        "ReferenceGrant",
    }
    assert set(SUPPORTED_FEATURES) == extended | core


def test_backend_of_drops_hash_and_suffix() -> None:
    assert backend_of("infra-backend-v1-6b8c7d9f5-x2k4p") == "infra-backend-v1"
