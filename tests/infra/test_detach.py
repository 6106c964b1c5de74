"""spawn_detached: a process started as nobody's child here, in a session of its own, from a
process that runs other threads (as serve does: gRPC's)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from gateweave.infra.detach import spawn_detached
from gateweave.infra.statedir import running


def _ppid(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rfind(")") + 2 :].split()[1])


async def test_started_in_its_own_session_as_nobodys_child(tmp_path: Path) -> None:
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, daemon=True)  # a thread of ours, as gRPC's would be
    busy.start()
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "out.log"
    pids: list[int] = []
    try:
        for _ in range(20):
            pids.append(await spawn_detached(["/bin/sh", "-c", "pwd; exec sleep 30"], log, work))
        for pid in pids:
            assert running(pid)
            assert _ppid(pid) != os.getpid()
            assert os.getsid(pid) not in (os.getsid(0), pid)  # the intermediate's session, not ours
        for _ in range(200):
            if log.read_text().count(f"{work}\n") == len(pids):
                break
            await asyncio.sleep(0.02)
        assert log.read_text().count(f"{work}\n") == len(pids)  # each ran in its working directory
    finally:
        stop.set()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


async def test_a_command_that_cannot_run_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="not an executable"):
        await spawn_detached([str(tmp_path / "nope")], tmp_path / "out.log", tmp_path)


async def test_the_process_writes_its_pid_before_its_pid_is_reported(tmp_path: Path) -> None:
    """With a pid file, the started process itself writes its pid there before spawn_detached
    returns: a controller that never reads the reported pid (torn down meanwhile) still left
    behind who was started."""
    pid_file = tmp_path / "starting.pid"
    pid = await spawn_detached(
        ["/bin/sh", "-c", "exec sleep 30"], tmp_path / "out.log", tmp_path, pid_file
    )
    try:
        assert pid_file.read_text() == str(pid)
        assert running(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
