"""Validation and defaulting of manifests as the Kubernetes API server does it.

Placeholder: the CRD-schema and CEL based implementation replaces this module.
"""

from __future__ import annotations

from typing import Any

from gateweave.api.kinds import KindInfo


def validate(raw: dict[str, Any], info: KindInfo) -> tuple[dict[str, Any], list[str]]:
    """Return (defaulted copy of raw, errors). An empty error list means the API server accepts it."""
    errors: list[str] = []
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        errors.append("metadata.name: Required value")
    return raw, errors
