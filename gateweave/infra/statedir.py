"""The state directory of one served configuration: what outlives a ``gateweave serve``.

It holds (mode 0700, owner only)::

    controller.lock          flock'ed by the serve using it; its pid and process start time
    xds.sock                 the xDS server's unix socket (0600): only the owner can connect
    envoys/<gateway>/        per Gateway: bootstrap.json, envoy.log and one record-<pid>.json
                             per running Envoy (pid, process start time, admin address, ...);
                             starting-<token>.json/.pid while one is being started

A serve takes the lock first (a second serve on the same directory is refused), so after a
crash (``kill -9``, OOM) the next serve finds the records of the Envoys that kept serving and
adopts them. A process is recognised by its pid *and* its start time (``/proc/<pid>/stat``),
so a reused pid is never mistaken for one of ours. An Envoy is recorded before it exists
(``starting-<token>.json``, everything but its pid) and writes its own pid beside that before
it execs, so one whose controller was torn down while starting it is found too, and its
record completed. ``gateweave status --state-dir`` reads the
records of a directory whose lock nobody holds: Envoys running without a controller.

The default directory is derived from what is served (the config directory's absolute path):
``$GATEWEAVE_STATE_ROOT/<name>-<hash>`` when that is set, else ``/var/lib/gateweave/<name>-<hash>``
for root, else ``${XDG_STATE_HOME:-~/.local/state}/gateweave/<name>-<hash>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import itertools
import json
import os
import secrets
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gateweave.errors import OperatorError

LOCK_FILE = "controller.lock"
SOCKET_FILE = "xds.sock"
ENVOYS_DIR = "envoys"
RECORD_PREFIX = "record-"
STARTING_PREFIX = "starting-"
_EXEC_WAIT_S = 2.0  # how long a found Envoy that wrote its pid may take to exec
_SUN_PATH_MAX = 107  # a unix socket path's bytes (sun_path is 108 with the NUL)


class StateDirError(OperatorError):
    """An operator's problem with the state directory, said in one line."""


STATE_ROOT_ENV = "GATEWEAVE_STATE_ROOT"  # where default state directories go, if set


def state_root() -> Path:
    if os.environ.get(STATE_ROOT_ENV):
        return Path(os.environ[STATE_ROOT_ENV])
    if os.geteuid() == 0:
        return Path("/var/lib/gateweave")
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gateweave"


def default_state_dir(served: str) -> Path:
    """The state directory of what ``served`` names (a config directory, or e.g. ``kubernetes``)."""
    absolute = os.path.abspath(served)
    name = os.path.basename(absolute.rstrip("/")) or "root"
    short = hashlib.sha256(absolute.encode()).hexdigest()[:10]
    return state_root() / f"{name}-{short}"


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), ``None`` if there is none."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; field 22 is starttime
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie waiting to be reaped by
    init - Envoys are nobody's children here - has)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return False
    return raw[raw.rfind(")") + 2 :].split()[:1] != ["Z"]


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@dataclass(frozen=True)
class EnvoyRecord:
    """One Envoy started for a Gateway, as written beside its bootstrap."""

    gateway: str  # "namespace/name"
    pid: int
    start_time: int  # /proc/<pid>/stat starttime
    admin_address: str  # "host:port"
    bootstrap: str  # the path given to -c
    bootstrap_digest: str
    spec: tuple[str, ...]  # what it was started with: a different one means a replacement
    started_at: float  # wall clock (seconds since the epoch)
    epoch: int = 0  # its hot restart epoch (a replacement is the next one) ...
    base_id: int | None = (
        None  # ... and base id (known once it runs; None: cannot be hot restarted)
    )
    drain_s: float | None = None  # how long stopping it lets connections finish (None: the default)

    @property
    def path(self) -> Path:
        return Path(self.bootstrap).parent / f"{RECORD_PREFIX}{self.pid}.json"

    def alive(self) -> bool:
        """Whether this very process still runs: same pid, same start time, our bootstrap."""
        if process_start_time(self.pid) != self.start_time:
            return False
        args = cmdline(self.pid)
        return any(a == "-c" and b == self.bootstrap for a, b in itertools.pairwise(args))

    def save(self) -> None:
        _write(self.path, self)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @classmethod
    def load(cls, path: Path) -> EnvoyRecord | None:
        try:
            data = json.loads(path.read_text())
            data["spec"] = tuple(data["spec"])
            return cls(**data)
        except (OSError, ValueError, TypeError, KeyError):
            return None


def _write(path: Path, record: EnvoyRecord) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def begin_start(record: EnvoyRecord) -> Path:
    """Write ``record`` (pid and start time 0: not known yet) beside its bootstrap as an Envoy
    being started; returns the file that Envoy is to write its pid to before it execs (see
    :func:`gateweave.infra.detach.spawn_detached`)."""
    path = Path(record.bootstrap).parent / f"{STARTING_PREFIX}{secrets.token_hex(6)}.json"
    _write(path, record)
    return path.with_suffix(".pid")


