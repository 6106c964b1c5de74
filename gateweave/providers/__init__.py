"""Providers turn a source (a directory of manifests, the Kubernetes API) into store changes.

This module holds what they share: the book of configuration errors the admin API
serves (``GET /api/errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import structlog

log = structlog.get_logger("gateweave.providers")


@dataclass(frozen=True, order=True)
class ConfigError:
    """A problem with the configuration as given: a malformed file, a rejected object,
    an object defined twice. ``source`` is ``file:line`` (or ``file``, or empty)."""

    source: str
    message: str
    kind: str = ""
    namespace: str = ""
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v != ""}

    def __str__(self) -> str:
        who = ""
        if self.kind:
            who = (
                f"{self.kind} {self.namespace}/{self.name}: "
                if self.namespace
                else f"{self.kind} {self.name}: "
            )
        return f"{self.source}: {who}{self.message}" if self.source else f"{who}{self.message}"


class ErrorBook:
    """Current errors, grouped by scope (e.g. one scope per file): a scope's errors are
    replaced as a whole when it is re-examined, so a fixed problem disappears."""

    def __init__(self) -> None:
        self._by_scope: dict[str, tuple[ConfigError, ...]] = {}
        self._listeners: list[Callable[[int], None]] = []

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """``listener(count)`` is called whenever the set of errors changes."""
        self._listeners.append(listener)

    def set(self, scope: str, errors: list[ConfigError]) -> None:
        if not errors and scope not in self._by_scope:
            return  # nothing to clear (a directory's start clears three scopes per file)
        new = tuple(sorted(set(errors)))
        old = self._by_scope.get(scope, ())
        if new == old:
            return
        for err in set(new) - set(old):
            log.warning("configuration error", error=str(err), scope=scope)
        for err in set(old) - set(new):
            log.info("configuration error resolved", error=str(err), scope=scope)
        if new:
            self._by_scope[scope] = new
        else:
            self._by_scope.pop(scope, None)
        count = len(self)
        for listener in self._listeners:
            listener(count)

    def clear(self, scope: str) -> None:
        self.set(scope, [])

    def scopes(self) -> list[str]:
        return sorted(self._by_scope)

    def get(self, scope: str) -> list[ConfigError]:
        return list(self._by_scope.get(scope, ()))

    def all(self) -> list[ConfigError]:
        return sorted({e for errs in self._by_scope.values() for e in errs})

    def __len__(self) -> int:
        return len(self.all())
