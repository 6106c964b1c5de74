"""The conformance suite's object sets (third_party/gateway-api/conformance) as plain dicts,
decoded objects and typed objects, for property tests."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.store import key_of
from gateweave_conformance import manifests as mf
from gateweave_conformance.cases import load_case
from tests.support.data import CASES, MANIFESTS, case_files


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
    """The typed objects one case starts from (class, base, TLS material, its manifests,
    EndpointSlices).
    """
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
    """The name of every upstream case file (an error if there are none)."""
    return [p.name for p in case_files(CASES)]


def decoded(raw: Mapping[str, Any]) -> Decoded:
    result, errors = decode(dict(raw))
    assert result is not None and not errors, errors
    return result


def without_generation(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without ``metadata.generation`` (the store counts it;
    the input does not decide it).
    """
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return dict(raw)
    return {**raw, "metadata": {k: v for k, v in meta.items() if k != "generation"}}


def case_set(names: Iterable[str]) -> list[Decoded]:
    """The objects of several conformance cases, united by key (the first definition wins),
    in a stable order."""
    out: dict[Key, Decoded] = {}
    for name in names:
        for raw in case_raws(name):
            dec, errors = decode(raw)
            assert not errors, errors
            if dec is not None:
                out.setdefault(key_of(dec), dec)
    return [out[k] for k in sorted(out)]
