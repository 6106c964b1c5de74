"""Conformance case files (FORMAT.md) loaded into typed structures.

A case is a YAML mapping; each step is a mapping with exactly one key naming its kind.
Status assertions (``expect``) and the mutations are typed here; traffic steps keep
their body as a plain mapping (the live runner interprets them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import yaml

from gateweave_conformance.tlsgen import TLSSpec

TRAFFIC_KINDS = frozenset({"http", "grpc", "tls", "tcp", "udp", "distribution"})
MUTATION_KINDS = frozenset(
    {"apply", "patch", "delete", "remember_generation", "expect_generation_changed"}
)


class CaseError(Exception):
    """A case file that does not follow FORMAT.md."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    pass


class CondSpec(_Strict, frozen=True):
    """An expected condition: ``status`` / ``reason`` / ``message`` None means any."""

    type: str
    status: str | None = None
    reason: str | None = None
    message: str | None = None  # compared exactly when given (Envoy Gateway's policy messages)

    def __str__(self) -> str:
        parts = [self.type]
        if self.status is not None:
            parts.append(f"status={self.status}")
        if self.reason is not None:
            parts.append(f"reason={self.reason}")
        if self.message is not None:
            parts.append(f"message={self.message!r}")
        return "{" + " ".join(parts) + "}"


class ParentRefSpec(_Strict, frozen=True):
    name: str
    group: str | None = None
    kind: str | None = None
    namespace: str | None = None
    section_name: str | None = msgspec.field(default=None, name="sectionName")
    port: int | None = None


class ParentSpec(_Strict, frozen=True):
    parent_ref: ParentRefSpec = msgspec.field(name="parentRef")
    conditions: tuple[CondSpec, ...] = ()


class RouteKindSpec(_Strict, frozen=True):
    kind: str
    group: str | None = None


class ListenerSpec(_Strict, frozen=True):
    name: str
    supported_kinds: tuple[RouteKindSpec, ...] | None = msgspec.field(
        default=None, name="supportedKinds"
    )
    attached_routes: int | None = msgspec.field(default=None, name="attachedRoutes")
    conditions: tuple[CondSpec, ...] = ()


class AddressSpec(_Strict, frozen=True):
    value: str
    type: str | None = None


class ExpectStep(_Strict, frozen=True):
    kind: str
    name: str
    parent: str | None = None
    parent_section: str | None = None
    parent_kind: str | None = None
    listener: str | None = None
    conditions: tuple[CondSpec, ...] | None = None
    latest_generation: bool = False
    has_address: bool = False
    addresses: tuple[AddressSpec, ...] | None = None
    attached_routes: int | None = None
    attached_listeners: int | None = None
    listener_count: int | None = None
    zero_routes: bool = False
    no_accepted_parents: bool = False
    parents: tuple[ParentSpec, ...] | None = None
    namespace_required: bool = False
    listeners: tuple[ListenerSpec, ...] | None = None
    timeout_s: float | None = None


class ObjectRef(_Strict, frozen=True):
    kind: str
    name: str  # "namespace/name", or "name" for cluster-scoped kinds


