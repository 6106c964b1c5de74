"""What the data plane tests of serve share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateweave_bench import harness as h


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
