"""Every field of every Gateway API kind, as the CRD schemas name it, arrives in the models.

The models (gateweave/api/models.py) name fields in Python and let msgspec derive the JSON
name (``rename="camel"``): ``well_known_ca_certificates`` became ``wellKnownCaCertificates``
while the API says ``wellKnownCACertificates``, and the field was silently dropped. This test
walks each served version's schema (gateweave/api/schemas/*.json) alongside the model of its
kind (gateweave/api/kinds.py):

* every schema property of an object the model represents as a Struct must be a field of that
  Struct under the same JSON name, or be listed in :data:`UNMODELLED` with the reason it is
  not read (and every entry there must still be a schema property the model lacks);
* every field of those Structs must be a schema property (no field waits for a name that
  never comes);
* one object per kind and version with every property set to a distinct value is decoded, and
  each value must be found in the model under the attribute the walk matched it to.

The core kinds (Service, EndpointSlice, Namespace, Secret, ConfigMap) have no schema here and
are read in part only: every field their models (and the ObjectMeta all kinds share) name must
be a field of the Kubernetes API under that JSON name, as the pinned Kubernetes client's
generated models (``kubernetes_asyncio``, from the API's OpenAPI document) spell it.
"""

from __future__ import annotations

import itertools
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from kubernetes_asyncio.client import models as k8s

from gateweave.api.kinds import KINDS, KindInfo
from gateweave.api.schema import load_schemas

# Schema paths (property names joined by "."; "[]" for an array's items, "{}" for a map's
# values) the models deliberately do not read, and why.
UNMODELLED: dict[str, str] = {
    "status": "written by gateweave (the status sink), never read back by translate",
}

Schema = dict[str, Any]
_SCALARS = {"string": (str,), "integer": (int,), "boolean": (bool,), "number": (float, int)}


@dataclass
class Walk:
    """What walking one schema alongside one model found."""

    missing: set[str] = field(default_factory=set)  # schema properties the model lacks
    extra: set[str] = field(default_factory=set)  # model fields the schema lacks
    mismatched: list[str] = field(default_factory=list)  # shapes that disagree
    leaves: dict[str, tuple[str, ...]] = field(
        default_factory=dict
    )  # schema path -> model attribute path


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tuple(args)
    return tp


def _is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _opaque(tp: Any) -> bool:
    """A model type that keeps the raw JSON as it is (nothing inside is named by the model)."""
    if tp is Any:
        return True
    return typing.get_origin(tp) is dict and typing.get_args(tp)[1] is Any


def _walk(schema: Schema, tp: Any, path: str, attrs: tuple[str, ...], out: Walk) -> None:
    tp = _unwrap_optional(tp)
    if _opaque(tp):  # kept as the raw JSON: what is set there arrives as it is
        out.leaves[path] = attrs
        return
    props: dict[str, Schema] | None = schema.get("properties")
    if props is not None:
        if not _is_struct(tp):
            out.mismatched.append(
                f"{path or '(root)'}: an object with properties, modelled as {tp!r}"
            )
            return
        fields = {f.encode_name: f for f in msgspec.structs.fields(tp)}
        for name, sub in props.items():
            where = f"{path}.{name}" if path else name
            f = fields.get(name)
            if f is None:
                out.missing.add(where)
                continue
            _walk(sub, f.type, where, (*attrs, f.name), out)
        for name in fields.keys() - props.keys():
            out.extra.add(f"{path}.{name}" if path else name)
        return
    if _is_struct(tp):
        # A free-form object in the schema (metadata): the model names its own fields there.
        if schema.get("type") != "object":
            out.mismatched.append(f"{path}: a {schema.get('type')}, modelled as {tp.__name__}")
        return
    kind = schema.get("type")
    if kind == "array":
        if typing.get_origin(tp) is not tuple:
            out.mismatched.append(f"{path}: an array, modelled as {tp!r}")
            return
        _walk(schema["items"], typing.get_args(tp)[0], f"{path}[]", (*attrs, "[0]"), out)
        return
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        if typing.get_origin(tp) is not dict:
            out.mismatched.append(f"{path}: a map, modelled as {tp!r}")
            return
        _walk(
            schema["additionalProperties"],
            typing.get_args(tp)[1],
            f"{path}{{}}",
            (*attrs, "{k}"),
            out,
        )
        return
    wanted = (int, str) if schema.get("x-kubernetes-int-or-string") else _SCALARS.get(kind or "")
    if typing.get_origin(tp) is typing.Literal:
        # an enum modelled as its values (msgspec then shares one instance of each): exactly
        # the schema's values, else the model would refuse what the schema accepts, or worse
        values = typing.get_args(tp)
        if set(values) != set(schema.get("enum", ())):
            out.mismatched.append(f"{path}: the enum {schema.get('enum')}, modelled as {tp!r}")
            return
        tp = tuple({type(v) for v in values})
    have = tp if isinstance(tp, tuple) else (tp,)
    if wanted is None or not set(wanted) & set(have):
        out.mismatched.append(f"{path}: a {kind}, modelled as {tp!r}")
        return
    out.leaves[path] = attrs


def walk(info: KindInfo, schema: Schema) -> Walk:
    out = Walk()
    _walk(schema, info.model, "", (), out)
    return out


