"""The generated validators (gateweave/api/schemacode.py) and the CEL rules written as Python
(gateweave/api/celcode.py) answer exactly as the schema walk and the CEL closures do: the
same defaulted object (key order included) and the same errors, for valid manifests and for
every kind of mistake, while the generated code answers the valid ones by itself."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.api import cel, celcode, codecache, patterns, schema, schemacode, schemastruct
from gateweave.api.decode import kind_info
from gateweave.api.kinds import KINDS, KindInfo
from gateweave_bench.objects import generate
from tests.support.conformance_objects import all_case_files, case_raws
from tests.support.data import BACKENDS_SYSTEM, EG_QUICKSTART, MANIFESTS, yaml_files


def _corpus() -> list[dict[str, Any]]:
    """Valid manifests of every kind gateweave reads with a schema: the conformance cases'
    objects, the conformance manifests, Envoy Gateway's quickstart, the backends system, a
    bench set."""
    out: list[dict[str, Any]] = []
    seen: set[bytes] = set()

    def add(raw: Any) -> None:
        info = kind_info(raw)
        if (
            info is None
            or not info.custom
            or schema.validate(copy.deepcopy(raw), info, strict=True)[1]
        ):
            return  # (a manifest with placeholders left)
        key = msgspec.json.encode(raw)
        if key not in seen:
            seen.add(key)
            out.append(raw)

    for name in all_case_files():
        for raw in case_raws(name):
            add(raw)
    for path in [*yaml_files(MANIFESTS, "**/*.yaml"), EG_QUICKSTART, BACKENDS_SYSTEM]:
        text = path.read_text().replace("{GATEWAY_CLASS_NAME}", "gateweave")
        for doc in yaml.safe_load_all(text):
            add(doc)
    for raw in generate(60, 3).manifests:
        add(raw)
    return out


CORPUS = _corpus()


@contextmanager
def walk_only() -> Iterator[None]:
    """Validation by the schema walk alone (the generated code never asked)."""
    saved = schema._compiled
    schema._compiled = lambda *args, **kwargs: None
    try:
        yield
    finally:
        schema._compiled = saved


def _info(raw: dict[str, Any]) -> KindInfo:
    info = kind_info(raw)
    assert info is not None
    return info


def _same(a: Any, b: Any) -> bool:
    """Equal values, dict keys in the same order, numbers of the same type (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _compare(raw: dict[str, Any]) -> None:
    info = _info(raw)
    for strict in (False, True):
        with walk_only():
            want, want_errors = schema.validate(copy.deepcopy(raw), info, strict=strict)
        for owned in (False, True):
            got, got_errors = schema.validate(copy.deepcopy(raw), info, strict=strict, owned=owned)
            assert [str(e) for e in got_errors] == [str(e) for e in want_errors]
            assert [e.path for e in got_errors] == [e.path for e in want_errors]
            if not want_errors:
                assert _same(got, want), (got, want)
    with walk_only():
        want_default = schema.default(copy.deepcopy(raw), info)
    assert _same(schema.default(copy.deepcopy(raw), info, owned=True), want_default)


def test_the_generated_code_answers_every_valid_manifest_as_the_walk_does() -> None:
    kinds: set[str] = set()
    for raw in CORPUS:
        info = _info(raw)
        _compare(raw)
        # ... and answers it by itself (the walk is not what made it pass)
        fast = schema._compiled(copy.deepcopy(raw), info, True)
        assert fast is not None, raw
        kinds.add(info.kind)
    assert {
        "Gateway",
        "GatewayClass",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "UDPRoute",
        "ReferenceGrant",
        "BackendTLSPolicy",
        "Backend",
    } <= kinds


def _ordered(raw: dict[str, Any], first: tuple[str, ...]) -> dict[str, Any]:
    """``raw`` with the keys ``first`` (those present) moved to the front, in that order."""
    return {k: raw[k] for k in first if k in raw} | {k: v for k, v in raw.items() if k not in first}


def test_the_root_is_returned_in_the_walks_key_order_whatever_the_manifests() -> None:
    """A manifest in the usual order (apiVersion, kind, metadata first) is its own defaulted
    result; any other order is rebuilt into the walk's: both answered as the walk does."""
    keep = ("apiVersion", "kind", "metadata")
    for raw in CORPUS[:40]:
        info = _info(raw)
        usual = _ordered(copy.deepcopy(raw), keep)
        assert schema._compiled(usual, info, True) is usual
        for first in (("spec", "metadata", "kind", "apiVersion"), ("kind", "apiVersion")):
            other = _ordered(raw, first)
            _compare(other)
            result = schema._compiled(copy.deepcopy(other), info, True)
            assert result is not None and tuple(result)[:3] == keep


def test_the_input_is_left_alone_unless_handed_over() -> None:
    for raw in CORPUS[:50]:
        before = copy.deepcopy(raw)
        result, errors = schema.validate(raw, _info(raw))
        assert not errors
        assert _same(raw, before)
        assert result is not raw


# ---------------------------------------------------------------- mistakes


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _strings() -> list[str]:
    seen: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str):
            seen.add(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                seen.add(str(k))
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for raw in CORPUS:
        walk(raw.get("spec"))
    return sorted(seen)


STRINGS = _strings()
ODD = [
    "",
    "*",
    "/",
    "//",
    "/a/../b",
    "a%2fb",
    "#x",
    "/x/.",
    "A_B",
    "a" * 300,
    "x\n",
    "é",
    "1h",
    "0s",
    "10.0.0.1",
    "::1",
    "10.0.0.0/8",
    "Exact",
    "PathPrefix",
    "RegularExpression",
    "ReplacePrefixMatch",
    "ReplaceFullPath",
    "CORS",
    "URLRewrite",
    "RequestRedirect",
    "Service",
    "Gateway",
    "HTTP",
    "HTTPS",
]
SCALARS = st.one_of(
    st.sampled_from(STRINGS + ODD),
    st.integers(-2, 70_000),
    st.sampled_from([0, 1, 65_536, 2**63, -(2**63) - 1]),
    st.booleans(),
    st.none(),
    st.sampled_from([1.0, 0.5, math.nan, math.inf]),
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    raw = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(raw) if p and p not in (("apiVersion",), ("kind",))]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = raw
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        what = draw(
            st.sampled_from(["delete", "scalar", "list", "map", "unknown", "repeat", "swap"])
        )
        if what == "delete":
            del parent[last]
        elif what == "scalar":
            parent[last] = draw(SCALARS)
        elif what == "list":
            parent[last] = [draw(SCALARS)] if draw(st.booleans()) else []
        elif what == "map":
            parent[last] = {}
        elif what == "unknown" and isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(["hostname", "nmae", "x", "type", "name"]))] = draw(
                SCALARS
            )
        elif what == "repeat" and isinstance(parent[last], list) and parent[last]:
            parent[last].append(copy.deepcopy(parent[last][0]))
        elif what == "swap":
            other = draw(st.sampled_from(paths))
            target: Any = raw
            try:
                for step in other:
                    target = target[step]
                parent[last] = copy.deepcopy(target)
            except (KeyError, IndexError, TypeError):
                pass
    return raw


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_any_mistake_gets_the_walks_answer(raw: dict[str, Any]) -> None:
    _compare(raw)


