"""Reading many manifest files at once: the file provider's reads shared with worker processes.

Reading a file (its YAML parsed, each object validated, defaulted and packed) is Python work
that holds the interpreter's lock: a thread cannot share it, another process can. When a scan
has many files to read (:data:`PARALLEL_MIN_FILES`: a start, a checkout replacing a
directory), :func:`read_parallel` starts worker processes (``python -c`` importing this
module: the interpreter and gateweave of the server, in a process of their own), and the
server and the workers take batches of :data:`BATCH_FILES` files from one queue until it is
empty: a worker that starts late, or runs on a busy CPU, simply takes fewer.

A worker returns for each file what :func:`gateweave.providers.fileread.read_file` returned
there: the errors, and each accepted object as its packed form, its model (msgpack, decoded
here into the same model type, with the strings the server's own decode shares shared again)
and its source. A thread per worker only sends and receives; the server decodes the answers in
its reading thread, between its own batches, so that what it keeps is allocated there. The
result is the one reading in the server gives, file for file (tests/providers/test_readers.py).

Whatever a worker cannot hand over as it is - a file whose reading raised (the server reads it
again and logs the error, as it would have), an object that would not pack, a model of an
unknown type - it marks for the server to read; a worker that dies, answers wrongly, or takes
longer than the server's whole read so far (at least :data:`WORKER_GRACE_S`) once the queue is
empty, is stopped and its batch read by the server. Nothing is lost: at worst the server reads
every file itself, as it does for a small scan.

How many workers: ``GATEWEAVE_READ_WORKERS`` (0 turns them off), otherwise one less than the
CPUs the server may use (its affinity, and a cgroup's CPU quota), at most
:data:`MAX_WORKERS`. Each is a Python process with gateweave's reading modules imported (36 MB
resident at its peak, measured reading the 13,016 files of 10,000 routes), alive for one scan
only. The worker's messages: length-prefixed msgpack over its standard input and output; its
standard error is the server's.
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import IO, Any

import msgspec
import structlog

import gateweave
from gateweave.api.decode import Decoded, decode_sourced
from gateweave.api.kinds import KINDS, Key, KindInfo
from gateweave.api.load import Sourced
from gateweave.providers import ConfigError
from gateweave.providers.fileread import FileRead, StatKey, read_file

log = structlog.get_logger("gateweave.providers.readers")

PARALLEL_MIN_FILES = 512
"""Files a scan must read before workers are started (starting one costs about 0.3 CPU
seconds, the time the server reads a few hundred files in)."""

BATCH_FILES = 64
"""Files handed out at a time."""

MAX_WORKERS = 3

WORKER_GRACE_S = 10.0

ENV_WORKERS = "GATEWEAVE_READ_WORKERS"

_LENGTH = struct.Struct(">I")


class _Error(msgspec.Struct, array_like=True):
    source: str
    message: str
    kind: str
    namespace: str
    name: str


class _Object(msgspec.Struct, array_like=True):
    kind: str
    namespace: str
    name: str
    source: str
    model_type: str
    model: msgspec.Raw
    body: bytes
    status: bytes | None


class _Reply(msgspec.Struct, array_like=True):
    """One file as a worker read it; ``here``: read it in the server instead."""

    errors: list[_Error] = []
    objects: list[_Object] = []
    problems: list[_Error] = []
    here: bool = False


_REQUEST = msgspec.msgpack.Decoder(list[tuple[str, str]])
_REPLIES = msgspec.msgpack.Decoder(list[_Reply])
_ENCODER = msgspec.msgpack.Encoder()


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_MODELS: dict[str, KindInfo] = {_type_name(i.model): i for i in KINDS.values()}  # by model
_MODEL_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {}
_set = msgspec.structs.force_setattr


def _share(model: Any, info: KindInfo) -> None:
    """``model``, as msgpack made it (every string a new one), given the strings the server's
    own decode shares between objects (:func:`gateweave.api.decode.decode`: one apiVersion and
    one kind string per kind, the namespace interned); the rest of its sharing is its own
    ``__post_init__``'s."""
    version = info.storage_api_version
    if model.api_version == version:
        _set(model, "api_version", version)
    if model.kind == info.kind:
        _set(model, "kind", info.kind)
    meta = model.metadata
    if meta.namespace:
        _set(meta, "namespace", sys.intern(meta.namespace))


def _model_decoder(name: str) -> msgspec.msgpack.Decoder[Any] | None:
    decoder = _MODEL_DECODERS.get(name)
    if decoder is None:
        info = _MODELS.get(name)
        if info is None:
            return None
        # strict=False, as the model was converted from the manifest in the first place
        decoder = _MODEL_DECODERS[name] = msgspec.msgpack.Decoder(info.model, strict=False)
    return decoder


# ---------------------------------------------------------------- how many workers


