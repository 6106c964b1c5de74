"""Reading a stored policy spec's values: a field as a typed struct, a duration in seconds, a
number of bytes, a text given inline or in a ConfigMap, a header name.

A stored object is not validated again (a file edited by hand, an object written before the
CRD's rules): a value of the wrong shape is a problem named with its place, never an error.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from gateweave.translate.filters import RuleError, parse_duration

T = TypeVar("T")

# An HTTP header name (the CRDs' pattern): a token, no pseudo-header
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")


def field(spec: dict[str, Any], name: str, kind: type[T], at: str = "spec") -> T | str | None:
    """``spec[name]`` as ``kind``; the problem (``spec`` being at ``at``) when it is not one;
    None when unset."""
    raw = spec.get(name)
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, kind, strict=False)
    except msgspec.ValidationError as exc:
        return f"{at}.{name}: {exc}"


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


_QUANTITY = re.compile(r"([1-9][0-9]*)([EPTGMK]i|[EPTGMk])?")
_QUANTITY_UNITS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def byte_count(value: Any, at: str, out: list[str], most: int) -> int | None:
    """A Kubernetes quantity of bytes (``32768``, ``"1Mi"``, ``"64k"``) at ``at`` as an integer;
    a problem in ``out`` when it is not one or exceeds ``most``; None when unset."""
    if value is None:
        return None
    match = (
        _QUANTITY.fullmatch(str(value))
        if isinstance(value, (int, str)) and not isinstance(value, bool)
        else None
    )
    if match is None:
        out.append(f"{at} {value!r} is not a number of bytes")
        return None
    count = int(match.group(1)) * _QUANTITY_UNITS[match.group(2)]
    if count > most:
        out.append(f"{at} {value!r} is more than {most} bytes")
        return None
    return count


class LocalRef(msgspec.Struct, frozen=True):
    """A ConfigMap of the policy's namespace (Envoy Gateway's local object reference)."""

    name: str
    group: str = ""
    kind: str = "ConfigMap"


class InlineOrRef(msgspec.Struct, frozen=True, rename="camel"):
    """A text given ``Inline``, or in a ConfigMap by ``ValueRef`` (a JWKS, a response body)."""

    type: str = "Inline"
    inline: str | None = None
    value_ref: LocalRef | None = None


def inline_or_ref(
    ctx: Any, namespace: str, value: InlineOrRef, at: str, out: list[str], key: str, first: bool
) -> str | None:
    """The text of ``value`` (at ``at``): inline, or a ConfigMap's ``key`` (``first``: else its
    first key); None with the problem in ``out`` when it cannot be read."""
    if value.type == "Inline":
        if value.inline is None:
            out.append(f"{at}.inline: needed with type Inline")
        return value.inline
    ref = value.value_ref
    if value.type != "ValueRef" or ref is None:
        out.append(f"{at}: type {value.type} needs its valueRef")
        return None
    if ref.group not in ("", "core") or ref.kind != "ConfigMap":
        out.append(f"{at}.valueRef: {ref.group or 'core'}/{ref.kind} is not a ConfigMap")
        return None
    cm = ctx.snapshot.config_maps.get((namespace, ref.name))
    if cm is None:
        out.append(f"{at}.valueRef: ConfigMap {namespace}/{ref.name} does not exist")
        return None
    text = cm.data.get(key, next(iter(cm.data.values()), None) if first else None)
    if text is None:
        out.append(
            f"{at}.valueRef: ConfigMap {namespace}/{ref.name} has "
            + ("no data" if first else f"no key {key}")
        )
    return text
