"""The file provider: a directory of manifests, watched, turned into store changes.

Each file is loaded and diffed on its own:

* a file that becomes malformed keeps its last good objects, and its error (file:line)
  is reported until the file is fixed or deleted;
* a deleted file deletes its objects;
* objects that ``decode`` rejects are reported (and not stored);
* an object defined by two files is reported naming both; the lexicographically
  smaller path wins, whatever order the files were seen in.

Unchanged objects cause no store change (the store ignores identical re-applies), so
rewriting a file with the same content publishes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from watchfiles import Change, awatch

from gateweave.api.decode import Decoded, ObjectError, decode
from gateweave.api.kinds import Key
from gateweave.api.load import iter_manifest_files, load_file
from gateweave.providers import ConfigError, ErrorBook
from gateweave.store import Store, key_of

log = structlog.get_logger("gateweave.providers.file")

DecodeFn = Callable[[Any, str], tuple[Decoded | None, list[ObjectError]]]
StatKey = tuple[int, int, int]


@dataclass
class _File:
    stat: StatKey | None
    objects: dict[Key, tuple[Decoded, str]] = field(default_factory=dict)  # last good, with source


def _stat(path: str) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _object_error(err: ObjectError) -> ConfigError:
    return ConfigError(err.source, err.message, err.kind, err.namespace, err.name)


class FileProvider:
    """Keeps ``store`` equal to the manifests under ``directory``."""

    def __init__(
        self,
        directory: str,
        store: Store,
        errors: ErrorBook | None = None,
        *,
        debounce_ms: int = 50,
        decode_fn: DecodeFn = decode,
    ) -> None:
        self.directory = directory
        self.root = os.path.abspath(directory)
        self.store = store
        self.errors = errors if errors is not None else ErrorBook()
        self.debounce_ms = debounce_ms
        self.decode_fn = decode_fn
        self._files: dict[str, _File] = {}
        self._definers: dict[Key, set[str]] = {}
        self.scans = 0  # completed (re)scans, for tests and debugging

    # ------------------------------------------------------------ naming

    def _display(self, path: str) -> str:
        return os.path.join(self.directory, os.path.relpath(path, self.root))

    # ------------------------------------------------------------ scanning

    def rescan(self, forced: set[str] | frozenset[str] = frozenset()) -> None:
        """Bring the store up to date with the directory. Files whose stat changed, and
        files in ``forced``, are reloaded; files that disappeared are removed."""
        present = {os.path.abspath(p) for p in iter_manifest_files(self.root)}
        affected: set[Key] = set()
        for path in sorted(self._files.keys() - present):
            affected |= self._remove(path)
        for path in sorted(present):
            stat = _stat(path)
            known = self._files.get(path)
            if known is None or known.stat != stat or path in forced:
                affected |= self._reload(path, stat)
        self._resolve(affected)
        self.scans += 1

    def _remove(self, path: str) -> set[Key]:
        gone = self._files.pop(path)
        self.errors.clear(f"file:{path}")
        self.errors.clear(f"objects:{path}")
        for key in gone.objects:
            self._definers[key].discard(path)
        return set(gone.objects)

    def _reload(self, path: str, stat: StatKey | None) -> set[Key]:
        result = load_file(path, self._display(path))
        known = self._files.get(path)
        old_objects = known.objects if known is not None else {}
        if result.errors:
            # Malformed: keep the last good objects until the file is fixed.
            self.errors.set(f"file:{path}", [ConfigError(e.source, e.message) for e in result.errors])
            self._files[path] = _File(stat, old_objects)
            return set()
        self.errors.clear(f"file:{path}")
        objects: dict[Key, tuple[Decoded, str]] = {}
        problems: list[ConfigError] = []
        for item in result.objects:
            try:
                decoded, errs = self.decode_fn(item.raw, item.source)
            except Exception as exc:  # a bug in decoding must not stop the provider
                log.exception("decoding failed", source=item.source)
                problems.append(ConfigError(item.source, f"internal error while decoding: {exc!r}"))
                continue
            problems.extend(_object_error(e) for e in errs)
            if decoded is None:
                continue
            key = key_of(decoded)
            if key in objects:
                first = objects[key][1]
                problems.append(
                    ConfigError(item.source, f"defined again in the same file (first at {first}); using the first",
                                key.kind, key.namespace, key.name)
                )
                continue
            objects[key] = (decoded, item.source)
        self.errors.set(f"objects:{path}", problems)
        self._files[path] = _File(stat, objects)
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
            self.errors.set(scope, [ConfigError(
                source, f"defined in more than one file: {source} and {others}; using {source}",
                key.kind, key.namespace, key.name,
            )])

    # ------------------------------------------------------------ watching

    def _watch_filter(self, change: Change, path: str) -> bool:
        # Anything not hidden nor an editor temp file wakes us (a moved or deleted
        # directory matters too); the rescan decides which files count.
        rel = os.path.relpath(path, self.root)
        if rel.startswith(os.pardir):
            return False
        parts = rel.split(os.sep)
        if any(p.startswith(".") for p in parts[:-1]):
            return False
        name = parts[-1]
        return not (name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swo", ".swx")))

    async def run(self) -> None:
        """Load the directory, then follow its changes until cancelled."""
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"config directory {self.directory!r} does not exist")
        if self.scans == 0:
            self.rescan()
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
            self.rescan()
            while True:
                batch = await pending
                pending = asyncio.ensure_future(anext(changes))
                log.debug("files changed", count=len(batch))
                self.rescan(frozenset(os.path.abspath(p) for _, p in batch))
        except StopAsyncIteration:
            return
        finally:
            stop.set()
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
            with contextlib.suppress(BaseException):
                await changes.aclose()
