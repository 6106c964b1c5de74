"""A served directory behaves like an API server that refuses a bad update (issue 12, rule 1).

Each kind of mistake or hostile file, written into a directory the real FileProvider
watches: the error is located at the line of the offending field, the last accepted
objects stay in the store, nothing else is affected, and fixing the file brings the new
version and clears the error. The same inputs through ``gateweave translate`` give the
same located errors and exit codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gateweave.api import cel, limits, yamlread
from gateweave.api.decode import Decoding, decode
from gateweave.api.kinds import Key
from gateweave.api.load import load_paths, load_text
from gateweave.cli import app
from gateweave.offline import read_objects
from gateweave.providers import ErrorBook
from gateweave.providers.file import FileProvider
from gateweave.store import Store
from tests.support.data import ROOT

pytestmark = pytest.mark.timeout(60)

ROUTE_KEY = Key("HTTPRoute", "default", "app")


def route_text(
    path: str = "/v1",
    *,
    api_version: str = "gateway.networking.k8s.io/v1",
    kind: str = "HTTPRoute",
    path_type: str = "PathPrefix",
    hostnames_key: str = "hostnames",
    name: str = "app",
) -> str:
    # line numbers matter: apiVersion 1, kind 2, hostnames 8, type 13, value 14
    return (
        f"apiVersion: {api_version}\n"
        f"kind: {kind}\n"
        "metadata:\n"
        f"  name: {name}\n"
        "spec:\n"
        "  parentRefs:\n"
        "  - name: gw\n"
        f"  {hostnames_key}:\n"
        "  - app.test\n"
        "  rules:\n"
        "  - matches:\n"
        "    - path:\n"
        f"        type: {path_type}\n"
        f"        value: {path}\n"
        "    backendRefs:\n"
        "    - name: svc\n"
        "      port: 80\n"
    )


async def until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"not reached: {what}"
        await asyncio.sleep(0.01)


@dataclass
class Watched:
    root: Path
    store: Store
    errors: ErrorBook
    provider: FileProvider
    task: asyncio.Task[None]

    def path_value(self, key: Key = ROUTE_KEY) -> str | None:
        stored = self.store.get(key)
        if stored is None:
            return None
        return str(stored.raw["spec"]["rules"][0]["matches"][0]["path"]["value"])

    def located(self) -> list[tuple[str, int, str]]:
        """Every error as (file name, line, message); asserts each is located at a line."""
        out = []
        for err in self.errors.all():
            m = re.fullmatch(r"(.+):(\d+)", err.source)
            assert m is not None, f"unlocated error: {err}"
            out.append((os.path.basename(m.group(1)), int(m.group(2)), err.message))
        return out

    async def settle(self) -> None:
        """Two complete scans after now: whatever was written before is read."""
        target = self.provider.scans + 2
        await until(lambda: self.provider.scans >= target, "the provider rescanned")

    async def errors_for(self, name: str) -> list[tuple[int, str]]:
        """The errors about file ``name`` once there are some, as (line, message)."""
        await until(lambda: any(f == name for f, _, _ in self.located()), f"an error for {name}")
        assert not self.task.done(), "the provider stopped"
        return [(line, msg) for f, line, msg in self.located() if f == name]

    async def error_for(self, name: str) -> tuple[int, str]:
        """The only error about file ``name``."""
        (error,) = await self.errors_for(name)
        return error

    async def fixed(self, name: str) -> None:
        await until(
            lambda: not any(f == name for f, _, _ in self.located()), f"no error left for {name}"
        )


@contextlib.asynccontextmanager
async def watching(root: Path) -> AsyncIterator[Watched]:
    store, errors = Store(), ErrorBook()
    provider = FileProvider(str(root), store, errors, debounce_ms=10)
    task = asyncio.create_task(provider.run())
    try:
        await until(lambda: provider.scans >= 2, "the initial scans")
        yield Watched(root, store, errors, provider, task)
        assert not task.done(), "the provider stopped"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def accepted_route(tmp_path: Path) -> Path:
    path = tmp_path / "route.yaml"
    path.write_text(route_text("/v1"))
    return path


# ---------------------------------------------------------------- versions and kinds


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (
            {"api_version": "gateway.networking.k8s.io/v2"},
            1,
            'no matches for kind "HTTPRoute" in version "gateway.networking.k8s.io/v2" (served '
            "versions: v1, v1beta1)",
        ),
        (
            {"kind": "HTTPRoutes"},
            2,
            'no matches for kind "HTTPRoutes" in version "gateway.networking.k8s.io/v1" (did you '
            "mean HTTPRoute?)",
        ),
        (
            {"path_type": "Prefix"},
            13,
            'spec.rules[0].matches[0].path.type: Unsupported value: "Prefix": supported values: '
            '"Exact", "PathPrefix", "RegularExpression"',
        ),
        (
            {"hostnames_key": "hostname"},
            8,
            'unknown field "spec.hostname" (did you mean "hostnames"?)',
        ),
    ],
    ids=["unknown-version", "misspelt-kind", "enum", "unknown-field"],
)
async def test_a_rejected_update_keeps_the_last_accepted_route_until_fixed(
    tmp_path: Path, change: dict[str, str], line: int, message: str
) -> None:
    path = await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        assert w.path_value() == "/v1" and w.errors.all() == []
        path.write_text(route_text("/v2", **change))
        assert (line, message) in await w.errors_for("route.yaml")
        assert w.path_value() == "/v1"  # the last accepted version stays
        assert w.store.get(ROUTE_KEY).raw["spec"]["hostnames"] == ["app.test"]  # type: ignore[union-attr]
        path.write_text(route_text("/v3"))
        await until(lambda: w.path_value() == "/v3", "the fixed route is applied")
        await w.fixed("route.yaml")
        assert w.errors.all() == []


async def test_groups_gateweave_does_not_read_are_ignored_quietly(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n---\n"
        "apiVersion: networking.istio.io/v1beta1\nkind: Gateway\nmetadata: {name: istio}\n---\n"
        + route_text("/v1")
    )
    async with watching(tmp_path) as w:
        assert w.path_value() == "/v1"
        assert w.errors.all() == []
        assert [k.kind for k in w.store] == ["HTTPRoute"]


async def test_an_unknown_core_kind_close_to_one_gateweave_reads_is_refused(tmp_path: Path) -> None:
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Services\nmetadata: {name: svc}\n")
    async with watching(tmp_path) as w:
        line, message = await w.error_for("svc.yaml")
        assert line == 2 and "did you mean Service?" in message


# ---------------------------------------------------------------- which objects a file keeps


async def test_a_file_with_a_rejected_document_applies_the_valid_ones_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "routes.yaml"
    b_key = Key("HTTPRoute", "default", "b")
    c_key = Key("HTTPRoute", "default", "c")
    path.write_text(
        "---\n".join([route_text("/a1"), route_text("/b1", name="b"), route_text("/c1", name="c")])
    )
    async with watching(tmp_path) as w:
        assert (w.path_value(), w.path_value(b_key), w.path_value(c_key)) == ("/a1", "/b1", "/c1")
        # a changed validly, b broken, c removed: a applied, b and c kept as last accepted
        path.write_text(
            "---\n".join([route_text("/a2"), route_text("/b2", name="b", path_type="Prefix")])
        )
        errors = await w.errors_for("routes.yaml")
        assert 18 + 13 in [
            line for line, _ in errors
        ]  # b's path type (its document starts at line 19)
        await until(lambda: w.path_value() == "/a2", "the valid document is applied")
        assert (w.path_value(b_key), w.path_value(c_key)) == ("/b1", "/c1")
        # the file is valid again: b applied, c (no longer defined) deleted
        path.write_text("---\n".join([route_text("/a2"), route_text("/b3", name="b")]))
        await until(lambda: c_key not in w.store, "c is deleted once the file is valid")
        assert (w.path_value(), w.path_value(b_key)) == ("/a2", "/b3")
        assert w.errors.all() == []


async def test_a_broken_name_deletes_nothing(tmp_path: Path) -> None:
    path = await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        path.write_text(route_text("/v2", name="App_Not_A_DNS_Name"))
        line, message = await w.error_for("route.yaml")
        assert line == 4 and message.startswith("metadata.name: Invalid value")
        assert w.path_value() == "/v1" and len(w.store) == 1


# ---------------------------------------------------------------- hostile files


async def test_deeply_nested_json_and_yaml_are_located_errors_and_affect_nothing_else(
    tmp_path: Path,
) -> None:
    path = await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        deep = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": {}}
        node: Any = deep["data"]
        for _ in range(1000):
            node["x"] = {}
            node = node["x"]
        (tmp_path / "deep.json").write_text(json.dumps(deep, indent=1))  # ~30 KB, 1,000 deep
        (tmp_path / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000)
        line_json, msg_json = await w.error_for("deep.json")
        line_yaml, msg_yaml = await w.error_for("deep.yaml")
        assert msg_json == msg_yaml == f"nested deeper than {limits.MAX_DEPTH} levels"
        assert (
            line_json == 106 and line_yaml == 1
        )  # where depth 101 begins ("data" is depth 2, on line 7)
        (tmp_path / "more.yaml").write_text(route_text("/more", name="more"))
        await until(
            lambda: w.path_value(Key("HTTPRoute", "default", "more")) == "/more",
            "other files still load",
        )
        assert w.path_value() == "/v1"
        path.write_text(route_text("/v2"))
        await until(lambda: w.path_value() == "/v2", "other files still change")
        (tmp_path / "deep.json").unlink()
        (tmp_path / "deep.yaml").unlink()
        await w.fixed("deep.json")
        await w.fixed("deep.yaml")


def alias_bomb(levels: int = 9) -> str:
    """The classic: each level names the previous one nine times (611 bytes at 9 levels)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    for i in range(1, levels):
        prev, cur = names[i - 1], names[i]
        lines.append(f"{cur}: &{cur} [" + ",".join(f"*{prev}" for _ in range(9)) + "]")
    return "\n".join(lines) + "\n"


