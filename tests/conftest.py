"""The suite's pytest configuration. Tests import what they share from :mod:`tests.support`;
here is only what pytest itself asks for."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from gateweave.infra.statedir import STATE_ROOT_ENV
from tests.support import data


def pytest_sessionstart(session: pytest.Session) -> None:
    """The test data is part of the repository: a checkout without it is broken, and the run
    stops at once with an error rather than skip or pass what needs it."""
    gone = data.missing()
    if gone:
        where = ", ".join(str(d.relative_to(data.ROOT)) for d in gone)
        raise pytest.UsageError(f"the repository's test data is missing: no YAML files in {where}")
    # A serve (or quickstart) a test starts without --state-dir puts its default state directory
    # here, not in the machine's /var/lib/gateweave or ~/.local/state (subprocesses inherit it).
    os.environ[STATE_ROOT_ENV] = tempfile.mkdtemp(prefix="gateweave-test-state-")


def pytest_sessionfinish(session: pytest.Session) -> None:
    root = os.environ.pop(STATE_ROOT_ENV, "")
    if root:
        shutil.rmtree(root, ignore_errors=True)
