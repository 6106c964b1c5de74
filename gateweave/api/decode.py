"""Turn one raw manifest (a dict) into a typed object, or say why the API server would reject it.

How much is checked depends on where the manifest comes from (:class:`Decoding`):

* ``STRICT``, a file someone wrote (the file provider, ``gateweave translate``): as
  ``kubectl apply`` with the API server's default strict field validation. Unknown fields
  (``unknown field "spec.hostname"``), an unknown version or kind of a group gateweave
  reads (:func:`gateweave.api.kinds.unknown_kind`), schema and CEL rules: each refuses
  the object. Every error carries the path of the offending field (:attr:`ObjectError.field`)
  so that :func:`decode_sourced` can locate it at its line.
* ``VALIDATE``: unknown fields pruned, then validated (what the API server stores when
  told to ignore unknown fields); kinds gateweave does not read are ignored.
* ``STORED``, what the Kubernetes API server already stored: defaulted and pruned, never
  refused for its content. The API server validated it against the schema of the
  version it was written in; validating it again against the version it is read in
  (a TLSRoute created as v1alpha2 without hostnames, read as v1) would drop a live object.
  Nor is anything it checked on write checked again (patterns, formats, bounds, CEL rules):
  :func:`gateweave.api.schema.default` runs the schema's defaults-only code. Only a
  structure the typed model cannot hold is refused (located, as in the other modes).
"""

from __future__ import annotations

import re
import sys
from enum import StrEnum
from typing import Any

import msgspec

from gateweave.api import packing, schema
from gateweave.api.kinds import KindInfo, lookup, unknown_kind
from gateweave.api.limits import clip
from gateweave.api.load import Sourced


class Decoding(StrEnum):
    STRICT = "strict"
    VALIDATE = "validate"
    STORED = "stored"


# (a module global each: an Enum member read as a class attribute costs about a microsecond)
_STORED, _STRICT = Decoding.STORED, Decoding.STRICT
_intern = sys.intern


class ObjectError(msgspec.Struct, frozen=True, kw_only=True):
    """An object that was rejected (or could not be read), located for the user."""

    source: str  # "file:line" or "" when unknown
    kind: str
    namespace: str
    name: str
    message: str
    field: str = (
        ""  # path of the offending field ("spec.rules[0].matches[0].path.type"); "": the object
    )

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        who = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{where}{self.kind} {who}: {self.message}"


# (apiVersion, kind) -> what lookup() found (pairs of strings only; looked up with any pair)
_KIND_INFO: dict[tuple[Any, Any], KindInfo] = {}


def kind_info(raw: Any) -> KindInfo | None:
    if not isinstance(raw, dict):
        return None
    key = (raw.get("apiVersion"), raw.get("kind"))
    try:
        info = _KIND_INFO.get(key)  # (only pairs of strings are in it)
    except TypeError:  # (an apiVersion or kind that is no string, nor hashable)
        return None
    if info is None:
        api_version, kind = key
        if not isinstance(api_version, str) or not isinstance(kind, str):
            return None
        info = lookup(api_version, kind)
        if info is not None:  # (only pairs gateweave reads: a bounded memo)
            _KIND_INFO[key] = info
    return info


_PACK = msgspec.msgpack.Encoder()  # (the status: small, read on every status merge)
_UNPACK = msgspec.msgpack.Decoder()


def _without_status(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "status"}


class Decoded:
    """An accepted object: ``raw`` as the API server would store it (defaults applied,
    namespace and generation set, any ``status`` from the input kept) and its typed ``model``.

    What is kept for long (the store, the file provider) is :meth:`packed`: the stored form
    as bytes instead of a dict (msgpack deflated with a preset dictionary of the models'
    field names, :mod:`gateweave.api.packing`: a fraction of its memory; the model is what
    translation reads), unpacked again on each read of ``raw`` (a new dict each time, the
    caller's to change) - the admin API, status merging and change detection read it, one
    object at a time. The ``status`` is packed apart, so reading it costs only its own size.
    """

    __slots__ = ("_body", "_raw", "_status", "model")

    def __init__(self, raw: dict[str, Any], model: Any) -> None:
        self._raw: dict[str, Any] | None = raw
        self._body = b""
        self._status: bytes | None = None
        self.model = model

    @property
    def raw(self) -> dict[str, Any]:
        if self._raw is not None:
            return self._raw
        raw: dict[str, Any] = packing.unpack(self._body)
        if self._status is not None:
            raw["status"] = _UNPACK.decode(self._status)
        return raw

    @property
    def status(self) -> Any:
        """``raw.get("status")``, without unpacking the rest."""
        if self._raw is not None:
            return self._raw.get("status")
        return None if self._status is None else _UNPACK.decode(self._status)

    def packed(self) -> Decoded:
        """The same object with ``raw`` kept packed (itself when it already is)."""
        raw = self._raw
        if raw is None:
            return self
        try:
            status = _PACK.encode(raw["status"]) if "status" in raw else None
            body = packing.pack(raw if status is None else _without_status(raw))
        except (TypeError, ValueError, OverflowError, RecursionError):
            return self  # not msgpack's (an integer beyond 64 bits from YAML): kept as it is
        return Decoded.from_packed(body, status, self.model)

    def packed_parts(self) -> tuple[bytes, bytes | None] | None:
        """The packed body and status of a :meth:`packed` object (None when not packed):
        with the model, what :meth:`from_packed` makes the same object of again."""
        return None if self._raw is not None else (self._body, self._status)

    @classmethod
    def from_packed(cls, body: bytes, status: bytes | None, model: Any) -> Decoded:
        """The packed object of :meth:`packed_parts` and ``model``."""
        out = cls.__new__(cls)
        out._raw, out._body, out._status, out.model = None, body, status, model
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decoded):
            return NotImplemented
        return self.model == other.model and self.raw == other.raw

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Decoded({self.raw!r}, {self.model!r})"


