"""The generated validators written as modules ahead of time (gateweave/api/codecache.py):
they answer as the code generated in memory does, a changed schema or generator is never
served by old code, and a process that imports them reads valid objects of every kind
without importing celpy or lark."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.api import cel, codecache, schema, schemacode
from gateweave.api.decode import kind_info
from gateweave.api.kinds import KINDS
from gateweave_bench.objects import generate
from tests.api.test_schemacode import CORPUS, _info, _same, mutated
from tests.support.policies import policy_system
from tests.support.variants import EXTRA_OBJECTS

ROOT = Path(__file__).resolve().parents[2]
Fn = Callable[[dict[str, Any]], dict[str, Any]]


def _roots() -> list[dict[str, Any]]:
    """Every served version's schema of every kind (each once)."""
    out: dict[int, dict[str, Any]] = {}
    for info in KINDS.values():
        if info.crd is not None:
            for root in schema.load_schemas(info.group, info.crd).values():
                out[id(root)] = root
    return list(out.values())


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory of this test's own, and no validator delivered yet."""
    directory = tmp_path / "validators"
    monkeypatch.setenv(codecache.ENV, str(directory))
    monkeypatch.setattr(codecache, "_COMPILED", {})
    yield directory


def _imported(fn: Fn | None) -> bool:
    """Whether ``fn`` comes from a module file (not compiled in memory)."""
    return fn is not None and (fn.__module__ or "").startswith("_gateweave_validator_")


def _outcome(fn: Fn, raw: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "value", fn(copy.deepcopy(raw))
    except Exception as exc:
        return "raised", type(exc).__name__


def _root_of(raw: dict[str, Any]) -> dict[str, Any] | None:
    return schema._root(raw, _info(raw))


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Fn, Fn]]:
    """Each version's validator imported from a module and compiled in memory."""
    directory = tmp_path_factory.mktemp("validators")
    saved, env = codecache._COMPILED, os.environ.get(codecache.ENV)
    os.environ[codecache.ENV] = str(directory)
    codecache._COMPILED = {}
    out: dict[int, tuple[Fn, Fn]] = {}
    try:
        for root in _roots():
            imported = codecache.validator(root)
            assert imported is not None and _imported(imported)
            out[id(root)] = (imported, schemacode.compile_schema(root))
    finally:
        codecache._COMPILED = saved
        if env is None:
            del os.environ[codecache.ENV]
        else:
            os.environ[codecache.ENV] = env
    return out


def _compare(both: dict[int, tuple[Fn, Fn]], raw: dict[str, Any]) -> tuple[str, Any]:
    root = _root_of(raw)
    assert root is not None
    imported, in_memory = both[id(root)]
    got, want = _outcome(imported, raw), _outcome(in_memory, raw)
    assert got[0] == want[0] and _same(got[1], want[1]), (got, want)
    return got


def test_imported_validators_answer_every_valid_manifest_as_in_memory_ones(
    both: dict[int, tuple[Fn, Fn]],
) -> None:
    for raw in CORPUS:
        assert _compare(both, raw)[0] == "value", raw


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_imported_validators_answer_every_mistake_as_in_memory_ones(
    both: dict[int, tuple[Fn, Fn]], raw: dict[str, Any]
) -> None:
    if _root_of(raw) is not None:
        _compare(both, raw)


def _route(hostnames: int) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"hostnames": [f"h{i}.example.com" for i in range(hostnames)]},
    }


def _httproute_v1() -> dict[str, Any]:
    info = KINDS["HTTPRoute"]
    return copy.deepcopy(schema.load_schemas(info.group, info.crd or "")["v1"])


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.py"))


