"""The one logging configuration: structlog, to stderr, at one level.

Every module logs through ``structlog.get_logger(...)``; a process configures it once, at
start: the command line from ``--log-level`` (:func:`gateweave.cli`), the benchmark's child
processes for themselves.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

# structlog's modules import rich (and with it pygments), where it is installed, to render
# exceptions and local variables; the CLI has rich for its tables and help, but gateweave's
# log lines render exceptions with structlog's plain formatter (the standard traceback,
# structlog's default without rich). So structlog is imported with rich hidden (an entry of
# None in ``sys.modules`` makes an import fail): a long-running ``serve`` keeps 4.5 MB less
# of modules it never calls. ``gateweave/__init__.py`` imports this module first, so every
# other ``import structlog`` finds this one; rich imports normally afterwards.
_HIDE_RICH = "rich" not in sys.modules and "structlog" not in sys.modules
if _HIDE_RICH:
    sys.modules["rich"] = None  # type: ignore[assignment]
try:
    import structlog
finally:
    if _HIDE_RICH and "rich" in sys.modules and sys.modules["rich"] is None:
        del sys.modules["rich"]

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