_MSGSPEC_PATH = re.compile(r" - at `\$(.*)`$")


def _model_error_field(message: str) -> str:
    """The field path msgspec names at the end of its message (`` - at `$.spec.x[0]` ``)."""
    m = _MSGSPEC_PATH.search(message)
    return m.group(1).lstrip(".") if m else ""


def _refused_kind(raw: dict[str, Any], source: str, default_namespace: str) -> list[ObjectError]:
    """The error for an apiVersion/kind of a group gateweave reads that it does not serve."""
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    refusal = unknown_kind(api_version, kind)
    if refusal is None:
        return []
    field, message = refusal
    meta = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    ns = clip(str(meta.get("namespace") or default_namespace))
    return [
        ObjectError(
            source=source,
            kind=clip(kind),
            namespace=ns,
            name=_name(meta),
            message=message,
            field=field,
        )
    ]


def _name(meta: dict[str, Any]) -> str:
    """The object's name as an error shows it (computed only for an error)."""
    return clip(str(meta.get("name") or ""), 253)


def _rejected(
    source: str, info: KindInfo, namespace: str, name: str, message: str, field: str
) -> ObjectError:
    return ObjectError(
        source=source, kind=info.kind, namespace=namespace, name=name, message=message, field=field
    )


def decode(
    raw: Any,
    source: str = "",
    default_namespace: str = "default",
    *,
    mode: Decoding = Decoding.VALIDATE,
    owned: bool = False,
) -> tuple[Decoded | None, list[ObjectError]]:
    """Decode one manifest.

    Returns ``(None, [])`` for kinds gateweave does not read (ignored silently),
    ``(None, errors)`` when the API server would reject the object, and
    ``(Decoded, [])`` otherwise. CRD defaults are applied, the namespace defaulted for
    namespaced kinds and ``metadata.generation`` defaulted to 1.

    ``owned``: the caller hands ``raw`` over (freshly parsed, not used again), so the
    accepted object is ``raw`` itself, defaulted in place, instead of a copy; a rejected
    ``raw`` may have been defaulted in part.
    """
    info = kind_info(raw)
    if info is None:
        return None, _refused_kind(
            raw, source, default_namespace
        ) if mode is _STRICT and isinstance(raw, dict) else []
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    # (a namespace is shared by many objects: one string each, not a copy per object)
    ns = _intern(clip(str(meta.get("namespace") or (default_namespace if info.namespaced else ""))))

    if mode is _STORED:
        defaulted = schema.default(raw, info, owned=owned)
    else:
        defaulted, errors = schema.validate(raw, info, strict=mode is _STRICT, owned=owned)
        if errors:
            name = _name(meta)
            return None, [
                _rejected(source, info, ns, name, str(e), getattr(e, "path", "")) for e in errors
            ]
    obj = schema.copy_json(defaulted) if defaulted is raw and not owned else defaulted
    stored_meta = obj.setdefault("metadata", {})
    if info.namespaced:
        stored_meta["namespace"] = ns
    else:
        stored_meta.pop("namespace", None)
    stored_meta.setdefault("generation", 1)
    if "status" in raw and "status" not in obj:
        obj["status"] = raw["status"] if owned else schema.copy_json(raw["status"])
    # The status is not part of the model, except for kinds whose model declares it (Service:
    # its status is the cluster's, e.g. load-balancer addresses, never gateweave's own writes).
    # The model carries the storage version; obj keeps the version it was written in.
    storage = info.storage_api_version
    view = obj if info.status_in_model or "status" not in obj else _without_status(obj)
    if view is obj and obj.get("apiVersion") != storage:
        view = dict(obj)
    # (one string for every object of the kind, not a copy: also in obj where it is the view)
    view["apiVersion"] = storage
    if view.get("kind") == info.kind:
        view["kind"] = info.kind
    try:
        model = msgspec.convert(view, info.model, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        return None, [
            _rejected(
                source, info, ns, _name(meta), clip(message, 1000), _model_error_field(message)
            )
        ]
    return Decoded(obj, model), []


def decode_sourced(
    item: Sourced, *, mode: Decoding = Decoding.STRICT, owned: bool = True
) -> tuple[Decoded | None, list[ObjectError]]:
    """:func:`decode` one loaded manifest, each error located at the line of its field
    (the text is read again only when there is an error). A loaded manifest is decoded
    once: its ``raw`` is handed over (``owned``) unless told otherwise."""
    decoded, errors = decode(item.raw, item.source, mode=mode, owned=owned)
    if errors:
        errors = [msgspec.structs.replace(e, source=item.source_of(e.field)) for e in errors]
    return decoded, errors
