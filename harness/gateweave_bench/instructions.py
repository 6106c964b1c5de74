"""Instructions per full translation: a figure a busy machine does not move.

``python -m gateweave_bench.instructions [--routes N] [--tree DIR]... [--native] [--load]``
counts, under valgrind's cachegrind (``valgrind`` must be installed; Debian's package), the
instructions the process executes for the bench's generated objects with two full
translations and with none, and prints half the difference for each checkout ``DIR``
(default: this one) as JSON. Wall
times on a shared 2-core machine vary by 20% between runs of the same tree; these counts vary by
well under 1%, so two trees (say, before and after a restructuring) are compared by them.

Each ``DIR`` runs its own ``gateweave`` and its own generator (``gateweave_bench`` under
``DIR/harness``, or ``gateweave.bench`` in trees from before the harness moved), the Python
sources unless ``--native`` (then the compiled translation, which ``DIR`` must have built:
``python -c "from gateweave import native; native.main(['build'])"`` there).

``--load`` counts ``load_s``'s work instead (``gateweave_bench.run._load``: JSON decoding,
validation, defaults, typed conversion, cold) and ``decode_s``'s (the JSON decode alone), per
load, with four loads and with none after one that imports the validators.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from gateweave_bench.objects import DEFAULT_SEED

# The child: what it runs is the same but for the number of translations.
_CHILD = """
import gc, sys
n, routes, seed, native_wanted = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
try:
    from gateweave_bench.objects import generate
    from gateweave_bench.run import Pipeline, decode_all
except ImportError:
    from gateweave.bench.objects import generate
    from gateweave.bench.run import Pipeline, decode_all
from gateweave import native
from gateweave.translate import TranslateOptions, translate
if (native.state() == "active") != (native_wanted == "1"):
    sys.exit(f"compiled translation {native.state()}, wanted {native_wanted == '1'}")
objects = generate(routes, seed)
snap = Pipeline(decode_all(objects.manifests), TranslateOptions()).store.snapshot()
translate(snap)  # the memos that outlive a translation, warm as a running controller has them
gc.disable()
for _ in range(n):
    result = translate(snap)
    del result
"""

# The child of --load: the same but for the number of loads (or JSON decodes, the floor).
_LOAD_CHILD = """
import sys
import msgspec
from gateweave_bench.objects import generate
from gateweave_bench import run
n, routes, seed, what = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
blobs = [msgspec.json.encode(raw) for raw in generate(routes, seed).manifests]
run._load(blobs)  # the validators imported (a fixed cost of the process, not of a load)
for _ in range(n):
    run._load(blobs) if what == "load" else run._json_decode_floor(blobs)
"""
LOADS = 4
WHAT = ("load", "decode")

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions_executed(cachegrind_output: str) -> int:
    """The total of cachegrind's summary line ``I refs: 1,234``."""
    found = _REFS.search(cachegrind_output)
    if found is None:
        raise ValueError("no 'I refs' line in cachegrind's output")
    return int(found.group(1).replace(",", ""))


def count(
    tree: Path, translations: int, routes: int, seed: int, native: bool, load: str = ""
) -> int:
    """Instructions of a child making ``translations`` translations (with ``load``, "load" or
    "decode": that many loads or JSON decodes)."""
    env = dict(
        os.environ,
        PYTHONPATH=f"{tree}{os.pathsep}{tree / 'harness'}",
        PYTHONHASHSEED="0",
        GATEWEAVE_NATIVE="1" if native else "0",
    )
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _LOAD_CHILD if load else _CHILD,
            str(translations),
            str(routes),
            str(seed),
            load or ("1" if native else "0"),
        ],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the child failed:\n{done.stderr[-2000:]}")
    return instructions_executed(done.stderr)


def per_translation(tree: Path, routes: int, seed: int, native: bool) -> int:
    return (count(tree, 2, routes, seed, native) - count(tree, 0, routes, seed, native)) // 2


def per_load(tree: Path, routes: int, seed: int, what: str) -> int:
    return (
        count(tree, LOADS, routes, seed, False, what) - count(tree, 0, routes, seed, False, what)
    ) // LOADS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.instructions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--routes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--load", action="store_true")
    args = parser.parse_args(argv)
    trees = args.tree or [Path(__file__).resolve().parents[2]]
    if args.load:
        loads = {
            str(tree): {w: per_load(tree.resolve(), args.routes, args.seed, w) for w in WHAT}
            for tree in trees
        }
        print(json.dumps({"routes": args.routes, "per_load": loads}))
        return 0
    figures = {
        str(tree): per_translation(tree.resolve(), args.routes, args.seed, args.native)
        for tree in trees
    }
    print(json.dumps({"routes": args.routes, "native": args.native, "instructions": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