def _sample(schema: Schema, counter: itertools.count[int]) -> Any:
    """A value for every property of ``schema``, each scalar distinct."""
    props: dict[str, Schema] | None = schema.get("properties")
    if props is not None:
        return {name: _sample(sub, counter) for name, sub in props.items()}
    kind = schema.get("type")
    if kind == "array":
        return [_sample(schema["items"], counter)]
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return {"k": _sample(schema["additionalProperties"], counter)}
    if kind == "object":
        return {}
    n = next(counter)
    if "enum" in schema:
        return schema["enum"][n % len(schema["enum"])]
    if schema.get("x-kubernetes-int-or-string") or kind == "integer":
        return n
    if kind == "number":
        return n + 0.5
    if kind == "boolean":
        return n % 2 == 0
    return f"value-{n}"


def _raw_at(raw: Any, path: str) -> Any:
    for part in path.replace("[]", ".[]").replace("{}", ".{}").split("."):
        if part == "[]":
            raw = raw[0]
        elif part == "{}":
            raw = raw["k"]
        elif part:
            raw = raw[part]
    return raw


def _model_at(model: Any, attrs: tuple[str, ...]) -> Any:
    for attr in attrs:
        if attr == "[0]":
            model = model[0]
        elif attr == "{k}":
            model = model["k"]
        else:
            model = getattr(model, attr)
    return model


CASES = [
    (info, version)
    for info in KINDS.values()
    if info.crd is not None
    for version in load_schemas(info.group, info.crd)
]


@pytest.mark.parametrize("info,version", CASES, ids=[f"{i.kind}-{v}" for i, v in CASES])
def test_every_schema_property_arrives_in_the_model(info: KindInfo, version: str) -> None:
    assert info.crd is not None
    schema = load_schemas(info.group, info.crd)[version]
    found = walk(info, schema)
    assert not found.mismatched, found.mismatched
    lost = sorted(found.missing - UNMODELLED.keys())
    assert not lost, (
        f"a value set at these properties arrives nowhere in the {info.kind} model: {lost}"
    )
    assert not found.extra, (
        f"{info.kind} model fields no schema property fills: {sorted(found.extra)}"
    )
    # Round trip: every property set at once, each scalar to a distinct value.
    raw = _sample(schema, itertools.count(1))
    raw["metadata"] = {"name": "n", "namespace": "ns"}
    raw.pop("status", None)
    model = msgspec.convert(raw, info.model, strict=False)
    wrong = {}
    for path, attrs in found.leaves.items():
        want, got = _raw_at(raw, path), _model_at(model, attrs)
        if path not in ("apiVersion", "kind") and want != got:
            wrong[path] = (want, got)
    assert not wrong, wrong
    assert len(found.leaves) > 2


def test_the_unmodelled_list_names_only_properties_the_models_lack() -> None:
    missing: set[str] = set()
    for info, version in CASES:
        assert info.crd is not None
        missing |= walk(info, load_schemas(info.group, info.crd)[version]).missing
    assert not UNMODELLED.keys() - missing, sorted(UNMODELLED.keys() - missing)


# ---------------------------------------------------------------- core kinds

CORE_API = {
    "Service": "V1Service",
    "EndpointSlice": "V1EndpointSlice",
    "Namespace": "V1Namespace",
    "Secret": "V1Secret",
    "ConfigMap": "V1ConfigMap",
}


def _api_class(openapi_type: str) -> Any:
    """The Kubernetes client's model class an OpenAPI type string names (inside list[...] or
    dict(str, ...)), or None for a scalar or free-form value."""
    if openapi_type.startswith("list["):
        return _api_class(openapi_type[5:-1])
    if openapi_type.startswith("dict("):
        return _api_class(openapi_type.split(",", 1)[1].strip()[:-1])
    return getattr(k8s, openapi_type, None)


def _core_unknown(model: Any, api: Any, path: str) -> list[str]:
    """Model fields (recursively) that are not fields of the API object ``api`` under that name."""
    by_json = {json: attr for attr, json in api.attribute_map.items()}
    out = []
    for f in msgspec.structs.fields(model):
        where = f"{path}.{f.encode_name}" if path else f.encode_name
        attr = by_json.get(f.encode_name)
        if attr is None:
            out.append(where)
            continue
        inner = _unwrap_optional(f.type)
        if typing.get_origin(inner) in (tuple, dict):
            inner = typing.get_args(inner)[-1 if typing.get_origin(inner) is dict else 0]
        sub = _api_class(api.openapi_types[attr])
        if _is_struct(inner):
            if sub is None:
                out.append(f"{where} (a scalar in the API)")
            else:
                out.extend(_core_unknown(inner, sub, where))
    return out


@pytest.mark.parametrize("kind", sorted(CORE_API))
def test_core_kind_models_use_the_apis_field_names(kind: str) -> None:
    assert KINDS[kind].crd is None
    unknown = _core_unknown(KINDS[kind].model, getattr(k8s, CORE_API[kind]), "")
    assert not unknown, f"{kind} model fields the Kubernetes API does not have: {unknown}"


def test_every_kind_is_audited() -> None:
    assert {info.kind for info, _ in CASES} | CORE_API.keys() == KINDS.keys()
