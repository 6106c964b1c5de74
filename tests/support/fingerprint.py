"""A translation's whole output as bytes, to compare translations byte for byte: statuses,
infrastructure IR, xDS IR and every Envoy resource built from it."""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.xds.build import build
from gateweave.xds.resources import serialize


def fingerprint(objects: list[Any]) -> bytes:
    result = translate(Snapshot.from_objects(objects))
    enc = msgspec.json.Encoder(order="sorted")
    parts = [
        enc.encode({"/".join(k): v for k, v in result.statuses.items()}),
        enc.encode(result.infra),
        enc.encode(result.xds),
    ]
    for name in sorted(result.xds):
        for type_url, items in build(result.xds[name]).by_type().items():
            for res_name, msg in items.items():
                parts.append(f"{type_url}:{res_name}:".encode() + serialize(msg))
    return b"\n".join(parts)
