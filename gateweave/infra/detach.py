"""Starting a process as nobody's child: it outlives the controller that started it.

An Envoy with hot restart enabled asks to be terminated when its parent dies
(``PR_SET_PDEATHSIG``), so an Envoy that is the controller's child dies with it. It must
instead be the child of a short-lived intermediate that exits before the Envoy starts.

Forking the controller itself to make that intermediate is unsafe: the controller runs
threads (gRPC's among them), and a forked copy of a threaded Python process may deadlock or
die in a lock or fork handler another thread held. So the intermediate is a fresh
process: this module run as a script by a new interpreter (``-I -S``: no site, only the
standard library), which the controller starts by fork+exec in C (``asyncio`` subprocess).
The intermediate, single-threaded, forks the process-to-be, reports its pid on stdout and
exits; the process-to-be waits until its parent is gone (it is then init's, or the nearest
subreaper's) and only then execs the command, in its own session.

The pid reaches the controller on the intermediate's stdout, which a controller torn down
at that moment never reads (and tearing down its event loop kills the intermediate, which
lets the process-to-be go on). So the process-to-be can also write its own pid to a file,
as soon as it exists, before the intermediate reports it: whoever exists to run the command
has said who it is, whatever becomes of the controller (:mod:`gateweave.infra.statedir` reads
that file).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_HELPER = str(Path(__file__).resolve())
# This very interpreter: the child of the fork execs the binary it runs, which a process may
# not reach by name (sys.executable) once it runs as another user (a venv's python linked to
# a home directory that user cannot search).
_INTERPRETER = "/proc/self/exe"


async def spawn_detached(
    cmd: Sequence[str], log_path: Path, cwd: Path, pid_file: Path | None = None
) -> int:
    """Start ``cmd`` in a session of its own, as nobody's child, in the working directory
    ``cwd``, its output appended to ``log_path``; returns its pid (:class:`OSError` if it
    could not be started). With ``pid_file``, the process writes its pid there (atomically)
    before this returns, and before it execs ``cmd``."""
    if not os.access(cmd[0], os.X_OK):
        raise OSError(f"{cmd[0]} is not an executable")
    with log_path.open("ab") as log:
        helper = await asyncio.create_subprocess_exec(
            _INTERPRETER,
            "-I",
            "-S",
            _HELPER,
            str(cwd),
            str(log_path),
            str(pid_file) if pid_file is not None else "-",
            *cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    out, _ = await helper.communicate()
    if helper.returncode != 0 or not out.strip().isdigit():
        raise OSError(f"cannot start {cmd[0]} (see {log_path})")
    return int(out)


def _write_pid(path: str) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, str(os.getpid()).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _main(argv: list[str]) -> int:
    """The intermediate: ``CWD LOG PIDFILE CMD...`` (``PIDFILE`` ``-``: none)."""
    cwd, log_path, pid_file, cmd = argv[0], argv[1], argv[2], argv[3:]
    gate_read, gate_write = os.pipe()  # closed when this process exits: the child's signal to go
    told_read, told_write = os.pipe()  # closed by the child once its pid file is written
    me = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            os.close(gate_write)
            os.close(told_read)
            if pid_file != "-":
                _write_pid(pid_file)
            os.close(told_write)
            os.read(gate_read, 1)  # EOF: the intermediate is exiting ...
            while os.getppid() == me:  # ... and once it is gone, this process is re-parented
                time.sleep(0.001)
            os.chdir(cwd)
            out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, 1 << 16)
            os.execv(cmd[0], cmd)
        except BaseException as exc:
            os.write(2, f"cannot start {cmd[0]}: {exc}\n".encode())
        os._exit(127)
    # The pid is reported only once the child wrote it down (EOF: done, or the child died), so
    # a controller that read it can tidy that file away without racing the child.
    os.close(told_write)
    os.read(told_read, 1)
    os.write(1, str(child).encode())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
