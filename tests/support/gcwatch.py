"""The cyclic collector's automatic passes during a window of a test: what a start that holds
the collector must not have (tests/serve/test_app.py, tests/kube/test_start_gc.py)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest


class AutomaticPasses:
    """As a context manager: the generation of every pass the collector starts by itself (on,
    not frozen yet) once :attr:`open`; an explicit ``gc.collect()`` under a pause (the
    runtime's freeze) is not one."""

    def __init__(self) -> None:
        self.open = False
        self.passes: list[int] = []

    def _record(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start" and self.open and gc.isenabled() and gc.get_freeze_count() == 0:
            self.passes.append(info["generation"])

    def open_at(self, monkeypatch: pytest.MonkeyPatch, cls: type, method: str) -> None:
        """Open the window when the coroutine method ``cls.method`` is first called."""
        original: Callable[..., Awaitable[Any]] = getattr(cls, method)

        async def opening(obj: Any, *args: Any, **kwargs: Any) -> Any:
            self.open = True
            return await original(obj, *args, **kwargs)

        monkeypatch.setattr(cls, method, opening)

    def __enter__(self) -> AutomaticPasses:
        gc.callbacks.append(self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._record)
