"""What the data plane tests of serve share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.flaky import FlakyServer
from tests.support.netns import Netns


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, Any]]:
    """Two HTTP backends answering their name ("A", "B") and a TCP echo backend, per test module."""
    a, b, echo = h.NameServer("A"), h.NameServer("B"), h.EchoServer()
    try:
        yield {"A": a, "B": b, "echo": echo}
    finally:
        a.close()
        b.close()
        echo.close()


@pytest.fixture
def ns() -> Iterator[Netns]:
    """A network namespace of the test's own (see tests.support.netns), with no extra host names."""
    space = Netns({})
    try:
        yield space
    finally:
        space.close()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path (a unix socket path has at most 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="gwb-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    """A backend the test steers by path (tests.support.flaky), answering ``<status> <path>``."""
    server = FlakyServer()
    try:
        yield server
    finally:
        server.close()
