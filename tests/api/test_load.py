from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gateweave.api.load import LoadResult, load_paths, load_text

NS = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n"


def names(result: LoadResult) -> list[str]:
    return [o.raw["metadata"]["name"] for o in result.objects]


def test_multi_document_yaml_located_by_line() -> None:
    text = (
        "# leading comment\n"
        + NS.format("a")
        + "---\n---\n"
        + NS.format("b")
        + "...\n---\n"
        + NS.format("c")
    )
    result = load_text(text, "m.yaml")
    assert result.errors == []
    assert names(result) == ["a", "b", "c"]
    assert [o.source for o in result.objects] == ["m.yaml:2", "m.yaml:8", "m.yaml:14"]


def test_yaml_timestamps_stay_strings() -> None:
    text = NS.format("a") + "  creationTimestamp: 2024-01-02T03:04:05Z\n"
    (obj,) = load_text(text, "t.yaml").objects
    assert obj.raw["metadata"]["creationTimestamp"] == "2024-01-02T03:04:05Z"


def test_yaml_list_items_located() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n"
        "- apiVersion: v1\n  kind: Namespace\n  metadata: {name: b}\n"
    )
    result = load_text(text, "list.yaml")
    assert names(result) == ["a", "b"]
    assert [o.line for o in result.objects] == [4, 7]


def test_typed_list_items_get_kind() -> None:
    text = (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayList\nitems:\n"
        "- metadata: {name: g1}\n"
    )
    (obj,) = load_text(text, "gl.yaml").objects
    assert obj.raw["kind"] == "Gateway"
    assert obj.raw["apiVersion"] == "gateway.networking.k8s.io/v1"


def test_json_object_and_list() -> None:
    single = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    assert names(load_text(single, "a.json")) == ["a"]
    listing = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "y"}},
            ],
        },
        indent="\t",  # tabs: valid JSON, awkward YAML
    )
    result = load_text(listing, "l.json")
    assert result.errors == []
    assert names(result) == ["x", "y"]
    assert [o.line for o in result.objects] == [5, 12]


def test_malformed_json_located() -> None:
    result = load_text('{\n  "apiVersion": "v1",\n  "kind": \n}\n', "bad.json")
    assert result.objects == []
    (err,) = result.errors
    assert (err.file, err.line) == ("bad.json", 4)


def test_malformed_yaml_contributes_nothing_and_is_located() -> None:
    text = (
        NS.format("good") + "---\n" + "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: [oops\n"
    )
    result = load_text(text, "bad.yaml")
    assert result.objects == []
    (err,) = result.errors
    assert err.file == "bad.yaml"
    assert err.line >= 9
    assert str(err).startswith(f"bad.yaml:{err.line}: invalid YAML")


def test_document_without_kind_or_not_a_mapping_is_an_error() -> None:
    no_kind = load_text("apiVersion: v1\nmetadata: {name: a}\n", "k.yaml")
    assert no_kind.objects == [] and "kind" in no_kind.errors[0].message
    scalar = load_text(NS.format("a") + "---\njust a string\n", "s.yaml")
    assert scalar.objects == [] and scalar.errors[0].line == 6


def test_directory_recursive_skips_hidden_and_temp_files(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "a.yaml").write_text(NS.format("a"))
    (tmp_path / "sub" / "b.yml").write_text(NS.format("b"))
    (tmp_path / "sub" / "deeper" / "c.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}})
    )
    for ignored in (".dot.yaml", "a.yaml~", ".a.yaml.swp", "#a.yaml#", ".#a.yaml", "notes.txt"):
        (tmp_path / ignored).write_text(NS.format("ignored"))
    (tmp_path / ".hidden" / "h.yaml").write_text(NS.format("hidden"))
    result = load_paths([str(tmp_path)])
    assert result.errors == []
    assert sorted(names(result)) == ["a", "b", "c"]
    assert {o.file for o in result.objects} == {
        str(tmp_path / "a.yaml"),
        str(tmp_path / "sub" / "b.yml"),
        str(tmp_path / "sub" / "deeper" / "c.json"),
    }


def test_one_malformed_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "1-good.yaml").write_text(NS.format("one"))
    (tmp_path / "2-bad.yaml").write_text("kind: Namespace\n  bad: indent\n")
    (tmp_path / "3-good.yaml").write_text(NS.format("three"))
    result = load_paths([str(tmp_path)])
    assert names(result) == ["one", "three"]
    (err,) = result.errors
    assert err.file == str(tmp_path / "2-bad.yaml") and err.line == 2


def test_explicit_file_any_extension_missing_file_and_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "objects.txt"
    manifest.write_text(NS.format("txt"))
    missing = tmp_path / "missing.yaml"

    class FakeStdin:
        buffer = io.BytesIO(NS.format("piped").encode())

    monkeypatch.setattr(sys, "stdin", FakeStdin())
    result = load_paths([str(manifest), str(missing), "-"])
    assert names(result) == ["txt", "piped"]
    assert result.objects[1].source == "<stdin>:1"
    (err,) = result.errors
    assert err.file == str(missing)
