"""The system of backends by name the backend tests share (tests/data/backends/system.yaml):
Envoy Gateway Backends of every endpoint type, ExternalName Services, FQDN EndpointSlices."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from tests.support.data import BACKENDS_SYSTEM


@functools.cache
def raws() -> tuple[dict[str, Any], ...]:
    """The system's objects as plain dicts (shared: do not mutate)."""
    return tuple(d for d in yaml.safe_load_all(BACKENDS_SYSTEM.read_text()) if d)
