"""Decoded objects share the strings many of them hold (memory at scale): enum values (their
model fields are Literal types, each exactly its schema's enum: tests/api/test_field_names.py),
kind, apiVersion and namespace are one instance each."""

from __future__ import annotations

import msgspec

from gateweave.api import models as m
from gateweave.api.decode import decode


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
