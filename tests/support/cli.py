"""gateweave's command line run in the test's process, as a user runs it."""

from __future__ import annotations

from typer.testing import CliRunner

from gateweave.cli import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    """``gateweave ARGS...``: the exit code, stdout and stderr."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
