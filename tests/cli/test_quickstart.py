"""The README's run command: the quickstart serves a real route through a real Envoy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.data import ROOT


def test_quickstart_prints_a_curl_that_answers_200(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "gateweave"
    proc = subprocess.run(
        [
            str(exe),
            "quickstart",
            "--once",
            "--admin-address",
            "127.0.0.1:0",
            "--timeout",
            "60",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "curl -sS --resolve demo.example.com:8080:127.10.0.1 http://demo.example.com:8080/"
        in proc.stdout
    )
    assert "answer (200)" in proc.stdout
    assert "hello from the gateweave demo backend" in proc.stdout
