"""``generated_objects`` steps (FORMAT.md): what an implementation generates for a Gateway carries
the Gateway's ``spec.infrastructure`` labels and annotations (upstream GatewayInfrastructure).

Upstream lists the ServiceAccounts, Pods and Services labelled with the Gateway's name, waits
until one exists, and checks the first of each kind. Where the Gateway runs decides what is
listed: a cluster's objects (:func:`labelled`), or, on one machine, gateweave's Envoy process for
the Gateway (:func:`envoy_object`, from the node metadata Envoy reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateweave.ir import GATEWAY_NAME_LABEL
from gateweave_conformance.cases import GeneratedObjectsStep


def labelled(
    objects: Iterable[Mapping[str, Any]], namespace: str, gateway: str
) -> list[Mapping[str, Any]]:
    """The objects of ``namespace`` labelled with the Gateway's name (upstream's list selector)."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if (
            meta.get("namespace") == namespace
            and (meta.get("labels") or {}).get(GATEWAY_NAME_LABEL) == gateway
        ):
            out.append(obj)
    return out


def envoy_object(server_info: Mapping[str, Any]) -> dict[str, Any]:
    """A gateweave Envoy, as an object: its node id, and its node metadata's labels and
    annotations.
    """
    node = server_info.get("node") or {}
    metadata = node.get("metadata") or {}
    return {
        "kind": "Envoy",
        "metadata": {
            "name": str(node.get("id") or ""),
            "labels": dict(metadata.get("labels") or {}),
            "annotations": dict(metadata.get("annotations") or {}),
        },
    }


def _lacking(have: Mapping[str, Any], want: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in want.items() if have.get(k) != v}


def check(
    step: GeneratedObjectsStep, found: Mapping[str, Sequence[Mapping[str, Any]]]
) -> str | None:
    """``found``: per kind, the objects generated for the Gateway, in list order. None when the
    first of each kind carries every label and annotation of the step (upstream require.Subset),
    else what it lacks."""
    for kind, objects in found.items():
        if not objects:
            continue
        meta = objects[0].get("metadata") or {}
        what = f"{kind} {meta.get('name', '?')}"
        labels = _lacking(meta.get("labels") or {}, step.labels)
        if labels:
            return f"{what}: labels {dict(meta.get('labels') or {})} lack {labels}"
        annotations = _lacking(meta.get("annotations") or {}, step.annotations)
        if annotations:
            return f"{what}: annotations {dict(meta.get('annotations') or {})} lack {annotations}"
    return None
