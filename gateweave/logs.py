"""The one logging configuration: structlog, to stderr, at one level.

Every module logs through ``structlog.get_logger(...)``; a process configures it once, at
start: the command line from ``--log-level`` (:func:`gateweave.cli`), the benchmark's child
processes for themselves.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

LEVELS = ("debug", "info", "warning", "error")


class _StderrLogger:
    """structlog output to whatever ``sys.stderr`` is when a line is written (never a stale
    stream).
    """

    def __init__(self, *args: Any) -> None:
        pass

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def configure(level: str) -> None:
    """Log lines at ``level`` (one of :data:`LEVELS`) and above to stderr."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(LEVELS)})")
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=_StderrLogger,
    )