# ---------------------------------------------------------------- CEL


def _closures(source: str, value: Any) -> Any:
    try:
        return cel.compile_rule(source).evaluate({"self": value})
    except cel.CelError:
        return "error"


EXPRESSIONS = [
    "self.a == 'x'",
    "self.a != 'x'",
    "self.n == 1",
    "self.n < 2",
    "self.n >= self.m",
    "self.s < 'b'",
    "has(self.a) && self.a == 'x'",
    "has(self.a) || self.n > 0",
    "!has(self.a)",
    "self.a.startsWith('/')",
    "self.a.endsWith('/')",
    "self.a.contains('//')",
    "self.a.matches('^[a-z]+$')",
    "size(self.l) > 1",
    "self.l.size() == 0",
    "self.l.all(x, x > 0)",
    "self.l.exists(x, x == 2)",
    "self.l.exists_one(x, x == 2)",
    "self.l.filter(x, x > 1).size() <= 1",
    "self.l.map(x, x * 2)",
    "self.l.map(x, x > 0, x)",
    "'x' in self.l",
    "self.a in ['x', 'y']",
    "self.n in [1, 2]",
    "self.l[0] == 1",
    "self.l[1] > 0",
    "size(self.l) + size(self.l) <= 3",
    "self.n + 1 > 0",
    "self.n - 1 < 0",
    "self.n * 2 == 4",
    "self.n / 2 == 0",
    "self.n % 2 == 1",
    "-self.n < 0",
    "self.b ? self.n : 0",
    "self.b && self.c",
    "self.b || self.c",
    "self.m.all(k, k != '')",
    "duration(self.a) > duration('1s')",
    "self.a.split('/').size() > 1",
    "self.x.y == 'z'",
    "(self.n > 0 ? 1 : 0) + (size(self.l) > 1 ? self.l[1] : 0) <= 1",
    "{'a': 1}[self.a] == 1",
]
VALUES = st.fixed_dictionaries(
    {},
    optional={
        "a": st.one_of(
            st.sampled_from(["x", "y", "/a", "a//b", "1s", "2m", "a/b", ""]),
            st.integers(0, 3),
            st.none(),
        ),
        "s": st.sampled_from(["a", "b", "c"]),
        "n": st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.booleans(), st.just(2**63 - 1)),
        "m": st.one_of(
            st.integers(-1, 1), st.dictionaries(st.sampled_from(["", "k"]), st.integers(0, 1))
        ),
        "l": st.one_of(
            st.lists(
                st.one_of(st.integers(-1, 3), st.sampled_from(["x", "y"]), st.none()), max_size=3
            ),
            st.sampled_from(["xy", 3]),
        ),
        "b": st.one_of(st.booleans(), st.integers(0, 1)),
        "c": st.one_of(st.booleans(), st.none()),
        "x": st.one_of(st.fixed_dictionaries({"y": st.sampled_from(["z", "w"])}), st.just([1])),
    },
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_a_rule_written_as_python_has_the_closures_value_when_it_has_one(
    value: dict[str, Any],
) -> None:
    _assert_as_the_closures(EXPRESSIONS, value, loose_lists=True)


