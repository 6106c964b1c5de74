"""Operator mistakes: a flag, a path, a port, a second serve on the same state. Raised
where they are found; the command line prints them as one ``error: ...`` line (no
traceback) and exits 2."""

from __future__ import annotations


class OperatorError(Exception):
    """A mistake in how gateweave was started, said in one line."""