def _quota_cpus(
    proc_cgroup: str = "/proc/self/cgroup", cgroupfs: str = "/sys/fs/cgroup"
) -> int | None:
    """The CPUs a cgroup (v2) CPU quota leaves this process, rounded, at least 1: the
    smallest ``cpu.max`` of its own cgroup and its ancestors (a systemd unit's ``CPUQuota=``,
    a slice's, a container's, whose cgroup is its root); None without a quota."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            path = next(line[3:] for line in f.read().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    best: int | None = None
    parts = [p for p in path.strip().split("/") if p]
    for depth in range(len(parts), -1, -1):
        where = os.path.join(cgroupfs, *parts[:depth], "cpu.max")
        try:
            with open(where, encoding="ascii") as f:
                quota, period = f.read().split()[:2]
            if quota != "max":
                cpus = max(1, int(int(quota) / int(period) + 0.5))
                best = cpus if best is None else min(best, cpus)
        except (OSError, ValueError):
            continue  # (the root cgroup has no cpu.max)
    return best


def _cpus() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _quota_cpus()
    return cpus if quota is None else min(cpus, quota)


def worker_count() -> int:
    """Worker processes a large scan starts: ``GATEWEAVE_READ_WORKERS``, or one less than the
    server's CPUs, at most :data:`MAX_WORKERS`."""
    text = os.environ.get(ENV_WORKERS, "").strip()
    if text:
        try:
            return max(0, min(int(text), 64))
        except ValueError:
            log.warning(f"{ENV_WORKERS} is not a number; using the default", value=text)
    return max(0, min(_cpus() - 1, MAX_WORKERS))


# ---------------------------------------------------------------- messages


def _send(out: IO[bytes], payload: bytes) -> None:
    out.write(_LENGTH.pack(len(payload)))
    out.write(payload)
    out.flush()


def _receive(inp: IO[bytes]) -> bytes | None:
    """One message, or None at the end of the stream (also in the middle of a message)."""
    head = inp.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    payload = inp.read(size)
    return payload if len(payload) == size else None


# ---------------------------------------------------------------- the worker's side


class _Escalate(BaseException):
    """Raised through ``read_file``'s own handling of a decoding bug: the server reads the
    file again, so that the bug is logged and reported there."""


def _decode_or_escalate(item: Sourced) -> Any:
    try:
        return decode_sourced(item)
    except Exception as exc:
        raise _Escalate from exc


def _error(e: ConfigError) -> _Error:
    return _Error(e.source, e.message, e.kind, e.namespace, e.name)


def _reply(path: str, display: str, root: str) -> _Reply:
    try:
        read = read_file(path, display, root, None, _decode_or_escalate)
    except (Exception, _Escalate):
        return _Reply(here=True)
    objects = []
    for key, (decoded, source) in read.objects.items():
        parts = decoded.packed_parts()
        name = _type_name(type(decoded.model))
        if parts is None or name not in _MODELS:
            return _Reply(here=True)
        try:
            model = msgspec.Raw(_ENCODER.encode(decoded.model))
        except (TypeError, ValueError, OverflowError):
            return _Reply(here=True)
        objects.append(_Object(*key, source, name, model, *parts))
    return _Reply([_error(e) for e in read.errors], objects, [_error(e) for e in read.problems])


def main() -> int:
    """A worker: reads the files of each request under ``sys.argv[1]`` until its input ends."""
    root = sys.argv[1]
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to the server's standard error, not into a reply
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides; its end ends the input
    from gateweave import logs

    logs.configure("error")
    gc.disable()  # as the server reads: nothing read here outlives its reply
    inp = sys.stdin.buffer
    while (request := _receive(inp)) is not None:
        replies = [_reply(path, display, root) for path, display in _REQUEST.decode(request)]
        try:
            _send(out, _ENCODER.encode(replies))
        except BrokenPipeError:
            return 0
    return 0


# ---------------------------------------------------------------- the server's side


def _config_errors(errors: list[_Error]) -> list[ConfigError]:
    return [ConfigError(e.source, e.message, e.kind, e.namespace, e.name) for e in errors]


