"""translate(snapshot) -> Result: one pure, total, deterministic function over the whole system."""

from __future__ import annotations

from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate.options import DataplaneState, TranslateOptions

__all__ = ["DataplaneState", "TranslateOptions", "translate"]


def translate(snapshot: Snapshot, options: TranslateOptions | None = None) -> Result:
    """Translate the whole snapshot. Pure: no I/O, no clock; never raises on input."""
    from gateweave.translate.core import translate_all

    return translate_all(snapshot, options or TranslateOptions())
