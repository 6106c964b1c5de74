"""Evaluate one ``expect`` step (FORMAT.md) against an object with its status.

:func:`evaluate` is a pure function of the step and the stored object (a JSON-like dict
with ``metadata``, ``spec`` and ``status``): it returns ``None`` when the expectation
holds and otherwise the first unmet expectation, saying what was expected and what was
found. The live runner retries it until its timeout; the offline replay calls it once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from gateweave.api import kinds
from gateweave.api.models import GATEWAY_GROUP
from gateweave_conformance.cases import CondSpec, ExpectStep, ListenerSpec, ParentSpec

GATEWAY_CLASS_TOKEN = "GATEWAY_CLASS"
ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"})
# Kinds whose status is per ancestor: BackendTLSPolicy and Envoy Gateway's policy kinds.
POLICY_KINDS = frozenset({"BackendTLSPolicy", *kinds.POLICY_KINDS})
CLUSTER_KINDS = frozenset({"GatewayClass"})


@dataclass(frozen=True)
class ExpectContext:
    controller_name: str
    gateway_class_name: str


def target(step: ExpectStep, ctx: ExpectContext) -> tuple[str, str, str]:
    """``(kind, namespace, name)`` of the object the step is about."""
    name = ctx.gateway_class_name if step.name == GATEWAY_CLASS_TOKEN else step.name
    if step.kind in CLUSTER_KINDS:
        return step.kind, "", name
    ns, sep, short = name.partition("/")
    if not sep:
        raise ValueError(
            f"expect {step.kind} {name!r}: a namespaced object is named namespace/name"
        )
    return step.kind, ns, short


# ---------------------------------------------------------------- small helpers


def _short(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _conds_str(conditions: Sequence[dict[str, Any]]) -> str:
    if not conditions:
        return "[]"
    parts = []
    for c in conditions:
        s = f"{c.get('type')}={c.get('status')}/{c.get('reason', '')}"
        if "observedGeneration" in c:
            s += f"@{c['observedGeneration']}"
        parts.append(s)
    return "[" + ", ".join(parts) + "]"


def condition_matches(spec: CondSpec, actual: dict[str, Any]) -> bool:
    return (
        actual.get("type") == spec.type
        and (spec.status is None or actual.get("status") == spec.status)
        and (spec.reason is None or actual.get("reason") == spec.reason)
        and (spec.message is None or actual.get("message") == spec.message)
    )


def missing_condition(
    expected: Sequence[CondSpec], actual: Sequence[dict[str, Any]]
) -> CondSpec | None:
    """The first expected condition not present in ``actual`` (subset semantics), or None."""
    for spec in expected:
        if not any(condition_matches(spec, c) for c in actual):
            return spec
    return None


def _conditions_of(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    conds = (obj or {}).get("conditions") or []
    return [c for c in conds if isinstance(c, dict)]


def _stale(conditions: Sequence[dict[str, Any]], generation: int) -> dict[str, Any] | None:
    for c in conditions:
        if c.get("observedGeneration") != generation:
            return c
    return None


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _ref_key(kind: str) -> tuple[str, str]:
    """(list field, reference field) of a route's or policy's per-parent status."""
    return ("ancestors", "ancestorRef") if kind in POLICY_KINDS else ("parents", "parentRef")


def own_entries(obj: dict[str, Any], kind: str, controller: str) -> list[dict[str, Any]]:
    """status.parents (routes) / status.ancestors (policies) entries of this controller."""
    list_field, _ = _ref_key(kind)
    entries = _status(obj).get(list_field) or []
    return [e for e in entries if isinstance(e, dict) and e.get("controllerName") == controller]


def _ref_str(ref: dict[str, Any]) -> str:
    kind = ref.get("kind", "Gateway")
    ns = ref.get("namespace")
    s = f"{kind} {ns + '/' if ns else ''}{ref.get('name')}"
    if ref.get("sectionName") is not None:
        s += f" section {ref['sectionName']}"
    if ref.get("port") is not None:
        s += f" port {ref['port']}"
    return s


def _entries_str(entries: Sequence[dict[str, Any]], ref_field: str) -> str:
    if not entries:
        return "none"
    return "; ".join(
        f"{_ref_str(e.get(ref_field) or {})} {_conds_str(_conditions_of(e))}" for e in entries
    )


def _listener_entry(obj: dict[str, Any], name: str) -> dict[str, Any] | None:
    for entry in _status(obj).get("listeners") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return None


def _listener_names(obj: dict[str, Any]) -> list[str]:
    return [str(e.get("name")) for e in _status(obj).get("listeners") or [] if isinstance(e, dict)]


# ---------------------------------------------------------------- the evaluation


def evaluate(step: ExpectStep, obj: dict[str, Any] | None, ctx: ExpectContext) -> str | None:
    """None when ``obj`` meets every expectation of ``step``; else the first unmet one."""
    kind, ns, name = target(step, ctx)
    who = f"{kind} {ns + '/' if ns else ''}{name}"
    if obj is None:
        return f"{who}: not found"
    generation = (obj.get("metadata") or {}).get("generation", 1)
    for check in _CHECKS:
        problem = check(step, obj, ctx, generation)
        if problem:
            return f"{who}: {problem}"
    return None


def _check_conditions(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.listener is not None:
        entry = _listener_entry(obj, step.listener)
        if entry is None:
            if step.conditions is None and step.attached_routes is None:
                return None
            return (
                f"expected a status.listeners entry named {step.listener!r}, found "
                f"{_listener_names(obj)}"
            )
        if step.conditions:
            miss = missing_condition(step.conditions, _conditions_of(entry))
            if miss:
                return (
                    f"listener {step.listener}: expected condition {miss}, found "
                    f"{_conds_str(_conditions_of(entry))}"
                )
        if step.attached_routes is not None and entry.get("attachedRoutes") != step.attached_routes:
            return (
                f"listener {step.listener}: expected attachedRoutes {step.attached_routes}, found "
                f"{entry.get('attachedRoutes')}"
            )
        return None
    if step.attached_routes is not None:
        return "attached_routes needs listener (case error)"
    if step.parent is not None:
        return _check_parent(step, obj, ctx)
    if step.conditions:
        actual = _conditions_of(_status(obj))
        miss = missing_condition(step.conditions, actual)
        if miss:
            return f"expected condition {miss} in status.conditions, found {_conds_str(actual)}"
    return None


def _parent_matches(step: ExpectStep, ref: dict[str, Any]) -> bool:
    assert step.parent is not None
    p_ns, sep, p_name = step.parent.partition("/")
    if not sep:
        p_ns, p_name = "", step.parent
    if ref.get("name") != p_name:
        return False
    if ref.get("namespace") not in (None, p_ns):
        return False
    if ref.get("kind", "Gateway") != (step.parent_kind or "Gateway"):
        return False
    return step.parent_section is None or ref.get("sectionName") == step.parent_section


def _check_parent(step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext) -> str | None:
    list_field, ref_field = _ref_key(step.kind)
    entries = own_entries(obj, step.kind, ctx.controller_name)
    matching = [e for e in entries if _parent_matches(step, e.get(ref_field) or {})]
    wanted = f"{step.parent_kind or 'Gateway'} {step.parent}" + (
        f" section {step.parent_section}" if step.parent_section is not None else ""
    )
    if not matching:
        return (
            f"expected a status.{list_field} entry of controller {ctx.controller_name} for "
            f"{wanted}, "
            f"found {_entries_str(entries, ref_field)}"
        )
    if step.conditions:
        for e in matching:
            if missing_condition(step.conditions, _conditions_of(e)) is None:
                return None
        miss = missing_condition(step.conditions, _conditions_of(matching[0]))
        return (
            f"{list_field} entry for {wanted}: expected condition {miss}, found "
            f"{_entries_str(matching, ref_field)}"
        )
    return None


def _check_latest_generation(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if not step.latest_generation:
        return None
    if step.kind in ROUTE_KINDS or step.kind in POLICY_KINDS:
        list_field, ref_field = _ref_key(step.kind)
        for e in own_entries(obj, step.kind, ctx.controller_name):
            stale = _stale(_conditions_of(e), generation)
            if stale is not None:
                return (
                    f"expected every condition at observedGeneration {generation} "
                    "(metadata.generation); "
                    f"{list_field} entry {_ref_str(e.get(ref_field) or {})} has "
                    f"{stale.get('type')} "
                    f"at observedGeneration {stale.get('observedGeneration')}"
                )
        return None
    stale = _stale(_conditions_of(_status(obj)), generation)
    if stale is not None:
        return (
            f"expected every status.conditions entry at observedGeneration {generation} "
            "(metadata.generation); "
            f"{stale.get('type')} has observedGeneration {stale.get('observedGeneration')}"
        )
    return None


def _check_has_address(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if not step.has_address:
        return None
    addresses = _status(obj).get("addresses") or []
    if any(isinstance(a, dict) and a.get("type") for a in addresses):
        return None
    return f"expected status.addresses to have an entry with a type, found {_short(addresses)}"


def _check_addresses(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.addresses is None:
        return None
    actual = [a for a in _status(obj).get("addresses") or [] if isinstance(a, dict)]
    for want in step.addresses:
        if not any(
            a.get("value") == want.value
            and (want.type is None or a.get("type", "IPAddress") == want.type)
            for a in actual
        ):
            shown = {"type": want.type, "value": want.value} if want.type else {"value": want.value}
            return f"expected status.addresses to contain {_short(shown)}, found {_short(actual)}"
    return None


def _check_attached_listeners(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.attached_listeners is None:
        return None
    found = _status(obj).get("attachedListenerSets") or 0
    if found != step.attached_listeners:
        return f"expected status.attachedListenerSets {step.attached_listeners}, found {found}"
    return None


def _check_listener_count(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.listener_count is None:
        return None
    names = _listener_names(obj)
    if len(names) != step.listener_count:
        return (
            f"expected {step.listener_count} status.listeners entries, found {len(names)} {names}"
        )
    return None


def _check_zero_routes(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if not step.zero_routes:
        return None
    listeners = [entry for entry in _status(obj).get("listeners") or [] if isinstance(entry, dict)]
    if not listeners or (len(listeners) == 1 and listeners[0].get("attachedRoutes") == 0):
        return None
    found = [(entry.get("name"), entry.get("attachedRoutes")) for entry in listeners]
    return (
        "expected no status.listeners or exactly one with attachedRoutes 0, found (name, "
        f"attachedRoutes) {found}"
    )


def _check_no_accepted_parents(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if not step.no_accepted_parents:
        return None
    list_field, ref_field = _ref_key(step.kind)
    entries = own_entries(obj, step.kind, ctx.controller_name)
    if not entries:
        return None
    accepted_false = CondSpec(type="Accepted", status="False")
    if (
        len(entries) == 1
        and missing_condition([accepted_false], _conditions_of(entries[0])) is None
    ):
        return None
    return (
        f"expected no status.{list_field} entry of this controller or exactly one with "
        "Accepted=False, "
        f"found {_entries_str(entries, ref_field)}"
    )


def _parent_entry_matches(
    want: ParentSpec, entry: dict[str, Any], ref_field: str, namespace_required: bool
) -> bool:
    ref = entry.get(ref_field) or {}
    w = want.parent_ref
    if w.group is not None and ref.get("group") != w.group:
        return False
    if w.kind is not None and ref.get("kind") != w.kind:
        return False
    if ref.get("name") != w.name:
        return False
    if w.namespace is not None:
        if namespace_required:
            if ref.get("namespace") != w.namespace:
                return False
        elif ref.get("namespace") not in (None, w.namespace):
            return False
    if w.section_name is not None and ref.get("sectionName") != w.section_name:
        return False
    if w.port is not None and ref.get("port") != w.port:
        return False
    return missing_condition(want.conditions, _conditions_of(entry)) is None


def _check_parents(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.parents is None:
        return None
    list_field, ref_field = _ref_key(step.kind)
    entries = own_entries(obj, step.kind, ctx.controller_name)
    for want in step.parents:
        if not any(
            _parent_entry_matches(want, e, ref_field, step.namespace_required) for e in entries
        ):
            w = want.parent_ref
            shown = {k: v for k, v in msgspec.to_builtins(w).items() if v is not None}
            conds = ", ".join(str(c) for c in want.conditions) or "any"
            return (
                f"expected a status.{list_field} entry of controller {ctx.controller_name} with "
                f"{ref_field} "
                f"{_short(shown)} (namespace "
                f"{'required' if step.namespace_required else 'optional'}) and "
                f"conditions {conds}; found {_entries_str(entries, ref_field)}"
            )
    return None


def _kinds_str(kinds: Sequence[Any]) -> str:
    return (
        "["
        + ", ".join(
            f"{k.get('group', GATEWAY_GROUP)}/{k.get('kind')}" for k in kinds if isinstance(k, dict)
        )
        + "]"
    )


def _check_one_listener(want: ListenerSpec, entry: dict[str, Any]) -> str | None:
    actual_kinds = [k for k in entry.get("supportedKinds") or [] if isinstance(k, dict)]
    if want.supported_kinds is not None:
        if not want.supported_kinds and actual_kinds:
            return (
                f"listener {want.name}: expected empty supportedKinds, found "
                f"{_kinds_str(actual_kinds)}"
            )
        for k in want.supported_kinds:
            group = k.group if k.group is not None else GATEWAY_GROUP
            if not any(
                a.get("kind") == k.kind and a.get("group", GATEWAY_GROUP) == group
                for a in actual_kinds
            ):
                return (
                    f"listener {want.name}: expected supportedKinds to include {group}/{k.kind}, "
                    f"found {_kinds_str(actual_kinds)}"
                )
    if want.attached_routes is not None and entry.get("attachedRoutes") != want.attached_routes:
        return (
            f"listener {want.name}: expected attachedRoutes {want.attached_routes}, found "
            f"{entry.get('attachedRoutes')}"
        )
    miss = missing_condition(want.conditions, _conditions_of(entry))
    if miss:
        return (
            f"listener {want.name}: expected condition {miss}, found "
            f"{_conds_str(_conditions_of(entry))}"
        )
    return None


def _check_listeners(
    step: ExpectStep, obj: dict[str, Any], ctx: ExpectContext, generation: int
) -> str | None:
    if step.listeners is None:
        return None
    names = _listener_names(obj)
    if len(names) != len(step.listeners):
        return (
            f"expected {len(step.listeners)} status.listeners entries "
            f"{[w.name for w in step.listeners]}, found {len(names)} {names}"
        )
    for want in step.listeners:
        entry = _listener_entry(obj, want.name)
        if entry is None:
            return f"expected a status.listeners entry named {want.name!r}, found {names}"
        problem = _check_one_listener(want, entry)
        if problem:
            return problem
    return None


_CHECKS = (
    _check_conditions,
    _check_latest_generation,
    _check_has_address,
    _check_addresses,
    _check_attached_listeners,
    _check_listener_count,
    _check_zero_routes,
    _check_no_accepted_parents,
    _check_parents,
    _check_listeners,
)
