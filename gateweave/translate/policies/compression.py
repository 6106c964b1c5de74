"""BackendTrafficPolicy ``compressor`` (and its deprecated form ``compression``): the answers
of the routes the policy governs are compressed (gzip, brotli or zstd) for a client that
accepts it, in Envoy's compressor filter.

Of several, the answer takes the one the client's ``Accept-Encoding`` weighs most (at equal
weights, Envoy takes the client's first). An answer shorter than its compressor's
``minContentLength`` (a quantity of bytes: ``100``, ``"1Ki"``; Envoy's default: 30) passes as it
is; each route keeps its own (Envoy Gateway's one filter per algorithm takes the listener's first
route's).
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
    for sub in ("", ".type", ".gzip", ".brotli", ".zstd", ".minContentLength")
)

# Envoy's min_content_length is a uint32
_MOST_BYTES = 2**32 - 1


class _Compressor(msgspec.Struct, frozen=True, forbid_unknown_fields=False, rename="camel"):
    type: str
    gzip: dict[str, Any] | None = None
    brotli: dict[str, Any] | None = None
    zstd: dict[str, Any] | None = None
    min_content_length: Any = None  # a quantity of bytes (int or text)


def _compressors(spec: dict[str, Any], out: list[str]) -> tuple[ir.Compressor, ...]:
    """The compressors the policy sets, in its order (problems go to ``out``)."""
    given = [name for name in ("compressor", "compression") if spec.get(name) is not None]
    if len(given) > 1:
        out.append(
            "spec.compressor, spec.compression: set one of them (compression is its deprecated "
            "form)"
        )
    found: list[ir.Compressor] = []
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
            if any(c.kind == entry.type for c in found):
                out.append(f"{at}.type: {entry.type} is listed twice")
                continue
            least = specvalue.byte_count(
                entry.min_content_length, f"{at}.minContentLength", out, _MOST_BYTES
            )
            found.append(ir.Compressor(kind=entry.type, min_content_length=least))
    return tuple(found)


def problems(spec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    _compressors(spec, out)
    return out


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    compressors = _compressors(spec, [])
    return msgspec.structs.replace(route, compression=compressors) if compressors else route
