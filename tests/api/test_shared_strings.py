"""Decoded objects share the strings many of them hold (memory at scale): enum values, kind,
apiVersion and namespace are one instance each, and the Literal types that make msgspec share
enum values accept exactly what the CRD schemas accept."""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi

from gateweave.api import models as m
from gateweave.api import schema
from gateweave.api.decode import decode
from gateweave.api.kinds import KINDS


def _literal_fields(
    t: mi.Type, node: dict[str, Any], where: str
) -> list[tuple[str, set[str], set[str]]]:
    """(path, the model's Literal values, the schema's enum) for each Literal field under ``t``,
    walking the schema node alongside."""
    if isinstance(t, mi.UnionType):
        return [f for u in t.types for f in _literal_fields(u, node, where)]
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        return _literal_fields(t.item_type, node.get("items", {}), f"{where}[]")
    if isinstance(t, mi.LiteralType):
        return [(where, {str(v) for v in t.values}, {str(v) for v in node.get("enum", ())})]
    if isinstance(t, mi.StructType):
        props = node.get("properties", {})
        return [
            found
            for f in t.fields
            if f.encode_name in props
            for found in _literal_fields(f.type, props[f.encode_name], f"{where}.{f.encode_name}")
        ]
    return []


def test_every_literal_field_is_its_schema_enum_in_every_version() -> None:
    checked = 0
    for info in KINDS.values():
        if info.crd is None:
            continue
        model = mi.type_info(info.model)
        for version, root in schema.load_schemas(info.group, info.crd).items():
            for where, values, enum in _literal_fields(model, root, f"{info.kind} {version}"):
                assert values == enum, where
                checked += 1
    assert checked >= 10  # HTTPRoute's and GRPCRoute's match types, methods, filter types


def _route(name: str) -> bytes:
    return msgspec.json.encode(
        {
            "apiVersion": f"{m.GATEWAY_GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "rules": [
                    {
                        "matches": [{"path": {"type": "Exact", "value": "/x"}, "method": "GET"}],
                        "filters": [
                            {
                                "type": "RequestHeaderModifier",
                                "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]},
                            }
                        ],
                    }
                ]
            },
        }
    )


def test_two_decoded_routes_share_their_enum_values_kind_api_version_and_namespace() -> None:
    a, b = (decode(msgspec.json.decode(_route(n)), owned=True)[0] for n in ("a", "b"))
    assert a is not None and b is not None
    ra, rb = a.model, b.model
    assert isinstance(ra, m.HTTPRoute) and isinstance(rb, m.HTTPRoute)
    ma, mb = ra.spec.rules[0].matches[0], rb.spec.rules[0].matches[0]
    assert ma.path is not None and mb.path is not None
    assert ma.path.type == "Exact" and ma.path.type is mb.path.type
    assert ma.method == "GET" and ma.method is mb.method
    assert ra.spec.rules[0].filters[0].type is rb.spec.rules[0].filters[0].type
    assert ra.kind == "HTTPRoute" and ra.kind is rb.kind
    assert ra.api_version == f"{m.GATEWAY_GROUP}/v1" and ra.api_version is rb.api_version
    assert ra.metadata.namespace == "team-a" and ra.metadata.namespace is rb.metadata.namespace
