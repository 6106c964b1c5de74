"""Prints, as JSON, a digest of the translation (statuses, infrastructure and xDS IR) of each
named object set in a JSON file ``{name: [manifest, ...]}``; tests/translate/test_native.py runs it
once
with the compiled translation and once from the sources, and compares.

Usage: python tests/support/native_digest.py INPUTS.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from gateweave import native
from gateweave.api.decode import decode
from gateweave.snapshot import Snapshot
from gateweave.translate import translate


def digest(raws: list[dict[str, Any]]) -> str:
    objects = []
    for raw in raws:
        dec, _ = decode(raw)
        if dec is not None:
            objects.append(dec.model)
    result = translate(Snapshot.from_objects(objects))
    statuses = sorted((list(k), v) for k, v in result.statuses.items())
    blob = msgspec.json.encode([statuses, result.infra, result.xds], order="deterministic")
    return hashlib.sha256(blob).hexdigest()


def main(inputs: Path) -> None:
    sets: dict[str, list[dict[str, Any]]] = json.loads(inputs.read_text())
    out = {"native": native.state()} | {name: digest(raws) for name, raws in sets.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
