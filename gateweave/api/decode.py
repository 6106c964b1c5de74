"""Turn one raw manifest (a dict) into a typed object, or say why the API server would reject it."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from gateweave.api import schema
from gateweave.api.kinds import KindInfo, lookup


class ObjectError(msgspec.Struct, frozen=True, kw_only=True):
    """An object that was rejected (or could not be read), located for the user."""

    source: str  # "file:line" or "" when unknown
    kind: str
    namespace: str
    name: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        who = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{where}{self.kind} {who}: {self.message}"


def kind_info(raw: Any) -> KindInfo | None:
    if not isinstance(raw, dict):
        return None
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return lookup(api_version, kind)


class Decoded(msgspec.Struct, frozen=True):
    """An accepted object: ``raw`` as the API server would store it (defaults applied,
    namespace and generation set, any ``status`` from the input kept) and its typed ``model``."""

    raw: dict[str, Any]
    model: Any


def decode(raw: Any, source: str = "", default_namespace: str = "default") -> tuple[Decoded | None, list[ObjectError]]:
    """Decode one manifest.

    Returns ``(None, [])`` for kinds gateweave does not read (ignored silently),
    ``(None, errors)`` when the API server would reject the object, and
    ``(Decoded, [])`` otherwise. CRD defaults are applied, the namespace defaulted for
    namespaced kinds and ``metadata.generation`` defaulted to 1.
    """
    info = kind_info(raw)
    if info is None:
        return None, []
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    ns = str(meta.get("namespace") or (default_namespace if info.namespaced else ""))
    name = str(meta.get("name") or "")
    defaulted, errors = schema.validate(raw, info)
    if errors:
        return None, [ObjectError(source=source, kind=info.kind, namespace=ns, name=name, message=e) for e in errors]
    obj = copy.deepcopy(defaulted) if defaulted is raw else defaulted
    meta = obj.setdefault("metadata", {})
    if info.namespaced:
        meta["namespace"] = ns
    else:
        meta.pop("namespace", None)
    meta.setdefault("generation", 1)
    if "status" in raw and "status" not in obj:
        obj["status"] = copy.deepcopy(raw["status"])
    # The status is not part of the model, except for kinds whose model declares it (Service:
    # its status is the cluster's, e.g. load-balancer addresses, never gateweave's own writes).
    keep_status = "status" in info.model.__struct_fields__
    spec_view = {k: v for k, v in obj.items() if k != "status" or keep_status}
    spec_view["apiVersion"] = f"{info.group}/{info.versions[0]}" if info.group else info.versions[0]
    try:
        model = msgspec.convert(spec_view, info.model, strict=False)
    except msgspec.ValidationError as exc:
        return None, [ObjectError(source=source, kind=info.kind, namespace=ns, name=name, message=str(exc))]
    return Decoded(obj, model), []