def _assert_as_the_closures(
    sources: Any, value: dict[str, Any], *typed: Any, loose_lists: bool = False
) -> None:
    """Each of ``sources`` written as Python (``typed``: the node and kind reader the
    generated validators pass) answers ``value`` as the closures do, when it answers
    (``loose_lists``: a list equal by ``==`` will do, its items' types aside)."""
    for source in sources:
        names = celcode.Names()
        expr, _ = celcode.transpile(source, names, "s", *typed)
        fn = eval(f"lambda s: {expr.code}", names.values)  # the code under test
        try:
            got = fn(value)
        except Exception:
            continue  # the closures decide (what the generated validators do)
        want = _closures(source, value)
        assert want != "error", (source, value, got)
        assert _same(got, want) or (loose_lists and isinstance(got, list) and got == want), (
            source,
            value,
            got,
            want,
        )
        if expr.boolean:
            assert type(got) is bool


# Macros over lists whose type the schema gives (the generated validators' case: a list of one
# element is then evaluated without the comprehension), nested, with errors inside.
TYPED_NODE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "l": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "t": {"type": "string"},
                    "k": {"type": "array", "items": {"type": "integer"}},
                },
            },
        },
    },
}
TYPED_EXPRESSIONS = [
    "self.l.all(x, x.t == 'a')",
    "self.l.exists(x, has(x.t) && x.t == 'a')",
    "self.l.exists_one(x, x.t == 'b')",
    "self.l.filter(x, x.t == 'a').size() <= 1",
    "self.l.map(x, x.t)",
    "self.l.map(x, has(x.k), x.k.size())",
    "self.l.all(x, self.l.exists_one(y, y.t == x.t))",
    "self.l.exists(x, has(x.k) && x.k.exists_one(n, n > 1))",
    "self.l.all(x, x.k.all(n, 10 / n > 1))",
]
TYPED_VALUES = st.fixed_dictionaries(
    {
        "l": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "t": st.sampled_from(["a", "b"]),
                    "k": st.lists(st.integers(0, 3), max_size=3),
                },
            ),
            max_size=3,
        )
    }
)


@settings(max_examples=300, deadline=None)
@given(TYPED_VALUES)
def test_a_macro_over_a_typed_list_has_the_closures_value_when_it_has_one(
    value: dict[str, Any],
) -> None:
    _assert_as_the_closures(TYPED_EXPRESSIONS, value, TYPED_NODE, schemacode._kind)