def end_start(pid_file: Path) -> None:
    """The start that :func:`begin_start` announced is over (recorded, or it failed)."""
    for path in (pid_file.with_suffix(".json"), pid_file):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _started(path: Path) -> EnvoyRecord | None:
    """The full record of the Envoy that ``path`` (a ``starting-`` file) announced, if it runs:
    its pid from the file it wrote, its start time from /proc (waiting briefly for it to exec
    the bootstrap: it writes its pid just before)."""
    pending = EnvoyRecord.load(path)
    try:
        pid = int(path.with_suffix(".pid").read_text())
    except (OSError, ValueError):
        return None
    start = process_start_time(pid)
    if pending is None or start is None:
        return None
    record = dataclasses.replace(pending, pid=pid, start_time=start)
    deadline = time.monotonic() + _EXEC_WAIT_S
    while not record.alive():
        if process_start_time(pid) != start or time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    return record


def records(envoys_dir: Path, prune: bool = True) -> list[EnvoyRecord]:
    """The records under ``envoys_dir`` of Envoys still running, including one whose start
    was announced and whose controller never recorded it (with ``prune``, its record is then
    written); those of dead ones, and starts that came to nothing, are removed (``prune``: only
    the lock's holder should: nothing of its own is starting then)."""
    found: dict[int, EnvoyRecord] = {}
    for path in sorted(envoys_dir.glob(f"*/{RECORD_PREFIX}*.json")):
        record = EnvoyRecord.load(path)
        if record is not None and record.path == path and record.alive():
            found[record.pid] = record
        elif prune:
            with contextlib.suppress(OSError):
                path.unlink()
    for path in sorted(envoys_dir.glob(f"*/{STARTING_PREFIX}*.json")):
        record = _started(path)
        if record is not None and record.pid not in found:
            found[record.pid] = record
            if prune:
                record.save()
        if prune:
            end_start(path.with_suffix(".pid"))
    return list(found.values())


@dataclass(frozen=True)
class Holder:
    """The serve holding a state directory's lock."""

    pid: int
    start_time: int | None


def _read_holder(path: Path) -> Holder | None:
    try:
        data = json.loads(path.read_text())
        return Holder(int(data["pid"]), data.get("start_time"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def holder(path: Path) -> Holder | None:
    """Who holds the lock of the state directory ``path`` (``None``: nobody, no controller)."""
    lock = path / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(lock) or Holder(0, None)
    finally:
        os.close(fd)  # also drops our shared lock
    return None


@dataclass(frozen=True)
class Survey:
    """What runs on a state directory, read without taking it: ``holder`` is its controller
    (``None``: none, so every Envoy listed runs without one)."""

    path: Path
    holder: Holder | None
    envoys: list[EnvoyRecord]


def survey(path: str | Path) -> Survey:
    path = Path(path).absolute()
    return Survey(path, holder(path), records(path / ENVOYS_DIR, prune=False))


class StateDir:
    """A state directory, locked by this process for as long as it is open."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd

    @property
    def socket(self) -> Path:
        return self.path / SOCKET_FILE

    @property
    def envoys(self) -> Path:
        return self.path / ENVOYS_DIR

    @classmethod
    def open(cls, path: str | Path) -> StateDir:
        """Create (0700) and lock ``path``; :class:`StateDirError` says why not."""
        path = Path(path).absolute()
        if len(os.fsencode(path / SOCKET_FILE)) > _SUN_PATH_MAX:
            raise StateDirError(
                f"state directory {path} is too long a path for a unix socket "
                f"(at most {_SUN_PATH_MAX - len(SOCKET_FILE) - 1} bytes); pass a shorter "
                "--state-dir"
            )
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.stat()
            if info.st_uid != os.geteuid():
                raise StateDirError(
                    f"state directory {path} belongs to another user (uid {info.st_uid})"
                )
            if stat.S_IMODE(info.st_mode) != 0o700:
                path.chmod(0o700)
            (path / ENVOYS_DIR).mkdir(mode=0o700, exist_ok=True)
            fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except PermissionError as exc:
            raise StateDirError(f"cannot use state directory {path}: {exc.strerror}") from None
        except NotADirectoryError:
            raise StateDirError(f"state directory {path} is not a directory") from None
        except OSError as exc:
            raise StateDirError(
                f"cannot use state directory {path}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            found = _read_holder(path / LOCK_FILE)
            who = f" (pid {found.pid})" if found else ""
            raise StateDirError(
                f"another gateweave serve{who} is running on state directory {path}"
            ) from None
        me = {
            "pid": os.getpid(),
            "start_time": process_start_time(os.getpid()),
            "since": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        # A socket left by a serve that died: nobody listens on it any more (we hold the lock).
        with contextlib.suppress(FileNotFoundError):
            (path / SOCKET_FILE).unlink()
        return cls(path, fd)

    def close(self) -> None:
        """Remove the socket and release the lock (the records stay with their Envoys)."""
        if self._lock_fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        os.close(self._lock_fd)
        self._lock_fd = -1
