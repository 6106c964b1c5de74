"""Envoy resources as plain JSON-ready dicts (``gateweave translate --show xds``)."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from gateweave import ir
from gateweave.xds.build import build


def dump_resources(gw: ir.XdsGateway) -> dict[str, list[dict[str, Any]]]:
    """Every resource of one Gateway by type (short name), each as Envoy's JSON form with
    ``@type``.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for type_url, items in build(gw).by_type().items():
        short = type_url.rsplit(".", 1)[-1]
        out[short] = []
        for msg in items.values():
            as_dict = json_format.MessageToDict(msg, preserving_proto_field_name=True)
            out[short].append({"@type": type_url, **as_dict})
    return out
