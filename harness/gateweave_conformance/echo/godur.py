"""Go's ``time.ParseDuration`` and ``strconv.Atoi``, with Go's error messages."""

from __future__ import annotations

import re

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS = (1 << 63) - 1


class GoError(ValueError):
    """A parse error whose str() is the Go error text."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_duration(text: str) -> float:
    """Seconds for a Go duration such as ``1s``, ``300ms``, ``1h2m3.5s`` or ``-2s``."""
    orig = text
    invalid = GoError(f"time: invalid duration {_quote(orig)}")
    negative = False
    if text and text[0] in "+-":
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise invalid
    total = 0.0
    while text:
        match = re.match(r"([0-9]*)(?:\.([0-9]*))?", text)
        if match is None:  # pragma: no cover - the pattern always matches
            raise invalid
        whole, frac = match.group(1), match.group(2)
        if not whole and not frac:
            raise invalid
        text = text[match.end() :]
        unit_match = re.match(r"[^0-9.]*", text)
        unit = unit_match.group(0) if unit_match else ""
        if not unit:
            raise GoError(f"time: missing unit in duration {_quote(orig)}")
        if unit not in _UNITS_NS:
            raise GoError(f"time: unknown unit {_quote(unit)} in duration {_quote(orig)}")
        text = text[len(unit) :]
        value = int(whole or "0") * _UNITS_NS[unit]
        if frac:
            value += int(frac) * _UNITS_NS[unit] / (10 ** len(frac))
        if value > _MAX_NS:
            raise invalid
        total += value
        if total > _MAX_NS:
            raise invalid
    seconds = total / 1e9
    return -seconds if negative else seconds


def atoi(text: str) -> int:
    """``strconv.Atoi``: optional sign and decimal digits, 64-bit range."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise GoError(f"strconv.Atoi: parsing {_quote(text)}: invalid syntax")
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise GoError(f"strconv.Atoi: parsing {_quote(text)}: value out of range")
    return value