def test_every_rule_of_every_schema_is_written_as_python() -> None:
    """No rule of the schemas gateweave carries falls back to the closures for every value."""
    from gateweave.api.kinds import KINDS

    untranslated = []
    for info in KINDS.values():
        if info.crd is None:
            continue
        for version, root in schema.load_schemas(info.group, info.crd).items():
            stack = [root]
            while stack:
                node = stack.pop()
                if not isinstance(node, dict):
                    continue
                for rule in node.get("x-kubernetes-validations") or ():
                    try:
                        celcode.transpile(
                            rule["rule"], celcode.Names(), "s", node, schemacode._kind
                        )
                    except celcode.Untranslatable as exc:
                        if "oldSelf" not in rule["rule"]:
                            untranslated.append((info.kind, version, rule["rule"], str(exc)))
                stack += list((node.get("properties") or {}).values())
                stack += [
                    node[k]
                    for k in ("items", "additionalProperties")
                    if isinstance(node.get(k), dict)
                ]
                for k in ("allOf", "anyOf", "oneOf"):
                    stack += list(node.get(k) or ())
    assert untranslated == []


def test_generating_the_validators_parses_each_rule_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule is read at least twice (compiled into closures, written as Python) and the
    versions of a kind share most rules: each text is parsed once (parsing is most of the
    cost of generating a validator, paid at a cold start)."""
    from gateweave.api.kinds import KINDS

    cel.parse("self == 1")  # celpy's parser exists
    parser = cel._PARSER
    assert parser is not None
    parsed: list[str] = []
    real = parser.compile

    def counting(source: str) -> Any:
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(parser, "compile", counting)
    monkeypatch.setattr(cel, "_TREES", {})
    monkeypatch.setattr(cel, "_PROGRAMS", {})  # (else compile_rule reads its own memo)
    info = KINDS["HTTPRoute"]
    for root in schema.load_schemas(info.group, info.crd or "").values():
        schemacode.compile_schema(root)
    assert len(parsed) > 30
    assert len(parsed) == len(set(parsed))


@pytest.mark.parametrize(
    "pattern", [r"^[a-z]+$", r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$", "é", r"\d"]
)
def test_searching_a_program_without_captures_finds_what_search_finds(pattern: str) -> None:
    program = cel.search_program(pattern)
    for text in ["", "abc", "ABC", "/a%2Fb", "/a%zz", "abc\n", "é", "x\u00e9y", "123"]:
        assert cel.found(program, text) is (cel.compile_re2(pattern).search(text) is not None)
    with pytest.raises(UnicodeEncodeError):  # (a lone surrogate: search raises it too)
        cel.found(program, "a\ud800b")


ALPHABET = "az09-.*%/AF_~\t \n!é\x7f:@"


@pytest.mark.parametrize("pattern", sorted(patterns.CHECKS))
@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=10))
def test_a_pattern_written_as_python_answers_as_re2(pattern: str, text: str) -> None:
    assert patterns.CHECKS[pattern](text) is (cel.compile_re2(pattern).search(text) is not None)


def test_a_generated_validator_keeps_no_parse_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse trees serve while a validator is generated; what was generated does not read
    them again, so they are not kept (a few MB while serving)."""
    from gateweave.api.kinds import KINDS

    monkeypatch.setattr(codecache, "_COMPILED", {})
    monkeypatch.setenv(codecache.ENV, "off")  # (generated here, not imported)
    info = KINDS["HTTPRoute"]
    root = schema.load_schemas(info.group, info.crd or "")["v1"]
    cel.parse("self == 1")
    assert cel._TREES
    assert codecache.validator(root) is not None
    assert not cel._TREES


# ---------------------------------------------------------------- the Struct types


