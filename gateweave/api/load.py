"""Read manifests from files, directories and stdin, each object located by ``file:line``.

A path is a file, a directory (read recursively: ``*.yaml``, ``*.yml`` and ``*.json``,
skipping dotfiles, dot-directories and editor temporary files) or ``-`` for stdin.
A file holds one or more YAML documents, or JSON; a ``List`` (``kind: List`` or
``kind: <Kind>List`` with ``items``) is flattened into its items. A file that cannot be
read or parsed gives one :class:`LoadError` (file and line) and contributes no objects:
it is never half-loaded. Turning the raw dicts into typed objects is
:func:`gateweave.api.decode.decode`'s job; :meth:`Sourced.line_of` then locates what it
finds wrong at the line of the offending field.

Reading is bounded (:mod:`gateweave.api.limits`) and strict: YAML goes through
:mod:`gateweave.api.yamlread` (no recursion, counted aliases, no repeated keys), JSON
through :func:`json.loads` with the same depth and repeated-key rules. Files found in a
directory are read only when they are regular files whose real path is inside that
directory (a symbolic link may point elsewhere inside it, as a ConfigMap volume's
``..data`` links do), and never by a call that could block: a named pipe is refused,
not opened for reading.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateweave.api import yamlread
from gateweave.api.kinds import KINDS
from gateweave.api.limits import MAX_DEPTH, MAX_FILE_BYTES, quote

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


@dataclass(frozen=True)
class Origin:
    """Where an object's text is, to find the line of one of its fields again (only when
    there is an error to locate: the text is parsed anew, nothing is kept per field)."""

    text: str  # the whole file (shared by the file's objects)
    start: int  # text[start:end] is the object's document, starting at line first_line (0-based)
    end: int
    first_line: int
    prefix: tuple[str | int, ...] = ()  # the object's path in its document (("items", 3) in a List)

    def line_of(self, path: str) -> int | None:
        found = yamlread.line_of(
            self.text[self.start : self.end], [*self.prefix, *yamlread.parse_path(path)]
        )
        return None if found is None else found + self.first_line


@dataclass(frozen=True)
class Sourced:
    """One raw manifest and where it came from (``line`` is 1-based)."""

    raw: dict[str, Any]
    file: str
    line: int
    origin: Origin | None = field(default=None, compare=False, repr=False)

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"

    def line_of(self, path: str) -> int:
        """The line of the field at ``path`` (``spec.rules[0].matches[0].path.type``): of
        the deepest part of it present in the text; the object's line when none is."""
        if not path or self.origin is None:
            return self.line
        try:
            found = self.origin.line_of(path)
        except RecursionError:  # pragma: no cover - the text was read within MAX_DEPTH
            found = None
        return found if found is not None and found >= self.line else self.line

    def source_of(self, path: str) -> str:
        return f"{self.file}:{self.line_of(path)}"


@dataclass(frozen=True)
class LoadError:
    """A file that could not be read or parsed; ``line`` is 1-based, 0 when unknown."""

    file: str
    line: int
    message: str

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass
class LoadResult:
    objects: list[Sourced] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        self.objects.extend(other.objects)
        self.errors.extend(other.errors)


