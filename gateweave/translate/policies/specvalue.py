"""Reading a stored policy spec's values: a field as a typed struct, a duration in seconds.

A stored object is not validated again (a file edited by hand, an object written before the
CRD's rules): a value of the wrong shape is a problem named with its place, never an error.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from gateweave.translate.filters import RuleError, parse_duration

T = TypeVar("T")


def field(spec: dict[str, Any], name: str, kind: type[T]) -> T | str | None:
    """``spec[name]`` as ``kind``; the problem when it is not one; None when unset."""
    raw = spec.get(name)
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, kind, strict=False)
    except msgspec.ValidationError as exc:
        return f"spec.{name}: {exc}"


def seconds(text: str | None, at: str, out: list[str]) -> float | None:
    """The Gateway API duration ``text`` (at ``at``) in seconds; a problem in ``out`` when it is
    not one; None when unset."""
    if text is None:
        return None
    try:
        return parse_duration(text)
    except RuleError:
        out.append(f"{at} {text!r} is not a duration")
        return None
