#!/usr/bin/env python3
"""Set up the project's virtualenv on demand, then run a project task.

Only the standard library is used here, so this works on a fresh machine with Python 3.11+:

    python3 dev.py quickstart   # run gateweave on examples/quickstart
    python3 dev.py test         # lint, type-check, look for dead code and run the tests
    python3 dev.py <gateweave args...>
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".gateweave-installed"


def ensure_venv() -> None:
    # gateweave with its dev extras, and the development harnesses (conformance, bench) beside it.
    projects = (ROOT / "pyproject.toml", ROOT / "harness" / "pyproject.toml")
    want = hashlib.sha256(b"".join(p.read_bytes() for p in projects)).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want and PY.exists():
        return
    if not PY.exists():
        say("dev.py: creating .venv")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    say("dev.py: installing gateweave, its harnesses and their pinned dependencies into .venv")
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    install = [str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]", "-e", str(ROOT / "harness")]
    subprocess.run(install, check=True)
    STAMP.write_text(want)


def ensure_native() -> None:
    """Compile the translation with mypyc when its sources changed since the last build (see
    gateweave/native.py); without a C compiler it runs from its Python sources, only slower."""
    if os.environ.get("GATEWEAVE_NATIVE") == "0":
        return
    code = "import sys; from gateweave import native; sys.exit(native.main(['build', '--if-stale']))"
    if subprocess.call([str(PY), "-c", code], cwd=ROOT) != 0:
        say("dev.py: continuing with the translation's Python sources")


def ensure_validators() -> None:
    """Write the CRD schemas' generated validators where they are not current (see
    gateweave/api/codecache.py), so that no command generates them; without it the first
    use writes each."""
    code = "from gateweave.api import codecache; codecache.write_all()"
    if subprocess.call([str(PY), "-c", code], cwd=ROOT) != 0:
        say("dev.py: the schema validators will be generated on first use")


def say(message: str) -> None:
    """dev.py's own lines go to stderr: stdout is the task's (``dev.py translate ... | jq``)."""
    print(message, file=sys.stderr, flush=True)


def run(cmd: list[str]) -> int:
    """Run ``cmd``; SIGINT and SIGTERM sent to dev.py are passed on to it, and dev.py waits
    for it to finish (gateweave then drains and stops its Envoys)."""
    say("+ " + " ".join(cmd))
    child = subprocess.Popen(cmd, cwd=ROOT)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - rc if rc < 0 else rc  # killed by a signal: the shell's convention


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):
        say("gateweave needs Python 3.11 or newer")
        return 2
    ensure_venv()
    ensure_native()
    ensure_validators()
    bindir = VENV / "bin"
    task = argv[0] if argv else "quickstart"
    rest = argv[1:]
    if task == "test":
        for cmd in (
            [str(bindir / "ruff"), "check", "gateweave", "harness", "tests"],
            [str(bindir / "mypy")],
            [str(bindir / "vulture")],  # dead code (pyproject.toml [tool.vulture])
        ):
            rc = run(cmd)
            if rc:
                return rc
        return run([str(PY), "-m", "pytest", *rest])
    if task == "quickstart":
        return run([str(bindir / "gateweave"), "quickstart", *rest])
    return run([str(bindir / "gateweave"), task, *rest])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
