"""How a stored object's form is kept for long: msgpack, deflated with a preset dictionary.

A stored object (:meth:`gateweave.api.decode.Decoded.packed`) is read back rarely - the
admin API, status merging, change detection on an update, one object at a time - while
every object is held for the process's life. Its msgpack bytes are mostly the same field
names object after object (``apiVersion``, ``metadata``, ``backendRefs``...), which deflate
alone cannot share between objects of a kilobyte each. A preset dictionary can: deflate
refers to its bytes as if they preceded the object's own. The dictionary is the msgpack
encoding of every field name, enum value, kind and storage apiVersion of the models of the
kinds gateweave reads (:data:`gateweave.api.kinds.KINDS`), the most frequent last (deflate
finds near ones cheaper). It is built from the models in this process, so packed bytes mean
nothing outside it: they are never written anywhere.

A small window (4 KiB) and memory level keep each call's state small: the objects are small.
"""

from __future__ import annotations

import functools
import zlib
from collections import Counter
from typing import Any

import msgspec
from msgspec import inspect as mi

from gateweave.api.kinds import KINDS

_WBITS = 12  # a 4 KiB window: the dictionary's last 4 KiB and the object's own bytes
_MEM_LEVEL = 5
_LEVEL = 1

_ENCODE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder()


def _names(t: mi.Type, seen: set[type], out: Counter[str]) -> None:
    """Count the field names and string enum values reachable from type ``t``."""
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return
        seen.add(t.cls)
        for f in t.fields:
            out[f.encode_name] += 1
            _names(f.type, seen, out)
    elif isinstance(t, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        _names(t.item_type, seen, out)
    elif isinstance(t, mi.DictType):
        _names(t.value_type, seen, out)
    elif isinstance(t, mi.UnionType):
        for x in t.types:
            _names(x, seen, out)
    elif isinstance(t, mi.TupleType):
        for x in t.item_types:
            _names(x, seen, out)
    elif isinstance(t, mi.LiteralType):
        out.update(v for v in t.values if isinstance(v, str))


@functools.cache
def dictionary() -> bytes:
    """The preset dictionary (built once, on the first object packed)."""
    counts: Counter[str] = Counter()
    seen: set[type] = set()
    for info in KINDS.values():
        _names(mi.type_info(info.model), seen, counts)
        counts[info.kind] += 1
        counts[info.storage_api_version] += 1
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))  # most frequent last
    return b"".join(_ENCODE.encode(name) for name, _ in ordered)[-(1 << _WBITS) :]


@functools.cache
def _primed() -> zlib._Compress:
    """A compressor that has taken in the preset dictionary and nothing else: each object is
    packed by a copy of it, a copy of its state being cheaper than taking in the dictionary
    again (about a fifth of the packing's time; the same bytes). ``copy`` takes the compressor's
    lock: worker threads may pack at once."""
    return zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zdict=dictionary())


def pack(obj: Any) -> bytes:
    """``obj`` (JSON-like: dicts, lists, strings, numbers, booleans, None) as packed bytes.
    Raises what msgpack's encoder raises for anything else (TypeError, OverflowError...)."""
    body = _ENCODE.encode(obj)
    z = _primed().copy()
    return z.compress(body) + z.flush()


def unpack(data: bytes) -> Any:
    """What :func:`pack` was given: a new object on each call."""
    z = zlib.decompressobj(_WBITS, zdict=dictionary())
    return _DECODE.decode(z.decompress(data) + z.flush())