def _kind(spec: dict[str, Any]) -> dict[str, Any]:
    """The schema of a kind of test objects whose ``spec`` has the schema ``spec``."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
    }


SMALL: dict[str, Any] = _kind(
    {
        "type": "object",
        "required": ["name", "mode"],
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 3},
            "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "code": {"type": "integer", "enum": [301, 302]},
            "weight": {"type": "number", "maximum": 2.5},
            "on": {"type": "boolean"},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            "labels": {
                "type": "object",
                "maxProperties": 1,
                "additionalProperties": {"type": "string", "maxLength": 1},
            },
            "any": {"x-kubernetes-int-or-string": True},
            "empty": {"type": "object"},
        },
    },
)
SMALL_VALUES = st.one_of(
    st.sampled_from(
        ["ab", "abc", "abcd", "é\U0001f600", "\U0001f600" * 3, "\U0001f600" * 4, "A", "B", "C"]
    ),
    st.sampled_from(
        [0, 1, 80, 301, 65535, 65536, 2**64, 1.0, 301.0, 2.5, 2.6, math.nan, math.inf, True]
    ),
    st.none(),
    st.lists(st.sampled_from(["x", 1, None]), max_size=3),
    st.dictionaries(st.sampled_from(["k", "l", "name"]), st.sampled_from(["v", "vv", 1, None])),
)


def _answers(schema: dict[str, Any], spec: dict[str, Any]) -> tuple[Any, Any]:
    """(the generated code's answer, the walk's) for an object of ``schema`` with ``spec``:
    a defaulted copy, or None."""
    raw = {"apiVersion": "x/v1", "kind": "K", "metadata": {}, "spec": spec}
    fn = schemacode.compile_schema(schema)
    try:
        got = fn(copy.deepcopy(raw))
    except schemacode.Unsure:
        got = None
    try:
        want = schemacode._walk(copy.deepcopy(raw), schema)
    except schemacode.Unsure:
        want = None
    return got, want


def _small(spec: dict[str, Any]) -> tuple[Any, Any]:
    return _answers(SMALL, spec)


@settings(max_examples=600, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(sorted(SMALL["properties"]["spec"]["properties"])), SMALL_VALUES
    )
)
def test_lengths_numbers_nulls_and_maps_are_answered_as_the_walk_does(spec: dict[str, Any]) -> None:
    """Code points (not UTF-16 units or bytes), an integer vs 1.0 vs a bool, NaN and
    infinity, integer enums, nulls, a map's size, a walked node, a required field with a
    default: what the generated code (Struct types first) accepts, the walk accepts alike."""
    got, want = _small(spec)
    if got is not None:
        assert _same(got, want), (got, want)


def _list_map(keys: list[str]) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
    }
    return {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": keys,
        "items": item,
    }


LIST_MAPS: dict[str, Any] = _kind(
    {
        "type": "object",
        "properties": {"one": _list_map(["name"]), "two": _list_map(["name", "port"])},
    }
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["one", "two"]),
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["a", "b", "1", ""]),
                "port": st.sampled_from([1, 2, 1.0, True]),
            },
        ),
        max_size=4,
    ),
)
def test_a_list_maps_keys_are_unique_as_the_walk_says(field: str, items: list[Any]) -> None:
    """Keyed by one field (compared alone) or by two: duplicates, absent keys, an integer
    against its float or bool, each answered as the walk does, or left to it."""
    got, want = _answers(LIST_MAPS, {field: items})
    if want is None:
        assert got is None
    elif got is not None:
        assert _same(got, want), (got, want)
    plain = [i for i in items if type(i.get("port", 0)) is int]
    if want is not None and len(plain) == len(items):
        assert got is not None  # (the generated code answers these itself)


_ITEM = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}, "s": {"type": "string", "default": "x"}},
}
LOOPED: dict[str, Any] = _kind(
    {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": _ITEM},
            "unique": {
                "type": "array",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "set",
            },
        },
    }
)


@pytest.mark.parametrize(
    "spec",
    [
        {"items": []},
        {"items": [{}, {"n": 2}, {"s": "y"}]},
        {"items": [{"n": 0}]},
        {"items": [None]},
        {"items": [{"s": 1}]},
        {"items": [{}], "unique": ["a", "a"]},
        {"items": [{"n": 1}], "unique": ["a", "b"]},
    ],
)
def test_a_list_whose_items_alone_are_checked_is_looped_over_in_its_parent(
    spec: dict[str, Any],
) -> None:
    """A list whose only check is its items' function is looped over where the parent reads
    it (no call for the list); a list with checks of its own (a set) keeps its function."""
    source = schemacode.generate(LOOPED)[0]
    assert "for y in x: f" in source and "_unique_set(d)" in source
    got, want = _answers(LOOPED, spec)
    if want is None:
        assert got is None
    else:
        assert got is not None and _same(got, want), (got, want)


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "é\U0001f600"},  # 2 code points (4 UTF-16 units)
        {"name": "\U0001f600" * 3, "mode": "B", "port": 65535, "code": 302, "weight": 2},
        {"name": "ab", "weight": 2.5, "tags": ["x", "y"], "labels": {"k": "v"}, "any": "80%"},
        {"name": "ab", "on": False, "empty": {}, "any": 8},
    ],
)
def test_a_valid_value_is_answered_by_the_generated_code(spec: dict[str, Any]) -> None:
    got, want = _small(spec)
    assert want is not None
    assert got is not None and _same(got, want)


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "\U0001f600" * 4},
        {"name": "ab", "port": 1.0},
        {"name": "ab", "port": True},
        {"name": "ab", "code": 303},
        {"name": "ab", "weight": math.inf},
        {"name": "ab", "mode": "C"},
        {"name": "ab", "labels": {"k": "v", "l": "w"}},
        {"name": "ab", "tags": ["x", None]},
        {"name": "ab", "empty": {"x": 1}},
        {"mode": "A"},
    ],
)
def test_an_invalid_value_is_left_to_the_walk(spec: dict[str, Any]) -> None:
    assert _small(spec)[0] is None


def test_every_served_version_is_checked_by_struct_types_first() -> None:
    """Every served version's validator converts to its Struct types first: a manifest with
    an unknown field, or a field's null, is refused by the conversion (not by Python)."""
    count = 0
    for info in KINDS.values():
        for root in (schema.load_schemas(info.group, info.crd) if info.crd else {}).values():
            fn = codecache.validator(root)
            assert fn is not None
            assert any(v is schemastruct.convert for v in fn.__globals__.values())
            typ = schemastruct.root_type(root)
            with pytest.raises(msgspec.ValidationError):
                msgspec.convert({"apiVersion": "x", "kind": "y", "nmae": 1}, type=typ)
            count += 1
    assert count >= 20