def test_a_changed_schema_is_served_by_code_of_its_own(cache: Path) -> None:
    root = _httproute_v1()
    fn = codecache.validator(root)
    assert _imported(fn) and fn is not None
    fn(_route(2))  # valid: two hostnames
    changed = copy.deepcopy(root)
    changed["properties"]["spec"]["properties"]["hostnames"]["maxItems"] = 1
    stricter = codecache.validator(changed)
    assert _imported(stricter) and stricter is not None
    with pytest.raises(schemacode.Unsure):
        stricter(_route(2))
    # the same fields in another order default in another order: another key, another file
    reordered = copy.deepcopy(root)
    props = reordered["properties"]["spec"]["properties"]
    reordered["properties"]["spec"]["properties"] = dict(reversed(props.items()))
    assert codecache.key(reordered) != codecache.key(root)
    assert _imported(codecache.validator(reordered))
    assert len(_files(cache)) == 3


def test_the_generator_digest_follows_every_generating_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of the generating modules: editing any of them changes the digest."""
    api = ROOT / "gateweave" / "api"
    copies = tmp_path / "api"
    copies.mkdir()
    names = ["codecache.py", *codecache._GENERATOR_MODULES]
    for name in names:
        shutil.copy(api / name, copies / name)
    monkeypatch.setattr(codecache, "_HERE", copies / "codecache.py")
    codecache.generator_digest.cache_clear()
    try:
        digests = {codecache.generator_digest()}
        for name in names:
            with (copies / name).open("a") as out:
                out.write("\n# edited\n")
            codecache.generator_digest.cache_clear()
            digests.add(codecache.generator_digest())
        assert len(digests) == len(names) + 1
    finally:
        codecache.generator_digest.cache_clear()


def test_a_changed_generator_is_never_served_by_old_code(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _httproute_v1()
    assert _imported(codecache.validator(root))
    [old] = _files(cache)
    generated: list[int] = []
    generate = schemacode.generate

    def counting(node: dict[str, Any]) -> Any:
        generated.append(1)
        return generate(node)

    monkeypatch.setattr(schemacode, "generate", counting)
    monkeypatch.setattr(codecache, "generator_digest", lambda: "0" * 64)  # an edited generator
    monkeypatch.setattr(codecache, "_COMPILED", {})
    fn = codecache.validator(root)
    assert _imported(fn) and generated == [1]
    assert fn is not None and fn.__globals__["KEY"].endswith("0" * 64)
    assert len(_files(cache)) == 2 and old.exists()


@pytest.mark.parametrize("damage", ["truncated", "another key", "syntax"])
def test_a_damaged_or_foreign_file_is_generated_again(cache: Path, damage: str) -> None:
    root = _httproute_v1()
    assert _imported(codecache.validator(root))
    [path] = _files(cache)
    text = path.read_text()
    if damage == "truncated":
        path.write_text(text[: len(text) // 2].rpartition("\n")[0] + "\n")
    elif damage == "another key":
        path.write_text(text.replace("KEY = 'schema ", "KEY = 'schema 0"))
    else:
        path.write_text(text + "def (\n")
    shutil.rmtree(cache / "__pycache__", ignore_errors=True)
    codecache._COMPILED.clear()
    fn = codecache.validator(root)
    assert _imported(fn) and fn is not None
    assert fn.__globals__["KEY"] == codecache.key(root)
    assert path.read_text() == text
    assert fn(_route(2))["spec"]["hostnames"] == ["h0.example.com", "h1.example.com"]


def test_a_directory_others_may_write_is_never_read(cache: Path) -> None:
    cache.mkdir()
    cache.chmod(0o777)
    fn = codecache.validator(_httproute_v1())
    assert fn is not None and not _imported(fn)  # compiled in memory
    assert not _files(cache)


def test_without_a_place_to_write_the_validator_is_compiled_in_memory(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(codecache.ENV, "off")
    fn = codecache.validator(_httproute_v1())
    assert fn is not None and not _imported(fn)
    assert fn(_route(2))["spec"]["hostnames"] == ["h0.example.com", "h1.example.com"]


ADDRESS_FIELDS = st.sampled_from(
    ["Hostname", "IPAddress", "example.com/x", "a.example.com", "*.example.com", "Bad_Host"]
)
ADDRESSES: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(
        st.sampled_from(["type", "value", "other"]),
        st.one_of(ADDRESS_FIELDS, st.integers(-1, 1), st.none(), st.lists(ADDRESS_FIELDS)),
        max_size=3,
    ),
    st.sampled_from([None, "Hostname", 1, []]),
)


@pytest.fixture(scope="module")
def written() -> list[codecache.Written]:
    """The rules the walk evaluates in Gateway's schema, as its imported module gives them."""
    info = KINDS["Gateway"]
    roots = list(schema.load_schemas(info.group, info.crd or "").values())
    saved = cel._PROGRAMS, codecache._COMPILED
    try:
        for _ in range(2):  # generated (the rules compiled) and written; then only imported
            cel._PROGRAMS, codecache._COMPILED = {}, {}
            assert all(_imported(codecache.validator(root)) for root in roots)
        out = [p for p in cel._PROGRAMS.values() if isinstance(p, codecache.Written)]
    finally:
        cel._PROGRAMS, codecache._COMPILED = saved
    assert len(out) >= 2
    return out