class _Malformed(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class _NotJson(_Malformed):
    """JSON syntax error: text that only looked like JSON is read as YAML instead."""


# ---------------------------------------------------------------- which files


def is_manifest_name(name: str) -> bool:
    """True for a file name a directory scan reads (not hidden, not an editor temp file)."""
    if name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swo", ".swx")):
        return False
    return name.endswith(MANIFEST_SUFFIXES)


def iter_manifest_files(directory: str) -> Iterator[str]:
    """Manifest files under ``directory``, recursively, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if is_manifest_name(name):
                yield os.path.join(dirpath, name)


# ---------------------------------------------------------------- parsing


def _is_list(doc: dict[str, Any]) -> bool:
    kind = doc.get("kind")
    if not isinstance(kind, str) or not isinstance(doc.get("items"), list):
        return False
    return kind == "List" or (kind.endswith("List") and kind[: -len("List")] in KINDS)


def _flatten(
    doc: Any, line: int, item_lines: tuple[int, ...], origin: Origin, out: list[Sourced], file: str
) -> None:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise _Malformed(line, f"expected an object (a mapping), found {type(doc).__name__}")
    if not _is_list(doc):
        _check_object(doc, line)
        out.append(Sourced(doc, file, line, origin))
        return
    item_kind = doc["kind"][: -len("List")]
    for i, item in enumerate(doc["items"]):
        item_line = item_lines[i] if i < len(item_lines) else line
        if item_kind and isinstance(item, dict):
            # <Kind>List items may leave out their apiVersion and kind.
            item = {"apiVersion": doc.get("apiVersion"), "kind": item_kind, **item}
        item_origin = Origin(
            origin.text, origin.start, origin.end, origin.first_line, (*origin.prefix, "items", i)
        )
        _flatten(item, item_line, (), item_origin, out, file)


def _check_object(doc: dict[str, Any], line: int) -> None:
    for field_name in ("apiVersion", "kind"):
        value = doc.get(field_name)
        if not isinstance(value, str) or not value:
            raise _Malformed(line, f"object has no {field_name}")


class _DuplicateKey(Exception):
    pass


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _first_line(text: str) -> int:
    stripped = text.lstrip()
    return text.count("\n", 0, len(text) - len(stripped)) + 1


def _json_problem(yaml_text: str, message: str) -> _Malformed:
    """A problem json.loads does not locate, located by reading the same text as YAML
    (whose reader refuses it too, at the right line and field) when it can."""
    try:
        yamlread.read_documents(yaml_text)
    except yamlread.YamlError as exc:
        if not exc.syntax:
            return _Malformed(exc.line, exc.message)
    return _Malformed(_first_line(yaml_text), message)


def _parse_json(text: str, file: str) -> list[Sourced]:
    yaml_text = text.replace(
        "\t", " "
    )  # JSON allows tabs only as whitespace; YAML never as indentation
    try:
        doc = json.loads(text, object_pairs_hook=_strict_object)
    except json.JSONDecodeError as exc:
        raise _NotJson(exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise _json_problem(yaml_text, f"nested deeper than {MAX_DEPTH} levels") from None
    except _DuplicateKey as exc:
        raise _json_problem(yaml_text, f"duplicate field {quote(str(exc.args[0]))}") from None
    if isinstance(doc, (dict, list)) and _too_deep(doc):
        raise _json_problem(yaml_text, f"nested deeper than {MAX_DEPTH} levels")
    item_lines: tuple[int, ...] = ()
    if isinstance(doc, dict) and _is_list(doc):
        try:
            item_lines = yamlread.read_documents(yaml_text)[0].item_lines
        except (yamlread.YamlError, IndexError):
            item_lines = ()  # a JSON-only construct: items are located at the document start
    out: list[Sourced] = []
    _flatten(doc, _first_line(text), item_lines, Origin(yaml_text, 0, len(yaml_text), 0), out, file)
    return out


def _parse_yaml(text: str, file: str) -> list[Sourced]:
    try:
        docs = yamlread.read_documents(text)
    except yamlread.YamlError as exc:
        raise _Malformed(exc.line, exc.message) from None
    out: list[Sourced] = []
    for doc in docs:
        _flatten(
            doc.value,
            doc.line,
            doc.item_lines,
            Origin(text, doc.start, doc.end, doc.first_line),
            out,
            file,
        )
    return out


def _looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def load_text(text: str, filename: str) -> LoadResult:
    """Parse one file's text. All of its objects, or none and one error."""
    try:
        if filename.endswith(".json"):
            objects = _parse_json(text, filename)
        elif _looks_like_json(text):
            try:
                objects = _parse_json(text, filename)
            except _NotJson:
                objects = _parse_yaml(text, filename)
        else:
            objects = _parse_yaml(text, filename)
    except _Malformed as exc:
        return LoadResult(errors=[LoadError(filename, exc.line, exc.message)])
    return LoadResult(objects=objects)


# ---------------------------------------------------------------- reading files


class _Refused(Exception):
    pass


def _inside(path: str, root: str) -> bool:
    return path == root or os.path.commonpath([path, root]) == root


_FILE_TYPES = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


def _open_in(path: str, root: str) -> int:
    """Open ``path`` (found in directory ``root``) for reading without ever blocking: only
    a regular file whose real path is inside ``root``."""
    real_root = os.path.realpath(root)
    target = path
    if stat.S_ISLNK(os.lstat(path).st_mode):
        target = os.path.realpath(path)
        if not _inside(target, real_root):
            raise _Refused("refused: a symbolic link to a file outside the configuration directory")
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")
            raise _Refused(f"refused: {what}; only regular files are read")
        with_proc = f"/proc/self/fd/{fd}"
        if os.path.exists(with_proc) and not _inside(os.readlink(with_proc), real_root):
            raise _Refused("refused: the file is outside the configuration directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_limited(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_FILE_BYTES:
        chunk = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > MAX_FILE_BYTES:
        raise _Refused(
            f"refused: larger than {MAX_FILE_BYTES} bytes (the limit on one manifest file)"
        )
    return b"".join(chunks)


def read_bytes(path: str, root: str | None = None) -> bytes:
    """The bytes of ``path`` (``-``: stdin), at most MAX_FILE_BYTES. With ``root`` (the
    directory it was found in) only a regular file inside ``root`` is read, never blocking.
    Raises OSError, or ValueError with the reason a file is refused."""
    if path == STDIN:
        data: bytes = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(
                f"refused: larger than {MAX_FILE_BYTES} bytes (the limit on one manifest file)"
            )
        return data
    try:
        fd = _open_in(path, root) if root is not None else os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return _read_limited(fd)
        finally:
            os.close(fd)
    except _Refused as exc:
        raise ValueError(str(exc)) from None


def load_file(path: str, name: str | None = None, *, root: str | None = None) -> LoadResult:
    """Load one file (``-``: stdin); ``name`` is how sources name it (default: ``path``);
    ``root``: the directory it was found in (see :func:`read_bytes`)."""
    name = name or ("<stdin>" if path == STDIN else path)
    try:
        data = read_bytes(path, root)
        text = data.decode("utf-8-sig")
    except OSError as exc:
        return LoadResult(errors=[LoadError(name, 0, exc.strerror or str(exc))])
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            line = exc.object[: exc.start].count(b"\n") + 1
            return LoadResult(errors=[LoadError(name, line, "not UTF-8 text")])
        return LoadResult(
            errors=[LoadError(name, 1, str(exc))]
        )  # refused as a whole: from its first line
    return load_text(text, name)


def load_paths(paths: Iterable[str]) -> LoadResult:
    """Load every path: a file (read whatever its name), a directory (recursively) or ``-``."""
    result = LoadResult()
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for file in iter_manifest_files(path):
                result.extend(load_file(file, root=path))
        else:
            result.extend(load_file(path))
    return result