# ---------------------------------------------------------------- folded rules
# A node's rules folded where the schema or an earlier test decides a part (celcode's facts),
# split by the cases of an enum field or a list of one element (schemacode's `split`), pinned
# where the enum decides a rule: each answers as the walk (the closures) does, and the
# near-misses (an optional field, a rule the enum does not decide) are not folded.
FOLDED: dict[str, Any] = _kind(
    {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"type": "string", "enum": ["A", "B", "C"]},
            "d": {"type": "string", "default": "x"},
            "o": {"type": "string"},
            "a": {"type": "string"},
            "b": {"type": "string"},
            "items": {
                "type": "array",
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "k": {"type": "string", "default": "K"},
                        "v": {"type": "string"},
                    },
                },
                "x-kubernetes-validations": [
                    {"rule": "self.all(x, self.exists_one(y, y.name == x.name))"},
                    {"rule": "self.all(x, x.k == x.k && has(x.k))"},
                    {"rule": "self.filter(x, x.name == 'n').size() <= 1"},
                    {"rule": "!(self.exists(x, x.name == 'n') && self.exists(x, x.name == 'm'))"},
                    {"rule": "self.all(x, !has(x.v) || x.v == x.v)"},
                    {"rule": "self.all(x, has(x.v) || x.name != 'v')"},
                ],
            },
        },
        "x-kubernetes-validations": [
            {"rule": "has(self.a) == (self.type == 'A')"},
            {"rule": "!has(self.b) || self.type == 'B'"},
            {"rule": "self.type in ['A', 'B'] || self.type == 'C'"},
            {"rule": "self.type == 'A' ? true : self.type != 'A'"},
            {"rule": "self.type != 'C' || self.d == 'x' || has(self.o)"},
            {"rule": "has(self.d) && self.d == self.d"},
            {"rule": "has(self.o) ? self.o == self.o : true"},
            {"rule": "(self.type == 'B' && self.type == 'C') ? false : true"},
            {"rule": "!has(self.o) || self.o != ''"},
        ],
    },
)
_FOLDED_ITEMS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["n", "m", "v", "w"])},
        optional={"k": st.sampled_from(["K", ""]), "v": st.sampled_from(["", "q"])},
    ),
    max_size=3,
)
FOLDED_SPECS = st.fixed_dictionaries(
    {"type": st.sampled_from(["A", "B", "C"])},
    optional={
        "d": st.sampled_from(["x", "y"]),
        "o": st.sampled_from(["", "o"]),
        "a": st.just("a"),
        "b": st.just("b"),
        "items": _FOLDED_ITEMS,
    },
)


