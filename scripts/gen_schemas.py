"""Generate gateweave/api/schemas/<plural>.json from the upstream Gateway API CRDs.

Each file maps every served version of the kind to its openAPIV3Schema with the
``description`` of every schema node removed (property *names* called
"description" are kept). Nothing else changes meaning.

Usage: python scripts/gen_schemas.py [CRD_DIR] [OUT_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

GROUP = "gateway.networking.k8s.io"
DEFAULT_CRDS = Path("/work/shared/gateway-api/crds/experimental")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "gateweave" / "api" / "schemas"

# Keywords whose value is a schema, a list of schemas or a map of schemas.
_SCHEMA = ("items", "additionalProperties", "not")
_SCHEMA_LIST = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAP = ("properties", "patternProperties", "definitions")


def strip(schema: Any) -> Any:
    """A copy of one schema node without descriptions, recursively through sub-schemas."""
    if not isinstance(schema, dict):
        return schema  # e.g. additionalProperties: true
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in _SCHEMA:
            out[key] = strip(value)
        elif key in _SCHEMA_LIST:
            out[key] = [strip(v) for v in value]
        elif key in _SCHEMA_MAP:
            out[key] = {name: strip(v) for name, v in value.items()}
        else:
            out[key] = value  # default, enum, x-kubernetes-validations, ...: data, kept as is
    return out


def crd_schemas(crd: dict[str, Any]) -> dict[str, Any]:
    return {
        v["name"]: strip(v["schema"]["openAPIV3Schema"])
        for v in crd["spec"]["versions"]
        if v.get("served", True)
    }


def generate(crd_dir: Path, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["spec"]["group"] != GROUP:
                continue
            target = out_dir / f"{doc['spec']['names']['plural']}.json"
            text = json.dumps(crd_schemas(doc), separators=(",", ":"), sort_keys=True)
            target.write_text(text + "\n")
            written.append(target)
    return written


def main(argv: list[str]) -> int:
    crd_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_CRDS
    out_dir = Path(argv[2]) if len(argv) > 2 else DEFAULT_OUT
    for target in generate(crd_dir, out_dir):
        print(f"wrote {target} ({target.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