async def test_an_alias_bomb_is_refused_at_its_line(tmp_path: Path) -> None:
    await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        bomb = alias_bomb()
        assert len(bomb) < 700
        (tmp_path / "bomb.yaml").write_text(bomb)
        line, message = await w.error_for("bomb.yaml")
        assert message == f"aliases expand to more than {limits.MAX_ALIAS_NODES} nodes"
        assert line == 6  # 9 * 9**5 nodes would come from line 6
        assert w.path_value() == "/v1"
        (tmp_path / "bomb.yaml").unlink()
        await w.fixed("bomb.yaml")


async def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        os.mkfifo(tmp_path / "x.yaml")
        _, message = await w.error_for(
            "x.yaml"
        )  # would hang for good if the pipe were opened to read
        assert message == "refused: a named pipe; only regular files are read"
        (tmp_path / "later.yaml").write_text(route_text("/later", name="later"))
        await until(
            lambda: w.path_value(Key("HTTPRoute", "default", "later")) == "/later",
            "the provider goes on",
        )
        (tmp_path / "x.yaml").unlink()
        await w.fixed("x.yaml")


def test_a_named_pipe_at_startup_is_refused_by_a_plain_rescan(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.yaml")
    (tmp_path / "route.yaml").write_text(route_text())
    store, errors = Store(), ErrorBook()
    FileProvider(str(tmp_path), store, errors).rescan()
    assert ROUTE_KEY in store
    assert [e.message for e in errors.all()] == [
        "refused: a named pipe; only regular files are read"
    ]


async def test_a_link_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    served = tmp_path / "served"
    outside.mkdir()
    served.mkdir()
    (outside / "secret.yaml").write_text(route_text("/stolen", name="stolen"))
    (served / "route.yaml").write_text(route_text("/v1"))
    async with watching(served) as w:
        (served / "shadow.yaml").symlink_to(outside / "secret.yaml")
        _, message = await w.error_for("shadow.yaml")
        assert message == "refused: a symbolic link to a file outside the configuration directory"
        assert Key("HTTPRoute", "default", "stolen") not in w.store
        assert w.path_value() == "/v1"
    result = load_paths([str(served)])  # translate -f DIR refuses it too
    assert [e.message for e in result.errors] == [
        "refused: a symbolic link to a file outside the configuration directory"
    ]


async def test_a_configmap_volume_layout_is_read_and_its_atomic_swap_followed(
    tmp_path: Path,
) -> None:
    first = tmp_path / "..2026_01_01"
    first.mkdir()
    (first / "route.yaml").write_text(route_text("/v1"))
    (tmp_path / "..data").symlink_to("..2026_01_01")
    (tmp_path / "route.yaml").symlink_to("..data/route.yaml")
    async with watching(tmp_path) as w:
        assert w.path_value() == "/v1" and w.errors.all() == []
        # what the kubelet does: a new timestamped directory, a new link renamed over ..data
        second = tmp_path / "..2026_01_02"
        second.mkdir()
        (second / "route.yaml").write_text(route_text("/v2"))
        (tmp_path / "..data_tmp").symlink_to("..2026_01_02")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        for f in first.iterdir():
            f.unlink()
        first.rmdir()
        await until(lambda: w.path_value() == "/v2", "the swapped ConfigMap content is applied")
        assert w.errors.all() == []


async def test_duplicate_keys_are_refused_at_the_second_one(tmp_path: Path) -> None:
    path = await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        text = route_text("/v2").replace(
            "        value: /v2\n", "        value: /v2\n        value: /v3\n"
        )
        path.write_text(text)
        line, message = await w.error_for("route.yaml")
        assert (line, message) == (15, 'duplicate field "spec.rules[0].matches[0].path.value"')
        assert w.path_value() == "/v1"
        path.write_text(route_text("/v3"))
        await until(lambda: w.path_value() == "/v3", "fixed")
        await w.fixed("route.yaml")


async def test_a_huge_value_is_quoted_cut(tmp_path: Path) -> None:
    path = await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        path.write_text(route_text("/v2", path_type="a" * 1_000_000))
        errors = await w.errors_for("route.yaml")
        line, message = next(e for e in errors if "Unsupported value" in e[1])
        assert line == 13
        assert len(message) < 1000 and '..." (1000000 bytes)' in message
        assert all(len(str(e)) < 2000 for e in w.errors.all())
        assert w.path_value() == "/v1"


async def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    await accepted_route(tmp_path)
    async with watching(tmp_path) as w:
        with open(tmp_path / "big.yaml", "wb") as fh:
            fh.truncate(limits.MAX_FILE_BYTES + 1)  # sparse: nothing to write, nothing read
        _, message = await w.error_for("big.yaml")
        assert message == (
            f"refused: larger than {limits.MAX_FILE_BYTES} bytes (the limit on one manifest file)"
        )
        assert w.path_value() == "/v1"


# ---------------------------------------------------------------- the reader itself


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: &x [*x]\n", 1, "the alias *x is inside the node it names"),
        ("a: *nowhere\n", 1, "the alias *nowhere names no anchor"),
        (
            "a: 1\nb:\n  c: !!binary aGk=\n",
            3,
            'the tag "tag:yaml.org,2002:binary" is not supported',
        ),
        (
            "a: !!python/object:os.system x\n",
            1,
            'the tag "tag:yaml.org,2002:python/object:os.system" is not supported',
        ),
        ("? [a, b]\n: c\n", 1, "a mapping key must be a string"),
        ("a: 1\n<<: {b: 2}\n<<: {c: 3}\n", 3, 'duplicate field "<<"'),
        (
            "k: v\n" + "---\n" * (limits.MAX_DOCUMENTS + 1),
            limits.MAX_DOCUMENTS + 1,
            f"more than {limits.MAX_DOCUMENTS} documents in one file",
        ),
        ("a: x\x00y\n", 1, None),
    ],
    ids=[
        "cycle",
        "undefined-alias",
        "binary-tag",
        "python-tag",
        "complex-key",
        "two-merges",
        "documents",
        "control-char",
    ],
)
def test_refused_yaml_is_located(text: str, line: int, message: str | None) -> None:
    with pytest.raises(yamlread.YamlError) as info:
        yamlread.read_documents(text)
    assert info.value.line == line
    if message is not None:
        assert info.value.message == message


