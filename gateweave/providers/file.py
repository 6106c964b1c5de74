"""The file provider: a directory of manifests, watched, turned into store changes.

A served directory behaves like an API server that refuses a bad update: the stored
object stays. Each file is read and diffed on its own, by these rules:

* a file that cannot be read or parsed (a syntax error, a repeated key, a limit of
  :mod:`gateweave.api.limits` crossed, a named pipe, a link out of the directory...)
  keeps all its last accepted objects;
* a file that parses but has rejected objects (schema, CEL rule, unknown field, unknown
  version or kind of a group gateweave reads): the objects it validly defines are
  applied, and every other object it defined before keeps its last accepted version for
  as long as any object of the file is rejected. A broken document so never deletes
  anything: not the object it meant to define (whose name may be what is broken), nor an
  object whose document was removed in the same edit;
* only a file that parses, has no rejected object and no longer defines an object
  deletes it; a deleted file deletes its objects;
* an object defined by two files is reported naming both; the lexicographically
  smaller path wins, whatever order the files were seen in.

Every problem is reported (``/api/errors``, the log, ``gateweave_config_errors``) at the
line of the offending field, until the file is fixed or deleted.

Reading and decoding run in a worker thread (:meth:`FileProvider.refresh`), never on the
event loop; :mod:`gateweave.api.limits` bounds what one file can cost, and only regular
files inside the directory are read, never with a call that could block (see
:func:`gateweave.api.load.read_bytes`). A ConfigMap mounted as the directory works: its
files are links through ``..data`` to a hidden directory, which the kubelet swaps
atomically; the swap wakes the provider and the changed files are read again.

Unchanged objects cause no store change (the store ignores identical re-applies), so
rewriting a file with the same content publishes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog
from watchfiles import Change, awatch

from gateweave.api.decode import Decoded, decode_sourced
from gateweave.api.kinds import Key
from gateweave.api.load import iter_manifest_files
from gateweave.gcpause import gc_paused
from gateweave.providers import ConfigError, ErrorBook
from gateweave.providers.fileread import DecodeFn, FileRead, StatKey, read_file
from gateweave.providers.readers import PARALLEL_MIN_FILES, read_parallel, worker_count
from gateweave.store import Store

log = structlog.get_logger("gateweave.providers.file")


@dataclass
class _File:
    stat: StatKey | None
    objects: dict[Key, tuple[Decoded, str]] = field(
        default_factory=dict
    )  # last accepted, with source


@dataclass(frozen=True)
class Scan:
    present: frozenset[str]  # every manifest file found
    reads: dict[str, FileRead]  # the files read again (new, changed, or forced)


def _stat(path: str) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class FileProvider:
    """Keeps ``store`` equal to the manifests under ``directory``."""

    def __init__(
        self,
        directory: str,
        store: Store,
        errors: ErrorBook | None = None,
        *,
        debounce_ms: int = 50,
        decode_fn: DecodeFn = decode_sourced,
        read_workers: int | None = None,
        parallel_min_files: int = PARALLEL_MIN_FILES,
    ) -> None:
        self.directory = directory
        self.root = os.path.abspath(directory)
        self.store = store
        self.errors = errors if errors is not None else ErrorBook()
        self.debounce_ms = debounce_ms
        self.decode_fn = decode_fn
        # worker processes sharing a large scan's reads (None: readers.worker_count())
        self.read_workers = read_workers
        self.parallel_min_files = parallel_min_files
        self._files: dict[str, _File] = {}
        self._definers: dict[Key, set[str]] = {}
        self._refreshing = asyncio.Lock()  # one scan at a time: a scan applied late would be stale
        self.scans = 0  # completed (re)scans, for tests and debugging

    # ------------------------------------------------------------ naming

    def _display(self, path: str) -> str:
        return os.path.join(self.directory, os.path.relpath(path, self.root))

    # ------------------------------------------------------------ reading (any thread)

    def scan(
        self, known: Mapping[str, StatKey | None], forced: frozenset[str] = frozenset()
    ) -> Scan:
        """Find the manifest files and read those whose stat is not ``known`` (or that are
        ``forced``). Touches nothing of the provider's state: safe in a worker thread."""
        present, due = self.due(known, forced)
        return Scan(present, self.read(due))

    def due(
        self, known: Mapping[str, StatKey | None], forced: frozenset[str] = frozenset()
    ) -> tuple[frozenset[str], dict[str, StatKey | None]]:
        """Every manifest file present, and those to read with their stat: new, changed
        (their stat not ``known``) or ``forced``. Stats only: no file is opened."""
        present = frozenset(os.path.abspath(p) for p in iter_manifest_files(self.root))
        due: dict[str, StatKey | None] = {}
        for path in sorted(present):
            stat = _stat(path)
            if path not in known or known[path] != stat or path in forced:
                due[path] = stat
        return present, due

    def read(self, due: Mapping[str, StatKey | None]) -> dict[str, FileRead]:
        """Each file of ``due`` read and decoded (safe in a worker thread)."""
        # The collector paused, as for a translation: decoding a directory allocates a
        # container per field, and each collection they trigger walks the whole heap.
        with gc_paused():
            if len(due) >= self.parallel_min_files and self.decode_fn is decode_sourced:
                workers = worker_count() if self.read_workers is None else self.read_workers
                if workers > 0:
                    return read_parallel(due, self.root, self._display, self._read, workers)
            return {path: self._read(path, stat) for path, stat in due.items()}

    def _read(self, path: str, stat: StatKey | None) -> FileRead:
        display = self._display(path)
        try:
            return self._read_objects(path, display, stat)
        except Exception as exc:  # a bug in reading must not stop the provider
            log.exception("reading failed", file=display)
            return FileRead(
                stat, [ConfigError(display, f"internal error while reading: {exc!r}")], {}, []
            )

    def _read_objects(self, path: str, display: str, stat: StatKey | None) -> FileRead:
        return read_file(path, display, self.root, stat, self.decode_fn)

    # ------------------------------------------------------------ applying (the event loop)

    def _known(self) -> dict[str, StatKey | None]:
        return {path: f.stat for path, f in self._files.items()}

    def rescan(self, forced: set[str] | frozenset[str] = frozenset()) -> None:
        """Bring the store up to date with the directory, reading in this thread (for a
        provider that is not running). Files whose stat changed, and files in ``forced``,
        are read again; files that disappeared are removed."""
        self.apply(self.scan(self._known(), frozenset(forced)))

    async def refresh(self, forced: set[str] | frozenset[str] = frozenset()) -> None:
        """:meth:`rescan`, reading and decoding in a worker thread: the event loop goes on
        serving while a file is read. Concurrent calls run one after the other."""
        async with self._refreshing:
            if forced:
                scan = await asyncio.to_thread(self.scan, self._known(), frozenset(forced))
            else:
                # A rescan (the start's, the one after the watcher is set up) nearly always
                # finds nothing to read: its stat pass runs here, and only the files to read
                # go to a worker. In a worker, each stat call gives up the GIL and waits for
                # the loop to hand it back while the loop translates: at 13,016 files the
                # pass took 1.7 s there instead of 65 ms, and the start's first translation
                # twice as long.
                present, due = self.due(self._known())
                reads = await asyncio.to_thread(self.read, due) if due else {}
                scan = Scan(present, reads)
            self.apply(scan)

    def apply(self, scan: Scan) -> None:
        """Make the store and the errors follow ``scan``."""
        affected: set[Key] = set()
        for path in sorted(self._files.keys() - scan.present):
            affected |= self._remove(path)
        for path, read in sorted(scan.reads.items()):
            affected |= self._accept(path, read)
        self._resolve(affected)
        self.scans += 1

    def _remove(self, path: str) -> set[Key]:
        gone = self._files.pop(path)
        self.errors.clear(f"file:{path}")
        self.errors.clear(f"objects:{path}")
        for key in gone.objects:
            self._definers[key].discard(path)
        return set(gone.objects)

    def _accept(self, path: str, read: FileRead) -> set[Key]:
        known = self._files.get(path)
        old_objects = known.objects if known is not None else {}
        if read.errors:
            # Unreadable: keep the last accepted objects until the file is fixed.
            self.errors.set(f"file:{path}", read.errors)
            self.errors.clear(f"objects:{path}")
            self._files[path] = _File(read.stat, old_objects)
            return set()
        self.errors.clear(f"file:{path}")
        self.errors.set(f"objects:{path}", read.problems)
        objects = dict(read.objects)
        if read.problems:
            # Some object is rejected: what the file no longer validly defines is kept.
            for key, kept in old_objects.items():
                objects.setdefault(key, kept)
        self._files[path] = _File(read.stat, objects)
        for key in old_objects.keys() - objects.keys():
            self._definers[key].discard(path)
        for key in objects:
            self._definers.setdefault(key, set()).add(path)
        return set(old_objects) | set(objects)

    def _resolve(self, keys: set[Key]) -> None:
        for key in sorted(keys):
            definers = sorted(self._definers.get(key, ()))
            scope = f"duplicate:{key.kind}/{key.namespace}/{key.name}"
            if not definers:
                self._definers.pop(key, None)
                self.errors.clear(scope)
                self.store.delete(key)
                continue
            decoded, source = self._files[definers[0]].objects[key]
            self.store.apply(decoded, source=source)
            if len(definers) == 1:
                self.errors.clear(scope)
                continue
            others = ", ".join(self._files[p].objects[key][1] for p in definers[1:])
            self.errors.set(
                scope,
                [
                    ConfigError(
                        source,
                        f"defined in more than one file: {source} and {others}; using {source}",
                        key.kind,
                        key.namespace,
                        key.name,
                    )
                ],
            )

    # ------------------------------------------------------------ watching

    def _watch_filter(self, change: Change, path: str) -> bool:
        # Anything not hidden nor an editor temp file wakes us (a moved or deleted
        # directory matters too), and so do the "..data" link and "..<timestamp>"
        # directories of a ConfigMap volume; the rescan decides which files count.
        rel = os.path.relpath(path, self.root)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            return False
        parts = rel.split(os.sep)
        if any(p.startswith("..") for p in parts):
            return True
        if any(p.startswith(".") for p in parts[:-1]):
            return False
        name = parts[-1]
        return not (name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swo", ".swx")))

    async def run(self) -> None:
        """Load the directory, then follow its changes until cancelled."""
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"config directory {self.directory!r} does not exist")
        if self.scans == 0:
            await self.refresh()
        stop = asyncio.Event()
        changes = awatch(
            self.root,
            watch_filter=self._watch_filter,
            debounce=self.debounce_ms,
            step=max(1, min(self.debounce_ms, 10)),
            stop_event=stop,
        )
        pending = asyncio.ensure_future(anext(changes))
        try:
            # The generator sets up its watcher before it first waits: once it has run a
            # step, a rescan catches whatever changed before the watcher existed.
            for _ in range(3):
                await asyncio.sleep(0)
            await self.refresh()
            while True:
                batch = await pending
                pending = asyncio.ensure_future(anext(changes))
                log.debug("files changed", count=len(batch))
                await self.refresh(frozenset(os.path.abspath(p) for _, p in batch))
        except StopAsyncIteration:
            return
        finally:
            stop.set()
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
            with contextlib.suppress(BaseException):
                await changes.aclose()