def _evaluated(program: cel.Program, value: Any) -> tuple[str, Any]:
    try:
        return "value", program.evaluate({"self": value})
    except cel.CelError as exc:
        return "error", str(exc)


@settings(max_examples=400, deadline=None)
@given(ADDRESSES)
def test_the_walked_rules_written_as_python_have_the_closures_values(
    written: list[codecache.Written], value: Any
) -> None:
    for program in written:
        got, want = _evaluated(program, value), _evaluated(cel.closures(program.source), value)
        assert got[0] == want[0] and _same(got[1], want[1]), (program.source, value, got, want)


def test_the_walked_rules_answer_a_valid_address_without_the_closures(
    written: list[codecache.Written],
) -> None:
    for program in written:
        for value in ({"type": "Hostname", "value": "a.example.com"}, {"type": "IPAddress"}):
            assert program.fn(value) is True


def _every_kind() -> list[dict[str, Any]]:
    """Valid manifests of every kind read with a schema: the equivalence corpus, the policy
    system, a bench set with policies, the parameters variant."""
    out = []
    for raw in [
        *CORPUS,
        *policy_system(),
        *generate(20, 3, policies=1.0).manifests,
        *EXTRA_OBJECTS["parameters"],
    ]:
        info = kind_info(raw)
        if info is not None and info.crd and not schema.validate(copy.deepcopy(raw), info)[1]:
            out.append(raw)
    return out


_LOAD = """
import json, sys
from gateweave.api.decode import Decoding, decode
kinds = set()
for raw in json.load(open(sys.argv[1])):
    decoded, errors = decode(raw, "corpus")
    assert decoded is not None and not errors, (raw, errors)
    kinds.add(raw["kind"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("celpy", "lark"))
invalid = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
           "metadata": {"name": "r"}, "spec": {"rules": [{"filters": [
               {"type": "URLRewrite", "urlRewrite": {"hostname": "a"}}] * 2}]}}
as_stored, refused = decode(json.loads(json.dumps(invalid)), "stored", mode=Decoding.STORED)
stored = as_stored is not None and not refused and "celpy" not in sys.modules
_, errors = decode(invalid, "invalid")
print(json.dumps({"kinds": sorted(kinds), "loaded": loaded, "errors": [e.message for e in errors],
                  "stored": stored, "after": "celpy" in sys.modules}))
"""


def test_valid_objects_of_every_kind_are_read_without_celpy_or_lark(
    cache: Path, tmp_path: Path
) -> None:
    assert codecache.write_all() == len(_roots())
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(_every_kind()))
    env = {**os.environ, codecache.ENV: str(cache), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, str(corpus)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    answer = json.loads(out.stdout)
    assert answer["kinds"] == sorted(info.kind for info in KINDS.values() if info.crd)
    assert answer["loaded"] == []
    # the same object read from the API server: defaulted, no rule evaluated (no celpy)
    assert answer["stored"] is True
    # an invalid object: the schema walk says why, importing celpy to evaluate the rule
    assert any("URLRewrite filter cannot be repeated" in e for e in answer["errors"])
    assert answer["after"] is True