class ApplyStep(_Strict, frozen=True):
    files: tuple[str, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()


class PatchStep(_Strict, frozen=True):
    kind: str
    name: str
    merge: dict[str, Any]


class GeneratedSpec(_Strict, frozen=True):
    kind: str
    namespace: str
    name: str
    hosts: tuple[str, ...] = ()
    signed_by: str = ""

    def to_tls(self) -> TLSSpec:
        return TLSSpec(self.kind, self.namespace, self.name, tuple(self.hosts), self.signed_by)


class GeneratedObjectsStep(_Strict, frozen=True):
    """What the implementation generated for a Gateway carries its infrastructure metadata."""

    gateway: str  # "namespace/name"
    kinds: tuple[str, ...]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    timeout_s: float | None = None


_Count = Annotated[int, msgspec.Meta(ge=1, le=10_000)]
_Seconds = Annotated[float, msgspec.Meta(gt=0, le=600)]


class HttpRepeatStep(_Strict, frozen=True):
    """``http_repeat``: an ``http`` step's request made ``times`` times in a row, each answer
    meeting its expectations (the keys are the http step's, without the ones that need retries)."""

    times: _Count
    gateway: str
    listener: str | None = None
    scheme: str = "http"
    server_certificate: str | None = None
    request: dict[str, Any] = {}
    expected_request: dict[str, Any] | None = None
    response: dict[str, Any] = {}
    backend: str | None = None
    namespace: str | None = None
    backend_set_response_headers: dict[str, str] = {}
    timeout_s: _Seconds | None = None


class ConnectionsStep(_Strict, frozen=True):
    """``connections``: ``hold`` connections open and served; the next one closed unanswered."""

    gateway: str
    hold: _Count
    listener: str | None = None
    path: str = "/"
    host: str = ""
    timeout_s: _Seconds | None = None


class PartialRequestStep(_Strict, frozen=True):
    """``partial_request``: a request declaring ``content_length`` body bytes, sending fewer."""

    gateway: str
    content_length: _Count
    status: int
    listener: str | None = None
    method: str = "POST"
    path: str = "/"
    host: str = ""
    headers: dict[str, str] = {}
    body: str = ""
    wait_s: _Seconds = 10.0
    timeout_s: _Seconds | None = None

    def __post_init__(self) -> None:
        if len(self.body.encode()) >= self.content_length:
            raise ValueError("content_length must exceed the body's length (the part never sent)")


# Traffic steps typed here, run by gateweave_conformance.clientsteps (gateweave's additions).
CLIENT_STEPS: dict[str, type[_Strict]] = {
    "http_repeat": HttpRepeatStep,
    "connections": ConnectionsStep,
    "partial_request": PartialRequestStep,
}
STEP_KINDS = (
    TRAFFIC_KINDS
    | MUTATION_KINDS
    | CLIENT_STEPS.keys()
    | {"expect", "generated_objects", "unsupported"}
)


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One step: ``kind`` is its key; exactly one of the typed bodies is set (traffic: ``raw``)."""

    index: int
    kind: str
    raw: Any
    expect: ExpectStep | None = None
    apply: ApplyStep | None = None
    patch: PatchStep | None = None
    ref: ObjectRef | None = None  # delete / remember_generation / expect_generation_changed
    generated: GeneratedObjectsStep | None = None
    text: str = ""  # unsupported

    def describe(self) -> str:
        if self.expect is not None:
            return f"step {self.index} (expect {self.expect.kind} {self.expect.name})"
        if self.ref is not None:
            return f"step {self.index} ({self.kind} {self.ref.kind} {self.ref.name})"
        if self.patch is not None:
            return f"step {self.index} (patch {self.patch.kind} {self.patch.name})"
        return f"step {self.index} ({self.kind})"


class Case(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    path: str
    description: str = ""
    features: tuple[str, ...] = ()
    provisional: bool = False
    manifests: tuple[str, ...] = ()
    generated: tuple[GeneratedSpec, ...] = ()
    steps: tuple[Step, ...] = ()
    notes: str = ""

    @property
    def unsupported(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "unsupported"]


_CASE_KEYS = {
    "name",
    "description",
    "features",
    "provisional",
    "manifests",
    "generated",
    "steps",
    "notes",
}


def _convert(body: Any, typ: type[Any], where: str) -> Any:
    try:
        return msgspec.convert(body, typ, strict=False)
    except msgspec.ValidationError as exc:
        raise CaseError(f"{where}: {exc}") from None


def parse_step(index: int, raw: Any, where: str = "") -> Step:
    at = f"{where}step {index}"
    if not isinstance(raw, dict) or len(raw) != 1:
        raise CaseError(f"{at}: a step is a mapping with exactly one key, got {raw!r}")
    ((kind, body),) = raw.items()
    if kind not in STEP_KINDS:
        raise CaseError(f"{at}: unknown step kind {kind!r}")
    if kind == "expect":
        return Step(index=index, kind=kind, raw=body, expect=_convert(body, ExpectStep, at))
    if kind == "apply":
        return Step(index=index, kind=kind, raw=body, apply=_convert(body, ApplyStep, at))
    if kind == "patch":
        return Step(index=index, kind=kind, raw=body, patch=_convert(body, PatchStep, at))
    if kind in ("delete", "remember_generation", "expect_generation_changed"):
        return Step(index=index, kind=kind, raw=body, ref=_convert(body, ObjectRef, at))
    if kind == "generated_objects":
        return Step(
            index=index, kind=kind, raw=body, generated=_convert(body, GeneratedObjectsStep, at)
        )
    if kind == "unsupported":
        return Step(index=index, kind=kind, raw=body, text=str(body))
    if not isinstance(body, dict):
        raise CaseError(f"{at}: {kind} body must be a mapping")
    if kind in CLIENT_STEPS:
        _convert(body, CLIENT_STEPS[kind], f"{at} ({kind})")
    return Step(index=index, kind=kind, raw=body)


def parse_case(data: Any, path: str = "") -> Case:
    where = f"{path}: " if path else ""
    if not isinstance(data, dict):
        raise CaseError(f"{where}a case is a mapping")
    unknown = set(data) - _CASE_KEYS
    if unknown:
        raise CaseError(f"{where}unknown keys {sorted(unknown)}")
    if not isinstance(data.get("name"), str):
        raise CaseError(f"{where}name is required")
    steps = data.get("steps") or []
    if not isinstance(steps, list):
        raise CaseError(f"{where}steps must be a list")
    return Case(
        name=data["name"],
        path=path,
        description=str(data.get("description") or ""),
        features=tuple(data.get("features") or ()),
        provisional=bool(data.get("provisional", False)),
        manifests=tuple(data.get("manifests") or ()),
        generated=tuple(
            _convert(g, GeneratedSpec, f"{where}generated") for g in data.get("generated") or ()
        ),
        steps=tuple(parse_step(i, s, where) for i, s in enumerate(steps)),
        notes=str(data.get("notes") or ""),
    )


def load_case(path: Path) -> Case:
    with path.open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return parse_case(data, str(path))


def case_files(cases_dir: Path) -> list[Path]:
    return sorted(p for p in cases_dir.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
