"""Generate gateweave/api/schemas/<group>/<plural>.json from CustomResourceDefinitions.

Each file maps every served version of the kind to its openAPIV3Schema with the
``description`` of every schema node removed (property *names* called
"description" are kept). Nothing else changes meaning. Each source is a directory of
CRD files and the API group read from it (CRDs of other groups there are skipped); a
``LICENSE`` file nearest above the directory is copied next to that group's schemas.

Usage: python scripts/gen_schemas.py [OUT_DIR [CRD_DIR GROUP]...]
(no CRD_DIR: the Gateway API and Envoy Gateway CRDs vendored in third_party/ and gateweave's
own in deploy/crds/)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "gateweave" / "api" / "schemas"
# (directory of CRD files, the API group generated from it)
DEFAULT_SOURCES: tuple[tuple[Path, str], ...] = (
    (ROOT / "third_party" / "gateway-api" / "crds" / "experimental", "gateway.networking.k8s.io"),
    (ROOT / "third_party" / "envoy-gateway" / "crds", "gateway.envoyproxy.io"),
    (ROOT / "deploy" / "crds", "gateweave.io"),  # gateweave's own kinds
)

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


def generate(crd_dir: Path, group: str, out_dir: Path) -> list[Path]:
    """Write ``out_dir/<group>/<plural>.json`` for every CRD of ``group`` in ``crd_dir``
    (and the nearest ``LICENSE`` above ``crd_dir``, if there is one)."""
    target_dir = out_dir / group
    target_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["spec"]["group"] != group:
                continue
            target = target_dir / f"{doc['spec']['names']['plural']}.json"
            text = json.dumps(crd_schemas(doc), separators=(",", ":"), sort_keys=True)
            target.write_text(text + "\n")
            written.append(target)
    licence = next((d / "LICENSE" for d in crd_dir.resolve().parents if (d / "LICENSE").is_file()), None)
    if licence is not None:
        (target_dir / "LICENSE").write_bytes(licence.read_bytes())
    return written


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    pairs = argv[2:]
    if len(pairs) % 2:
        print("usage: gen_schemas.py [OUT_DIR [CRD_DIR GROUP]...]", file=sys.stderr)
        return 2
    sources = [(Path(pairs[i]), pairs[i + 1]) for i in range(0, len(pairs), 2)] or list(DEFAULT_SOURCES)
    for crd_dir, group in sources:
        for target in generate(crd_dir, group, out_dir):
            print(f"wrote {target} ({target.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
