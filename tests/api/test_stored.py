"""Objects read from the API server (``Decoding.STORED``) are defaulted by each schema's
defaults-only form (``schemacode.generate``'s ``STORED``): exactly as the full path defaults
them, and never refused again for what the API server checks on write (patterns, formats,
enums, bounds, CEL rules)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from gateweave.api import schema, schemacode
from gateweave.api.decode import Decoding, decode, kind_info
from gateweave.api.kinds import Key, KindInfo
from gateweave.providers import ErrorBook
from gateweave.providers.file import FileProvider
from gateweave.store import Store
from tests.api.test_schemacode import CORPUS, _same, mutated, walk_only
from tests.kube.test_trusts_stored import BREAKS_A_RULE


def _info(raw: dict[str, Any]) -> KindInfo:
    info = kind_info(raw)
    assert info is not None
    return info


def _stored_form(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The defaults-only form's answer alone (None: it left ``raw`` to the walk)."""
    return schema._compiled(copy.deepcopy(raw), _info(raw), True, stored=True)


def test_every_valid_manifest_is_decoded_as_stored_exactly_as_validated() -> None:
    for raw in CORPUS:
        full, errors = decode(copy.deepcopy(raw), mode=Decoding.STRICT)
        assert full is not None and not errors
        stored, errors = decode(copy.deepcopy(raw), mode=Decoding.STORED, owned=True)
        assert stored is not None and not errors
        assert stored.model == full.model, raw
        assert _same(stored.raw, full.raw), raw
        # ... by the defaults-only form itself (not the walk's fallback)
        assert _stored_form(raw) is not None, raw


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_any_object_is_defaulted_as_the_walk_defaults_it(raw: dict[str, Any]) -> None:
    """Valid or not: the stored path's defaulted object is the walk's (key order included),
    and where the full path accepts the object, both give the same model."""
    info = _info(raw)
    with walk_only():
        want = schema.default(copy.deepcopy(raw), info)
    assert _same(schema.default(copy.deepcopy(raw), info, owned=True), want)
    assert _same(schema.default(copy.deepcopy(raw), info), want)
    full, _ = decode(copy.deepcopy(raw), mode=Decoding.VALIDATE)
    if full is not None:
        stored, stored_errors = decode(copy.deepcopy(raw), mode=Decoding.STORED, owned=True)
        assert stored is not None and not stored_errors
        assert stored.model == full.model
        assert _same(stored.raw, full.raw)


def test_an_object_breaking_a_cel_rule_is_taken_as_stored_but_refused_from_a_file(
    tmp_path: Path,
) -> None:
    stored, errors = decode(copy.deepcopy(BREAKS_A_RULE), mode=Decoding.STORED)
    assert stored is not None and not errors
    assert _stored_form(BREAKS_A_RULE) is not None  # no rule was evaluated to default it
    assert stored.raw["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1  # defaulted
    text = (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
        "metadata: {name: r, namespace: default}\nspec:\n  parentRefs: [{name: gw}]\n"
        "  rules:\n  - matches:\n    - path: {type: PathPrefix, value: /a//b}\n"
        "    backendRefs: [{name: svc, port: 80}]\n"
    )
    (tmp_path / "route.yaml").write_text(text)
    store, book = Store(), ErrorBook()
    FileProvider(str(tmp_path), store, book).rescan()
    assert Key("HTTPRoute", "default", "r") not in store
    (error,) = book.all()
    assert error.source == f"{tmp_path / 'route.yaml'}:8"  # (the path's line)
    assert "must not contain '//'" in error.message


def test_a_structure_the_schema_refuses_is_still_a_located_rejection() -> None:
    raw = copy.deepcopy(BREAKS_A_RULE)
    raw["spec"]["rules"][0]["backendRefs"][0]["port"] = "eighty"
    assert _stored_form(raw) is None  # the Struct types refuse it: the walk defaults it
    decoded, errors = decode(raw, mode=Decoding.STORED)
    assert decoded is None
    assert [e.field for e in errors] == ["spec.rules[0].backendRefs[0].port"]


def test_the_stored_form_checks_no_rule() -> None:
    """Its code evaluates nothing the API server checked: no rule, pattern or list key."""
    root = schema._root(BREAKS_A_RULE, _info(BREAKS_A_RULE))
    assert root is not None
    source, _, _ = schemacode.generate(root)
    stored = source[source.index("\ndef g") :]
    for check in ("_rules_hold", "_pattern(", "_remember(", "_enum(", "_unique_"):
        assert check in source[: source.index("\ndef g")]
        assert check not in stored, check
