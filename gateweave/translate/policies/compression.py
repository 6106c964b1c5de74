"""BackendTrafficPolicy ``compressor`` (and its deprecated form ``compression``): the answers
of the routes the policy governs are compressed (gzip, brotli or zstd) for a client that
accepts it, in Envoy's compressor filter.

Of several, the answer takes the one the client's ``Accept-Encoding`` weighs most (at equal
weights, Envoy takes the client's first). ``minContentLength`` is refused by name (Envoy's default:
30 bytes and more).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import specvalue

TYPES: tuple[str, ...] = ("Gzip", "Brotli", "Zstd")

FIELDS: frozenset[str] = frozenset(
    f"{field}{sub}"
    for field in ("compression", "compressor")
    for sub in ("", ".type", ".gzip", ".brotli", ".zstd")
)


class _Compressor(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    type: str
    gzip: dict[str, Any] | None = None
    brotli: dict[str, Any] | None = None
    zstd: dict[str, Any] | None = None


def _types(spec: dict[str, Any], out: list[str]) -> tuple[str, ...]:
    """The compressors the policy sets, in its order (problems go to ``out``)."""
    given = [name for name in ("compressor", "compression") if spec.get(name) is not None]
    if len(given) > 1:
        out.append(
            "spec.compressor, spec.compression: set one of them (compression is its deprecated "
            "form)"
        )
    found: list[str] = []
    for name in given:
        entries = specvalue.field(spec, name, tuple[_Compressor, ...])
        if isinstance(entries, str):
            out.append(entries)
            continue
        for i, entry in enumerate(entries or ()):
            at = f"spec.{name}[{i}]"
            if entry.type not in TYPES:
                out.append(f"{at}.type: {entry.type!r} is not one of {', '.join(TYPES)}")
                continue
            # Each type's own (empty) settings object.
            own = {"Gzip": entry.gzip, "Brotli": entry.brotli, "Zstd": entry.zstd}
            for other, settings in own.items():
                if other != entry.type and settings is not None:
                    out.append(f"{at}.{other.lower()} is for type {other}, not {entry.type}")
            if entry.type in found:
                out.append(f"{at}.type: {entry.type} is listed twice")
                continue
            found.append(entry.type)
    return tuple(found)


def problems(spec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    _types(spec, out)
    return out


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    types = _types(spec, [])
    return msgspec.structs.replace(route, compression=types) if types else route
