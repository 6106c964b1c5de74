"""The translation's modules compiled with mypyc, used only while they match their sources.

The modules of :mod:`gateweave.translate` (but its entry point and the incremental
translator) are plain, typed Python. ``python3 dev.py`` compiles them with mypyc - the
compiler that ships with mypy - into C extensions, which run a full translation 8-16%
faster (docs/benchmarks.md). Nothing about the code changes: the same sources, type-checked the same
way.

The build lives outside the package, in ``build/native`` at the project root, beside a
digest of the sources it was built from. On import, :func:`activate` compares that digest
with the sources on disk: only when they are the same are the compiled modules loaded
(through an import finder); otherwise - sources edited since, no C compiler, or
``GATEWEAVE_NATIVE=0`` - the sources themselves are imported and run as they are. An
edit is never shadowed by an old build, and nothing depends on the build being there.

``python3 dev.py`` builds it when the sources changed (:func:`main` with ``build
--if-stale``); :func:`state` says whether it is in use (``active``, ``disabled``, ``not
built``, ``stale``), as ``gateweave bench`` reports.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
BUILD_DIR = ROOT / "build" / "native"
# Not compiled: the package entry point, and the incremental translator (its exception
# subclasses a builtin, and tests substitute functions in it).
_EXCLUDED = frozenset({"__init__.py", "incremental.py"})

_state = "not checked"


def module_files(package: Path = PACKAGE) -> list[Path]:
    """The source files compiled: every module of the translate package but the excluded ones."""
    return sorted(p for p in (package / "translate").glob("*.py") if p.name not in _EXCLUDED)


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def digest(files: Sequence[Path], root: Path = ROOT) -> str:
    """What a build is valid for: the Python version and every compiled source, by name and
    content.
    """
    h = hashlib.sha256(f"{sys.implementation.cache_tag}\n".encode())
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\n")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


class NativeFinder:
    """Loads the listed modules from their compiled extensions (a ``sys.meta_path`` finder)."""

    def __init__(self, extensions: dict[str, Path]) -> None:
        self.extensions = extensions

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        ext = self.extensions.get(fullname)
        if ext is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(ext))
        return importlib.util.spec_from_file_location(fullname, ext, loader=loader)


def extension_path(build_dir: Path, name: str) -> Path:
    return build_dir.joinpath(*name.split(".")).with_name(
        name.rsplit(".", 1)[-1] + importlib.machinery.EXTENSION_SUFFIXES[0]
    )


def check(root: Path = ROOT, build_dir: Path | None = None) -> tuple[str, dict[str, Path]]:
    """The build's state and, when it is usable, the extension of each compiled module."""
    if os.environ.get("GATEWEAVE_NATIVE", "1") == "0":
        return "disabled", {}
    build_dir = build_dir or root / "build" / "native"
    stamp = build_dir / "digest"
    if not stamp.is_file():
        return "not built", {}
    files = module_files(root / "gateweave")
    if stamp.read_text().strip() != digest(files, root):
        return "stale", {}
    extensions = {
        module_name(p, root): extension_path(build_dir, module_name(p, root)) for p in files
    }
    if not all(e.is_file() for e in extensions.values()):
        return "not built", {}
    return "active", extensions


def activate() -> str:
    """Use the compiled modules when the build matches the sources; return the state.

    Must run before any module of :mod:`gateweave.translate` is imported (``gateweave``'s
    ``__init__`` calls it)."""
    global _state
    if _state != "not checked":
        return _state
    try:
        _state, extensions = check()
    except OSError:
        _state, extensions = "not built", {}
    if extensions:
        sys.path.append(str(BUILD_DIR))  # the shared library the compiled modules import
        sys.meta_path.insert(0, NativeFinder(extensions))
    return _state


def state() -> str:
    """``active`` (the compiled modules are in use), ``disabled``, ``not built`` or ``stale``."""
    return _state


# Run by build() in a fresh interpreter: argv is a JSON list of the files, the output and
# scratch directories, and the mypy configuration file. The compiled modules share one
# library, gateweave_native__mypyc, at the top of the output directory.
_SETUP = """
import json, sys
from setuptools import setup
from mypyc.build import mypycify
files, out, tmp, config = json.loads(sys.argv[1])
setup(
    name="gateweave-native",
    ext_modules=mypycify(["--config-file", config, *files], group_name="gateweave_native",
    target_dir=tmp),
    script_args=["-q", "build_ext", "--build-lib", out, "--build-temp", tmp, "-j", "2"],
)
"""


class BuildError(Exception):
    """The compilation failed (the message says where its output is)."""


def build(root: Path = ROOT) -> float:
    """Compile the modules into ``build/native`` (replacing what is there); seconds taken."""
    import shutil

    started = time.monotonic()
    files = module_files(root / "gateweave")
    built_from = digest(
        files, root
    )  # before compiling: a source edited meanwhile leaves the build stale
    out = root / "build" / "native"
    tmp = root / "build" / "native-tmp"
    for d in (out, tmp):
        shutil.rmtree(d, ignore_errors=True)
    out.mkdir(parents=True)
    tmp.mkdir(parents=True)
    env = dict(os.environ, GATEWEAVE_NATIVE="0")  # the build imports nothing compiled
    # In a directory of its own, so setuptools reads none of the project's configuration.
    # The project's mypy configuration: the type check mypyc runs is the one CI runs.
    config = root / "pyproject.toml"
    args = [
        sys.executable,
        "-c",
        _SETUP,
        json.dumps([[str(p) for p in files], str(out), str(tmp), str(config)]),
    ]
    done = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        # Remembered for these sources, so that dev.py does not try again until they change.
        (out / "failed.log").write_text(f"{done.stdout}{done.stderr}")
        (out / "failed").write_text(built_from + "\n")
        raise BuildError(
            f"mypyc exited with {done.returncode}; its output is in {out / 'failed.log'}"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    (out / "digest").write_text(built_from + "\n")
    return time.monotonic() - started


def main(argv: Sequence[str], root: Path = ROOT) -> int:
    """``build [--if-stale]``: compile (only when the build does not match the sources, and did
    not already fail for these sources); no arguments: print the state."""
    build_dir = root / "build" / "native"
    files = module_files(root / "gateweave")
    if argv[:1] == ["build"]:
        if "--if-stale" in argv[1:]:
            current, _ = check(root)
            if current in ("active", "disabled"):
                return 0
            failed = build_dir / "failed"
            if failed.is_file() and failed.read_text().strip() == digest(files, root):
                print(
                    "gateweave.native: not compiled (the build failed for these sources: "
                    f"{build_dir / 'failed.log'})"
                )
                return 0
        print("gateweave.native: compiling the translation with mypyc", flush=True)
        try:
            took = build(root)
        except (OSError, BuildError) as err:
            print(
                f"gateweave.native: build failed ({err}); the translation runs from its Python "
                "sources",
                file=sys.stderr,
            )
            return 1
        print(f"gateweave.native: compiled {len(files)} modules in {took:.0f} s", flush=True)
        return 0
    if argv:
        print("usage: gateweave.native.main([build [--if-stale]])", file=sys.stderr)
        return 2
    print(check(root)[0])
    return 0