def _file_read(reply: _Reply, stat: StatKey | None) -> FileRead | None:
    """The worker's reply as the server's own read would be, or None: read it here."""
    if reply.here:
        return None
    objects: dict[Key, tuple[Decoded, str]] = {}
    for o in reply.objects:
        decoder = _model_decoder(o.model_type)
        if decoder is None:
            return None
        model = decoder.decode(o.model)
        _share(model, _MODELS[o.model_type])
        objects[Key(o.kind, o.namespace, o.name)] = (
            Decoded.from_packed(o.body, o.status, model),
            o.source,
        )
    return FileRead(stat, _config_errors(reply.errors), objects, _config_errors(reply.problems))


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @classmethod
    def start(cls, root: str) -> _Worker | None:
        env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.abspath(gateweave.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        code = "import sys; from gateweave.providers.readers import main; sys.exit(main())"
        try:
            # -P: not the working directory first on the path, this gateweave
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", code, root],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            log.warning("no file reader process could be started", error=str(exc))
            return None
        return cls(proc)

    def exchange(self, batch: list[tuple[str, str]]) -> bytes:
        """Send the worker ``batch``; its answer, as it came (decoded by the caller)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _send(self.proc.stdin, _ENCODER.encode(batch))
        answer = _receive(self.proc.stdout)
        if answer is None:
            raise EOFError(f"the reader process ended (exit status {self.proc.poll()})")
        return answer

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_Answer = tuple[list[str], bytes]  # a batch, and a worker's answer for it


def _drive(
    worker: _Worker,
    batches: deque[list[str]],
    display: Callable[[str], str],
    answers: queue.SimpleQueue[_Answer | None],
) -> None:
    """Hand ``worker`` batches until none is left, each answer to ``answers``; None there
    once it is done (a batch without an answer is read by the server)."""
    try:
        while True:
            try:
                batch = batches.popleft()
            except IndexError:
                return
            try:
                answer = worker.exchange([(path, display(path)) for path in batch])
            except Exception as exc:  # (dead or killed)
                log.warning("a file reader process failed; its files are read here", error=str(exc))
                return
            answers.put((batch, answer))
    finally:
        worker.close()
        answers.put(None)


def _take(answer: _Answer, due: Mapping[str, StatKey | None], results: dict[str, FileRead]) -> None:
    """A worker's answer decoded into ``results`` (in the server's reading thread: what the
    server keeps is allocated there, not in the thread that talks to the worker, whose memory
    would stay apart); a file it did not read stays out of ``results``."""
    batch, payload = answer
    try:
        replies = _REPLIES.decode(payload)
        if len(replies) != len(batch):
            raise ValueError(f"{len(replies)} replies to {len(batch)} files")
    except (msgspec.DecodeError, ValueError) as exc:
        log.warning("a reader process answered wrongly; its files are read here", error=str(exc))
        return
    for path, reply in zip(batch, replies, strict=True):
        try:
            read = _file_read(reply, due[path])
        except Exception:  # (a model that does not decode as its type)
            read = None
        if read is not None:
            results[path] = read


def read_parallel(
    due: Mapping[str, StatKey | None],
    root: str,
    display: Callable[[str], str],
    read_here: Callable[[str, StatKey | None], FileRead],
    workers: int,
) -> dict[str, FileRead]:
    """Each file of ``due`` read, as ``read_here`` reads it (in this thread), shared with up to
    ``workers`` worker processes; in the order of ``due``."""
    started = time.monotonic()
    paths = list(due)
    batches = deque(paths[i : i + BATCH_FILES] for i in range(0, len(paths), BATCH_FILES))
    results: dict[str, FileRead] = {}
    answers: queue.SimpleQueue[_Answer | None] = queue.SimpleQueue()
    pool: list[_Worker] = []
    threads: list[threading.Thread] = []
    for worker in (_Worker.start(root) for _ in range(workers)):
        if worker is None:
            continue
        thread = threading.Thread(
            target=_drive,
            args=(worker, batches, display, answers),
            name="gateweave-file-reader",
            daemon=True,
        )
        try:
            thread.start()
        except RuntimeError as exc:  # (no thread to be had: the server reads without it)
            log.warning("no thread for a file reader process", error=str(exc))
            worker.kill()
            worker.close()
            continue
        pool.append(worker)
        threads.append(thread)
    done = 0  # workers finished
    while True:
        try:
            batch = batches.popleft()
        except IndexError:
            break
        for path in batch:
            results[path] = read_here(path, due[path])
        while True:  # the answers that came meanwhile
            try:
                answer = answers.get_nowait()
            except queue.Empty:
                break
            if answer is None:
                done += 1
            else:
                _take(answer, due, results)
    # The workers' last answers are waited for as long as the whole read has taken so far (at
    # least WORKER_GRACE_S); then the workers are stopped and their batches read here.
    deadline: float | None = time.monotonic() + max(WORKER_GRACE_S, time.monotonic() - started)
    while done < len(pool):
        try:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            answer = answers.get(timeout=left)
        except queue.Empty:
            log.warning("a file reader process is too slow; its files are read here")
            for worker in pool:
                worker.kill()  # (its thread then ends, and says so)
            deadline = None
            continue
        if answer is None:
            done += 1
        else:
            _take(answer, due, results)
    for thread in threads:
        thread.join()
    for path in paths:
        if path not in results:  # what a worker did not read
            results[path] = read_here(path, due[path])
    log.info(
        "files read with worker processes",
        files=len(paths),
        workers=len(pool),
        seconds=round(time.monotonic() - started, 3),
    )
    return {path: results[path] for path in paths}
