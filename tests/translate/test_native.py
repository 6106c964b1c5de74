"""The compiled translation (gateweave.native): used only when it matches its sources, and
translating exactly as the sources do."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateweave import native
from gateweave_bench.objects import generate
from tests.support import native_digest
from tests.support.conformance_objects import all_case_files, case_raws


def _fake_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    pkg = root / "gateweave" / "translate"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "incremental.py", "alpha.py", "beta.py"):
        (pkg / name).write_text(f"# {name}\n")
    return root, root / "build" / "native"


def _stamp(root: Path, build: Path, *, extensions: bool) -> None:
    build.mkdir(parents=True, exist_ok=True)
    files = native.module_files(root / "gateweave")
    (build / "digest").write_text(native.digest(files, root) + "\n")
    if extensions:
        for p in files:
            ext = native.extension_path(build, native.module_name(p, root))
            ext.parent.mkdir(parents=True, exist_ok=True)
            ext.write_bytes(b"")


def test_a_build_is_used_only_while_it_matches_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATEWEAVE_NATIVE", raising=False)
    root, build = _fake_tree(tmp_path)
    assert [p.name for p in native.module_files(root / "gateweave")] == ["alpha.py", "beta.py"]
    assert native.check(root)[0] == "not built"

    _stamp(root, build, extensions=False)
    assert native.check(root)[0] == "not built"  # a digest without its extensions

    _stamp(root, build, extensions=True)
    state, extensions = native.check(root)
    assert state == "active"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    assert extensions == {
        "gateweave.translate.alpha": build / "gateweave" / "translate" / f"alpha{suffix}",
        "gateweave.translate.beta": build / "gateweave" / "translate" / f"beta{suffix}",
    }

    # An edit to a compiled module, a new module or a removed one: the sources are used.
    alpha = root / "gateweave" / "translate" / "alpha.py"
    alpha.write_text("# alpha, edited\n")
    assert native.check(root) == ("stale", {})
    alpha.write_text("# alpha.py\n")
    assert native.check(root)[0] == "active"
    (root / "gateweave" / "translate" / "gamma.py").write_text("# gamma\n")
    assert native.check(root)[0] == "stale"
    (root / "gateweave" / "translate" / "gamma.py").unlink()
    (root / "gateweave" / "translate" / "beta.py").unlink()
    assert native.check(root)[0] == "stale"

    # Files that are not compiled may change freely.
    _stamp(root, build, extensions=True)
    (root / "gateweave" / "translate" / "incremental.py").write_text("# edited\n")
    assert native.check(root)[0] == "active"

    monkeypatch.setenv("GATEWEAVE_NATIVE", "0")
    assert native.check(root) == ("disabled", {})


def test_the_finder_serves_only_the_compiled_modules(tmp_path: Path) -> None:
    ext = tmp_path / f"alpha{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    finder = native.NativeFinder({"gateweave.translate.alpha": ext})
    spec = finder.find_spec("gateweave.translate.alpha")
    assert spec is not None and spec.origin == str(ext)
    assert isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
    assert finder.find_spec("gateweave.translate.beta") is None


def test_ci_translates_with_the_compiled_modules() -> None:
    """CI (which sets GATEWEAVE_EXPECT_NATIVE=1) must test and measure what dev.py builds."""
    if os.environ.get("GATEWEAVE_EXPECT_NATIVE") != "1":
        pytest.skip("GATEWEAVE_EXPECT_NATIVE is not set")
    import gateweave.translate.httproute as httproute

    assert native.state() == "active"
    assert httproute.__file__ is not None
    assert httproute.__file__.endswith(importlib.machinery.EXTENSION_SUFFIXES[0])


def _digests(inputs: Path, *, compiled: bool) -> dict[str, str]:
    env = dict(os.environ)
    if compiled:
        env.pop("GATEWEAVE_NATIVE", None)
    else:
        env["GATEWEAVE_NATIVE"] = "0"
    script = native_digest.__file__
    done = subprocess.run(
        [sys.executable, str(script), str(inputs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, str] = json.loads(done.stdout)
    return out


def test_compiled_and_source_translations_agree(tmp_path: Path) -> None:
    """Statuses, infrastructure and xDS IR of every conformance case's objects and of a generated
    benchmark set are the same, compiled or not (the xDS builder is never compiled)."""
    if native.state() != "active":
        pytest.skip(f"no compiled translation here (native build {native.state()})")
    sets = {"bench": generate(300, 11).manifests}
    for case_file in all_case_files():
        sets[case_file] = list(case_raws(case_file))  # TLS material generated once, here
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(sets))
    compiled = _digests(inputs, compiled=True)
    source = _digests(inputs, compiled=False)
    assert compiled.pop("native") == "active"
    assert source.pop("native") == "disabled"
    assert compiled.keys() == sets.keys()
    assert {k for k in compiled if compiled[k] != source[k]} == set()


def test_a_failed_build_leaves_the_sources_in_use_and_is_not_retried_until_they_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GATEWEAVE_NATIVE", raising=False)
    monkeypatch.setenv("CC", "false")  # a machine whose C compiler fails
    root, build = _fake_tree(tmp_path)
    (root / "pyproject.toml").write_text("[tool.mypy]\n")
    assert native.main(["build", "--if-stale"], root) == 1
    assert "build failed" in capsys.readouterr().err
    assert native.check(root) == ("not built", {})
    assert (build / "failed.log").read_text()  # what the compiler said
    # The next run of dev.py does not try again for the same sources ...
    assert native.main(["build", "--if-stale"], root) == 0
    assert "the build failed for these sources" in capsys.readouterr().out
    # ... but does once they change.
    (root / "gateweave" / "translate" / "alpha.py").write_text("# alpha, edited\n")
    assert native.main(["build", "--if-stale"], root) == 1
