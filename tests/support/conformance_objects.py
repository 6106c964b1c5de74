"""The conformance suite's object sets as typed objects, for property tests (needs ../shared)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from gateweave.api.decode import decode
from gateweave.api.kinds import Key
from gateweave_conformance import manifests as mf
from gateweave_conformance.cases import load_case

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "conformance"
CASES = SHARED / "cases"
MANIFESTS = SHARED / "manifests"


def require_shared() -> None:
    if not CASES.is_dir():
        pytest.skip(f"{CASES} not present")


@functools.cache
def case_raws(case_file: str) -> tuple[dict[str, Any], ...]:
    """The substituted manifests one case starts from, as plain dicts (shared: do not mutate)."""
    case = load_case(CASES / case_file)
    subs = mf.Substitutions()
    sources = mf.case_manifests(MANIFESTS, case, subs).objects
    raws = [s.obj for s in sources]
    raws += mf.endpoint_slices(raws)
    return tuple(raws)


@functools.cache
def case_objects(case_file: str) -> tuple[Any, ...]:
    """The typed objects one case starts from (class, base, TLS material, its manifests, EndpointSlices)."""
    raws = case_raws(case_file)
    out: dict[Key, Any] = {}
    for raw in raws:
        dec, errors = decode(raw)
        assert not errors, errors
        if dec is not None:
            meta = dec.model.metadata
            out[Key(dec.model.kind, meta.namespace, meta.name)] = dec.model
    return tuple(out.values())


def all_case_files() -> list[str]:
    return sorted(p.name for p in CASES.glob("*.yaml")) if CASES.is_dir() else []
