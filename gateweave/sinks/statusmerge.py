"""Statuses: merging what translate computed into what is stored (both status sinks use it).

Translate computes each object's status without ``lastTransitionTime`` and with only
this controller's entries. :func:`merge_status` turns that into the status to store:

* route ``parents`` and policy (BackendTLSPolicy, Envoy Gateway's) ``ancestors`` entries of other
controllers
  (by ``controllerName``) are kept; ours are replaced by the computed ones (an entry of
  ours that is no longer computed disappears);
* a condition keeps its ``lastTransitionTime`` while its status is unchanged, and gets
  ``now`` when it changes or appears. Conditions are scoped: the object's own, each
  listener's (by name), each parent entry's (by parentRef).

"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import compress
from operator import is_not
from typing import Any

from gateweave.api.kinds import POLICY_KINDS, ROUTE_KINDS, Key
from gateweave.api.models import GATEWAY_GROUP
from gateweave.metrics import Metrics

Status = dict[str, Any]

# Lists of per-parent entries, and the field naming the parent in each entry.
_REF_FIELD = {"parents": "parentRef", "ancestors": "ancestorRef"}


def utc_now() -> str:
    """Now as Kubernetes writes times (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owned_list(kind: str) -> str | None:
    """The per-parent list of a kind's status that several controllers share."""
    if kind in ROUTE_KINDS:
        return "parents"
    if kind == "BackendTLSPolicy" or kind in POLICY_KINDS:
        return "ancestors"
    return None


def _ref_id(entry: Any, ref_field: str, namespace: str) -> tuple[Any, ...] | None:
    ref = entry.get(ref_field) if isinstance(entry, dict) else None
    if not isinstance(ref, dict):
        return None
    return (
        ref.get("group", GATEWAY_GROUP),
        ref.get("kind", "Gateway"),
        ref.get("namespace") or namespace,
        ref.get("name"),
        ref.get("sectionName"),
        ref.get("port"),
    )


def _stamp_conditions(conditions: Any, previous: Any, now: str | None) -> Any:
    if not isinstance(conditions, list):
        return conditions
    before = {
        c.get("type"): c
        for c in (previous if isinstance(previous, list) else [])
        if isinstance(c, dict)
    }
    out = []
    for cond in conditions:
        if not isinstance(cond, dict):
            out.append(cond)
            continue
        stamped = {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        prev = before.get(cond.get("type"))
        when = now
        if (
            prev is not None
            and prev.get("status") == cond.get("status")
            and prev.get("lastTransitionTime")
        ):
            when = prev["lastTransitionTime"]
        if when is not None:
            stamped["lastTransitionTime"] = when
        out.append(stamped)
    return out


def _stamp(obj: Any, previous: Any, now: str | None, namespace: str) -> Any:
    """``obj`` with every condition list stamped against the same scope in ``previous``."""
    if not isinstance(obj, dict):
        return obj
    prev: dict[str, Any] = previous if isinstance(previous, dict) else {}
    out: dict[str, Any] = {}
    for field, value in obj.items():
        if field == "conditions":
            out[field] = _stamp_conditions(value, prev.get("conditions"), now)
        elif field == "listeners" and isinstance(value, list):
            before = {e.get("name"): e for e in prev.get("listeners") or [] if isinstance(e, dict)}
            out[field] = [
                _stamp(
                    e, before.get(e.get("name")) if isinstance(e, dict) else None, now, namespace
                )
                for e in value
            ]
        elif field in _REF_FIELD and isinstance(value, list):
            ref_field = _REF_FIELD[field]
            before = {}
            for e in prev.get(field) or []:
                rid = _ref_id(e, ref_field, namespace)
                if rid is not None:
                    before.setdefault((rid, e.get("controllerName")), e)
            out[field] = [
                _stamp(
                    e,
                    before.get((_ref_id(e, ref_field, namespace), e.get("controllerName")))
                    if isinstance(e, dict)
                    else None,
                    now,
                    namespace,
                )
                for e in value
            ]
        else:
            out[field] = value
    return out


def not_the_same(
    computed: Mapping[tuple[str, str, str], Any], last: Mapping[tuple[str, str, str], Any]
) -> Iterator[tuple[str, str, str]]:
    """The keys of ``computed`` whose status is not the very object ``last`` holds for them.
    Translate hands out the same status object while an object's status does not change, so
    the others need no work; the identity test runs in C (``map``, ``compress``), and a
    :class:`Key` (a NamedTuple) hashes and compares as the plain tuple."""
    return compress(computed, map(is_not, map(last.get, computed), computed.values()))


def merge_status(
    kind: str,
    current_status: Mapping[str, Any] | None,
    computed_status: Mapping[str, Any],
    controller_name: str,
    now: str | None,
    *,
    namespace: str = "",
) -> Status:
    """The status to store, from the stored one and the one translate computed.

    ``now``: the time stamped on conditions that changed (None: leave it out).
    ``namespace``: the object's namespace, which a parentRef without one refers to.
    """
    current = dict(current_status or {})
    merged: Status = _stamp(dict(computed_status), current, now, namespace)
    shared = owned_list(kind)
    if shared is None:
        return merged
    theirs = [
        e
        for e in current.get(shared) or []
        if not (isinstance(e, dict) and e.get("controllerName") == controller_name)
    ]
    ours = [
        e
        for e in merged.get(shared) or []
        if isinstance(e, dict) and e.get("controllerName", controller_name) == controller_name
    ]
    merged[shared] = theirs + ours
    return merged


@dataclasses.dataclass(eq=False)
class StatusWrites:
    """What both status sinks keep besides statuses: whose entries are ours (``controller_name``,
    for :func:`merge_status`), the clock that stamps a changed condition, and every write
    counted (``writes``, the status-writes metric, and ``on_write(key, status)``)."""

    controller_name: str
    clock: Callable[[], str] = dataclasses.field(default=utc_now, kw_only=True)
    on_write: Callable[[Key, Status], None] | None = dataclasses.field(default=None, kw_only=True)
    metrics: Metrics | None = dataclasses.field(default=None, kw_only=True)
    writes: int = dataclasses.field(default=0, init=False)

    def _count_write(self, key: Key, status: Status) -> None:
        self.writes += 1
        if self.metrics is not None:
            self.metrics.status_writes.inc()
        if self.on_write is not None:
            self.on_write(key, status)
