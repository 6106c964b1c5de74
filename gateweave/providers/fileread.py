"""Reading one manifest file into what the file provider applies: :class:`FileRead`.

A pure function of the file's bytes and its place (:func:`read_file`): it touches no state
of the provider, so it runs in a worker thread, or in another process
(:mod:`gateweave.providers.readers`), with the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from gateweave.api.decode import Decoded, ObjectError, decode_sourced
from gateweave.api.kinds import Key
from gateweave.api.load import Sourced, load_file
from gateweave.providers import ConfigError
from gateweave.store import key_of

log = structlog.get_logger("gateweave.providers.file")

DecodeFn = Callable[[Sourced], tuple[Decoded | None, list[ObjectError]]]
StatKey = tuple[int, int, int]


@dataclass(frozen=True)
class FileRead:
    """One file as read: its stat, and its file-level errors (then nothing else counts),
    or the objects it validly defines and the problems of the others."""

    stat: StatKey | None
    errors: list[ConfigError]
    objects: dict[Key, tuple[Decoded, str]]
    problems: list[ConfigError]


def _object_error(err: ObjectError) -> ConfigError:
    return ConfigError(err.source, err.message, err.kind, err.namespace, err.name)


def read_file(
    path: str,
    display: str,
    root: str,
    stat: StatKey | None,
    decode_fn: DecodeFn = decode_sourced,
) -> FileRead:
    """The file at ``path`` (named ``display`` in errors; only read inside ``root``) read,
    parsed and each of its objects decoded by ``decode_fn``; each accepted object packed
    (:meth:`Decoded.packed`). An exception of ``decode_fn`` is one object's problem."""
    result = load_file(path, display, root=root)
    if result.errors:
        return FileRead(stat, [ConfigError(e.source, e.message) for e in result.errors], {}, [])
    objects: dict[Key, tuple[Decoded, str]] = {}
    problems: list[ConfigError] = []
    for item in result.objects:
        try:
            decoded, errs = decode_fn(item)
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
                ConfigError(
                    item.source,
                    f"defined again in the same file (first at {first}); using the first",
                    key.kind,
                    key.namespace,
                    key.name,
                )
            )
            continue
        objects[key] = (decoded.packed(), item.source)  # kept until the file changes
    return FileRead(stat, [], objects, problems)
