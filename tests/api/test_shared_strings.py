"""Decoded objects share the strings many of them hold (memory at scale): enum values (their
model fields are Literal types, each exactly its schema's enum: tests/api/test_field_names.py),
kind, apiVersion and namespace are one instance each, and so are the names references point
at, header names and values, and labels (models._Shared)."""

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


def _joined(*parts: str) -> str:
    return "".join(parts)  # (a new string object each call, as a decoder makes one)


def _shared_route(name: str) -> dict[str, object]:
    header = {"name": _joined("x-", "team"), "value": _joined("blue-", "green")}
    return {
        "apiVersion": f"{m.GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"app": _joined("sh", "op")}},
        "spec": {
            "parentRefs": [{"name": _joined("g", "w"), "sectionName": _joined("ht", "tp")}],
            "rules": [
                {
                    "matches": [
                        {
                            "headers": [dict(header)],
                            "queryParams": [
                                {"name": _joined("q", "1"), "value": _joined("v", "1")}
                            ],
                        }
                    ],
                    "filters": [
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {
                                "set": [dict(header)],
                                "remove": [_joined("x-", "debug")],
                            },
                        }
                    ],
                    "backendRefs": [
                        {
                            "name": _joined("svc-", "a"),
                            "namespace": _joined("te", "am-b"),
                            "port": 80,
                        }
                    ],
                }
            ],
        },
    }


def test_two_decoded_routes_share_the_names_and_values_they_repeat() -> None:
    a, b = (decode(_shared_route(n), owned=True)[0] for n in ("a", "b"))
    assert a is not None and b is not None
    ra, rb = a.model, b.model
    assert isinstance(ra, m.HTTPRoute) and isinstance(rb, m.HTTPRoute)
    assert ra.metadata.labels["app"] == "shop"
    assert ra.metadata.labels["app"] is rb.metadata.labels["app"]
    pa, pb = ra.spec.parent_refs[0], rb.spec.parent_refs[0]
    assert (pa.name, pa.section_name) == ("gw", "http")
    assert pa.name is pb.name and pa.section_name is pb.section_name
    qa, qb = ra.spec.rules[0], rb.spec.rules[0]
    ba, bb = qa.backend_refs[0], qb.backend_refs[0]
    assert (ba.name, ba.namespace) == ("svc-a", "team-b")
    assert ba.name is bb.name and ba.namespace is bb.namespace
    ha, hb = qa.matches[0].headers[0], qb.matches[0].headers[0]
    assert (ha.name, ha.value) == ("x-team", "blue-green")
    assert ha.name is hb.name and ha.value is hb.value
    pqa, pqb = qa.matches[0].query_params[0], qb.matches[0].query_params[0]
    assert pqa.name is pqb.name and pqa.value is pqb.value
    fa, fb = qa.filters[0].request_header_modifier, qb.filters[0].request_header_modifier
    assert fa is not None and fb is not None
    assert fa.set[0].name is ha.name and fa.set[0].value is hb.value
    assert fa.remove == ("x-debug",) and fa.remove[0] is fb.remove[0]