def test_the_reader_builds_what_safe_load_builds() -> None:
    text = (
        "base: &base {a: 1, b: [x, y]}\n"
        "m:\n  <<: *base\n  b: own\n"
        "list: [*base, *base]\n"
        "scalars: [yes, no, ~, 0x1f, 1_000, 1.5, .inf, '1', \"2\", 2024-01-02T03:04:05Z]\n"
        "1: int key\n"
        "~: null key\n"
    )
    (doc,) = yamlread.read_documents(text)
    expected = yaml.safe_load(text)
    expected["scalars"][9] = "2024-01-02T03:04:05Z"  # timestamps stay strings
    expected["1"], expected["~"] = (
        expected.pop(1),
        expected.pop(None),
    )  # keys are strings, as written
    assert doc.value == expected


def test_plain_scalars_are_resolved_once_for_every_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of plain scalars is shared by every read (one object for each repeated value),
    gives the same values when it answers as when it resolves (``<<`` a key in one document, a
    value in another), and stays bounded."""
    monkeypatch.setattr(yamlread, "_PLAIN", {})
    first = "kind: HTTPRoute\nport: 8080\non: yes\nnothing: ~\nmerge: <<\n"
    second = "b: &b {kind: HTTPRoute}\nm:\n  <<: *b\n  port: 8080\nv: <<\non: yes\n"
    (a,) = yamlread.read_documents(first)
    (b,) = yamlread.read_documents(second)
    assert a.value == {
        "kind": "HTTPRoute",
        "port": 8080,
        "on": True,
        "nothing": None,
        "merge": "<<",
    }
    assert b.value == {
        "b": {"kind": "HTTPRoute"},
        "m": {"kind": "HTTPRoute", "port": 8080},
        "v": "<<",
        "on": True,
    }
    assert a.value["kind"] is b.value["m"]["kind"]
    (again,) = yamlread.read_documents(first)
    assert again.value == a.value
    monkeypatch.setattr(yamlread, "_PLAIN_MAX", 3)
    monkeypatch.setattr(yamlread, "_PLAIN_TEXT_MAX", 8)
    yamlread._PLAIN.clear()
    (many,) = yamlread.read_documents("[a, b, c, d, e, f, g, a-very-long-plain-scalar]\n")
    assert many.value[-1] == "a-very-long-plain-scalar"
    assert 0 < len(yamlread._PLAIN) <= 3 and "a-very-long-plain-scalar" not in yamlread._PLAIN


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.sampled_from(["yes", "no", "~", "<<", "1_000", "0x1f", ".inf", "null", "", "a: b", "- x"]),
    st.text(max_size=8),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["<<", "1", "true"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_VALUES, min_size=1, max_size=3),
    st.sampled_from([False, True]),
    st.sampled_from([False, True]),
)
def test_the_reader_builds_what_safe_load_builds_for_any_values(
    docs: list[Any], flow: bool, shared_twice: bool
) -> None:
    """Whatever PyYAML writes (block or flow style, the same object twice as an anchor and an
    alias), read again by the reader or by safe_load: the same values (read twice, the second
    time from the memo of plain scalars)."""
    if shared_twice:
        docs = [[doc, doc] for doc in docs]
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=True)
    expected = list(yaml.safe_load_all(text))
    for _ in range(2):
        assert [d.value for d in yamlread.read_documents(text)] == expected


def test_json_problems_are_located_by_reading_the_text_again() -> None:
    dup = (
        '{\n  "apiVersion": "v1",\n  "kind": "Namespace",\n  "metadata": {\n    "name": "a",\n    '
        '"name": "b"\n  }\n}\n'
    )
    (err,) = load_text(dup, "dup.json").errors
    assert (err.line, err.message) == (6, 'duplicate field "metadata.name"')
    starts_like_json = "[" * 5000 + "]" * 5000
    (err,) = load_text(starts_like_json, "deep.yaml").errors
    assert (err.line, err.message) == (1, f"nested deeper than {limits.MAX_DEPTH} levels")


def test_every_field_path_leads_to_its_line() -> None:
    listing = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: gateway.networking.k8s.io/v1\n  kind: HTTPRoute\n  metadata: {name: a}\n"
        "- apiVersion: gateway.networking.k8s.io/v1\n  kind: HTTPRoute\n  metadata:\n    name: b\n"
        "    labels:\n      app.kubernetes.io/name: x\n"
        "  spec:\n    rules:\n    - matches:\n      - path: {type: Prefix}\n"
    )
    a, b = load_text(listing, "l.yaml").objects
    assert (a.line, b.line) == (4, 7)
    assert b.line_of("spec.rules[0].matches[0].path.type") == 16
    assert b.line_of("metadata.labels[app.kubernetes.io/name]") == 12
    assert b.line_of("spec.rules[0].backendRefs") == 15  # the deepest part present: the rule
    assert b.line_of("") == b.line_of("<root>") == 7
    assert a.line_of("spec") == 4


def test_lines_are_found_only_for_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "route.yaml").write_text(route_text() + "---\n" + route_text("/b", name="b"))

    def no_line_maps(*_: Any) -> None:
        raise AssertionError("a valid object's fields were located")

    monkeypatch.setattr(yamlread, "line_of", no_line_maps)
    run = read_objects([str(tmp_path)])
    assert len(run.objects) == 2 and not run.rejected and not run.load_errors


def test_the_cel_regex_cache_is_bounded() -> None:
    for i in range(cel.RE_CACHE_SIZE + 50):
        cel.compile_re2(f"^x{i}$")
    assert cel.compile_re2.cache_info().currsize <= cel.RE_CACHE_SIZE


# ---------------------------------------------------------------- translate and status


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_translate_reports_every_rejected_object_at_its_line_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(route_text(api_version="gateway.networking.k8s.io/v2"))
    (tmp_path / "b.yaml").write_text(route_text(kind="HTTPRoutes", name="b"))
    (tmp_path / "c.yaml").write_text(route_text(path_type="Prefix", name="c"))
    (tmp_path / "d.yaml").write_text(route_text(hostnames_key="hostname", name="d"))
    (tmp_path / "e.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
    )
    result = invoke("translate", "-f", str(tmp_path), "-q")
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    located = {line.split(": ")[1].rsplit("/", 1)[1] for line in lines}
    assert located == {"a.yaml:1", "b.yaml:2", "c.yaml:12", "c.yaml:13", "d.yaml:8"}
    assert "e.yaml" not in result.stderr
    only_ignored = tmp_path / "ignored"
    only_ignored.mkdir()
    (only_ignored / "e.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
    )
    assert invoke("translate", "-f", str(only_ignored)).exit_code == 0


def test_translate_exits_2_for_an_unreadable_file_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    result = invoke("translate", "-f", str(tmp_path))
    assert result.exit_code == 2
    assert (
        f"bomb.yaml:6: aliases expand to more than {limits.MAX_ALIAS_NODES} nodes" in result.stderr
    )


def test_translate_show_xds_as_yaml() -> None:
    result = invoke(
        "translate", "-f", str(ROOT / "examples" / "quickstart"), "--show", "xds", "-o", "yaml"
    )
    assert result.exit_code == 0, result.stderr
    dumped = yaml.safe_load(result.stdout)
    (resources,) = dumped.values()
    listener = resources["Listener"][0]
    assert listener["@type"] == "type.googleapis.com/envoy.config.listener.v3.Listener"
    hcm = listener["filter_chains"][0]["filters"][0][
        "typed_config"
    ]  # an Any: an OrderedDict before
    assert hcm["@type"].endswith("HttpConnectionManager")


def test_status_from_files_lists_the_configuration_errors(tmp_path: Path) -> None:
    (tmp_path / "route.yaml").write_text(route_text(path_type="Prefix"))
    result = invoke("status", "-f", str(tmp_path))
    assert "Configuration errors (2)" in result.stdout  # the enum, and the CEL rule on the path
    assert "route.yaml:13" in result.stdout and "Unsupported value" in result.stdout
    (tmp_path / "route.yaml").write_text(route_text())
    assert "No configuration errors." in invoke("status", "-f", str(tmp_path)).stdout


# ---------------------------------------------------------------- decoding modes


def test_strict_decoding_checks_metadata_and_core_kinds_at_the_top() -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "lables": {}},
        "spce": {},
    }
    _, errors = decode(svc, mode=Decoding.STRICT)
    assert [(e.field, e.message) for e in errors] == [
        ("metadata.lables", 'unknown field "metadata.lables" (did you mean "labels"?)'),
        ("spce", 'unknown field "spce" (did you mean "spec"?)'),
    ]
    decoded, errors = decode(svc)  # the default (VALIDATE) prunes, as before
    assert decoded is not None and errors == []
