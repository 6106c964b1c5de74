"""The state directory: owner-only, locked by one serve, its xDS socket refused to other users,
and its records never mistaking another process for one of our Envoys."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gateweave.infra import statedir
from gateweave.infra.statedir import (
    EnvoyRecord,
    StateDir,
    StateDirError,
    begin_start,
    end_start,
    holder,
    process_start_time,
    records,
    survey,
)
from gateweave.xds.server import AdsServer

NOBODY = 65534


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory everyone may enter (unlike pytest's tmp_path), so only the state directory's
    own permissions keep another user out."""
    parent = Path(tempfile.mkdtemp(prefix="gw-state-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        subprocess.run(["rm", "-rf", str(parent)], check=False)


def connect_as(uid: int | None, path: Path) -> int:
    """Connect to the unix socket ``path`` from a child process running as ``uid`` (None: as
    we are): 0 if it connected, 13 if refused (the interpreter may not be runnable by
    another user, so the child is a fork, not a new program)."""
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        code = 1
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(path))
            code = 0
        except PermissionError:
            code = 13
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root (as CI runs)")
async def test_xds_socket_refuses_another_user(open_parent: Path) -> None:
    state = StateDir.open(open_parent / "state")
    server = AdsServer(registry=CollectorRegistry())
    try:
        await server.start_unix(str(state.socket))
        assert (state.path.stat().st_mode & 0o777, state.socket.stat().st_mode & 0o777) == (
            0o700,
            0o600,
        )
        assert connect_as(None, state.socket) == 0  # the owner connects
        assert connect_as(NOBODY, state.socket) == 13  # another user cannot even reach it
        state.path.chmod(0o755)  # and with the directory opened up, the socket itself refuses
        assert connect_as(NOBODY, state.socket) == 13
    finally:
        await server.stop(0)
        state.close()


def test_one_serve_per_state_directory(tmp_path: Path) -> None:
    state = StateDir.open(tmp_path / "s")
    try:
        assert holder(state.path) is not None and holder(state.path).pid == os.getpid()  # type: ignore[union-attr]
        with pytest.raises(
            StateDirError, match=rf"another gateweave serve \(pid {os.getpid()}\) is running"
        ):
            StateDir.open(tmp_path / "s")
    finally:
        state.close()
    assert holder(tmp_path / "s") is None
    StateDir.open(tmp_path / "s").close()  # free again once released


def test_unusable_state_directories_are_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StateDirError, match=r"is not a directory|cannot use state directory"):
        StateDir.open(tmp_path / "file" / "state")
    with pytest.raises(StateDirError, match="too long a path for a unix socket"):
        StateDir.open(tmp_path / ("x" * 120))


def test_a_record_is_of_that_very_process(tmp_path: Path) -> None:
    """Same pid, same start time and our bootstrap on its command line, or it is not ours."""
    envoys = tmp_path / "envoys"
    (envoys / "ns_gw").mkdir(parents=True)
    bootstrap = envoys / "ns_gw" / "bootstrap.json"
    bootstrap.write_text("{}")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-c", str(bootstrap)]
    )
    try:
        start = process_start_time(proc.pid)
        assert start is not None
        record = EnvoyRecord(
            gateway="ns/gw",
            pid=proc.pid,
            start_time=start,
            admin_address="127.0.0.1:1",
            bootstrap=str(bootstrap),
            bootstrap_digest="",
            spec=("ns/gw",),
            started_at=0.0,
        )
        record.save()
        assert records(envoys) == [record]
        assert survey(tmp_path).envoys == [record] and survey(tmp_path).holder is None
        # a pid that was reused by another process (another start time) is not ours
        dataclasses.replace(record, start_time=start + 1).save()
        assert records(envoys, prune=False) == []
        assert record.path.exists()  # only pruned by the state's holder
        assert records(envoys) == [] and not record.path.exists()
        # nor is a process without our bootstrap
        dataclasses.replace(record, bootstrap=str(tmp_path / "other.json")).save()
        assert not dataclasses.replace(record, bootstrap=str(tmp_path / "other.json")).alive()
    finally:
        proc.kill()
        proc.wait()


def test_a_start_whose_record_was_never_completed_is_found(tmp_path: Path) -> None:
    """An Envoy announced by begin_start that wrote its pid (its controller gone before it
    recorded it) is found with its full record, which the state's holder writes; an announced
    start that came to nothing (no pid written, or that process gone) is tidied away."""
    envoys = tmp_path / "envoys"
    (envoys / "ns_gw").mkdir(parents=True)
    bootstrap = envoys / "ns_gw" / "bootstrap.json"
    bootstrap.write_text("{}")
    pending = EnvoyRecord(
        gateway="ns/gw",
        pid=0,
        start_time=0,
        admin_address="127.0.0.1:1",
        bootstrap=str(bootstrap),
        bootstrap_digest="d",
        spec=("ns/gw",),
        started_at=1.0,
        epoch=2,
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-c", str(bootstrap)]
    )
    try:
        pid_file = begin_start(pending)
        assert records(envoys) == []  # no pid yet: a start that came to nothing
        assert list((envoys / "ns_gw").iterdir()) == [bootstrap]
        pid_file = begin_start(pending)
        pid_file.write_text(str(proc.pid))
        start = process_start_time(proc.pid)
        assert start is not None
        expected = dataclasses.replace(pending, pid=proc.pid, start_time=start)
        assert records(envoys, prune=False) == [expected]
        assert not expected.path.exists() and pid_file.exists()  # only the holder writes
        assert records(envoys) == [expected]
        assert EnvoyRecord.load(expected.path) == expected
        assert not pid_file.exists() and not pid_file.with_suffix(".json").exists()
        # announced again beside its own record (a controller gone between the two): one record
        pid_file = begin_start(pending)
        pid_file.write_text(str(proc.pid))
        assert records(envoys) == [expected]
        end_start(pid_file)
        # a written pid whose process is gone
        proc.kill()
        proc.wait()
        pid_file = begin_start(pending)
        pid_file.write_text(str(proc.pid))
        assert records(envoys) == []
        assert list((envoys / "ns_gw").iterdir()) == [bootstrap]
    finally:
        proc.kill()
        proc.wait()


def test_default_state_directories_go_under_gateweave_state_root_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(statedir.STATE_ROOT_ENV, str(tmp_path))
    assert statedir.default_state_dir("/etc/gw").parent == tmp_path
    monkeypatch.delenv(statedir.STATE_ROOT_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    expected = Path("/var/lib/gateweave") if os.geteuid() == 0 else tmp_path / "xdg" / "gateweave"
    assert statedir.default_state_dir("/etc/gw").parent == expected
    assert statedir.default_state_dir("/etc/gw").name.startswith("gw-")