def _folded(spec: dict[str, Any]) -> tuple[Any, Any]:
    return _answers(FOLDED, spec)


@settings(max_examples=400, deadline=None)
@given(FOLDED_SPECS)
def test_folded_and_split_rules_answer_as_the_closures_do(spec: dict[str, Any]) -> None:
    """Every verdict the walk gives, the generated code gives by itself (no fallback needed:
    the folded code answers valid objects, refuses invalid ones)."""
    got, want = _folded(spec)
    assert (got is None) == (want is None), (spec, got, want)
    if want is not None:
        assert _same(got, want)


@pytest.mark.parametrize(
    ("spec", "valid"),
    [
        ({"type": "A", "a": "a"}, True),
        ({"type": "A"}, False),  # the enum split: `a` required for A
        ({"type": "B", "a": "a"}, False),
        ({"type": "C", "b": "b"}, False),
        ({"type": "C", "d": "y"}, False),  # `o` optional: its has() is not folded
        ({"type": "C", "d": "y", "o": "o"}, True),
        ({"type": "B", "o": ""}, False),
        ({"type": "B", "items": [{"name": "n"}, {"name": "n"}]}, False),  # one pass, not one
        ({"type": "B", "items": [{"name": "n"}, {"name": "m"}]}, False),
        ({"type": "B", "items": [{"name": "n"}]}, True),
        ({"type": "B", "items": [{"name": "v"}]}, False),  # `v` optional: not folded
        ({"type": "B", "items": [{"name": "v", "v": ""}]}, True),
    ],
)
def test_folding_stops_where_the_schema_does_not_decide(spec: dict[str, Any], valid: bool) -> None:
    got, want = _folded(spec)
    assert (want is not None) == valid
    assert (got is not None) == valid


def _rule_code(*sources: str) -> str:
    """The generated code of FOLDED's spec node with only the rules ``sources`` (its `ok =`
    line)."""
    root = copy.deepcopy(FOLDED)
    root["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": s} for s in sources]
    del root["properties"]["spec"]["properties"]["items"]["x-kubernetes-validations"]
    code, _, _ = schemacode.generate(root)
    return "\n".join(
        line
        for line in code.splitlines()
        if line.strip().startswith("ok = ") and "_rules_hold" not in line
    )


def test_what_the_schema_decides_is_folded_away() -> None:
    spec = FOLDED["properties"]["spec"]
    items = spec["properties"]["items"]
    # a defaulted field's has() and its equality to itself; a rule pinned by the enum
    assert _rule_code("has(self.d) && self.d == self.d") == ""
    assert _rule_code("self.type in ['A', 'B'] || self.type == 'C") == ""
    # near-misses: an optional field, a rule the enum does not decide
    assert "'o' in d" in _rule_code("has(self.o) && self.o == self.o")
    assert "c_" in _rule_code("self.type in ['A', 'B']")
    # the list of one element: uniqueness decided without a comprehension
    root = copy.deepcopy(FOLDED)
    del root["properties"]["spec"]["x-kubernetes-validations"]
    root["properties"]["spec"]["properties"]["items"] = {
        **items,
        "x-kubernetes-validations": [{"rule": items["x-kubernetes-validations"][0]["rule"]}],
    }
    code, _, _ = schemacode.generate(root)
    (line,) = [x for x in code.splitlines() if x.strip().startswith("ok = (")]
    assert line.strip().startswith("ok = ((s_len == 1) or ")
    # lists of one, two, three elements: every rule written without a comprehension
    code, _, _ = schemacode.generate(FOLDED)
    (line,) = [x for x in code.splitlines() if "(s_len == 3)" in x]
    tested = line.index("if (s_len == 3) else")
    assert " for " not in line[:tested] and " for " in line[tested:]
    assert "(s_len == 1)" in line[:tested] and "(s_len == 2)" in line[:tested]
    # an enum's cases: the field tested once per case, each case's rules folded
    line = _rule_code(
        *(
            rule
            for f, t in (("a", "A"), ("b", "B"))
            for rule in (
                f"!(has(self.{f}) && self.type != '{t}')",
                f"!(!has(self.{f}) && self.type == '{t}')",
            )
        )
    )
    assert "((('a' in d) and (not ('b' in d))) if (s_0 == 'A') else" in line
    assert "(not ('a' in d)) and ('b' in d)) if (s_0 == 'B') else" in line
