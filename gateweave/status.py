"""Statuses: merging what translate computed into what is stored, and the status sink.

Translate computes each object's status without ``lastTransitionTime`` and with only
this controller's entries. :func:`merge_status` turns that into the status to store:

* route ``parents`` and BackendTLSPolicy ``ancestors`` entries of other controllers
  (by ``controllerName``) are kept; ours are replaced by the computed ones (an entry of
  ours that is no longer computed disappears);
* a condition keeps its ``lastTransitionTime`` while its status is unchanged, and gets
  ``now`` when it changes or appears. Conditions are scoped: the object's own, each
  listener's (by name), each parent entry's (by parentRef).

The :class:`StatusSink` (standalone mode) keeps every object's status and writes only
what differs from what it holds. It also keeps, for each status it holds, the computed
status it was merged from: an object whose computed status equals that one is skipped
without merging (merging again would give back what it holds, times included). When
translate stops reporting on an object that still exists (a Gateway whose GatewayClass
is gone or no longer ours), the sink withdraws what it wrote: a route's or policy's
entries of ours are dropped (other controllers' stay), any other object's status reverts
to the one it came with.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from gateweave.api.kinds import ROUTE_KINDS, Key
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
    if kind == "BackendTLSPolicy":
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
        c.get("type"): c for c in (previous if isinstance(previous, list) else []) if isinstance(c, dict)
    }
    out = []
    for cond in conditions:
        if not isinstance(cond, dict):
            out.append(cond)
            continue
        stamped = {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        prev = before.get(cond.get("type"))
        when = now
        if prev is not None and prev.get("status") == cond.get("status") and prev.get("lastTransitionTime"):
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
                _stamp(e, before.get(e.get("name")) if isinstance(e, dict) else None, now, namespace)
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
                _stamp(e, before.get((_ref_id(e, ref_field, namespace), e.get("controllerName")))
                       if isinstance(e, dict) else None, now, namespace)
                for e in value
            ]
        else:
            out[field] = value
    return out


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
        e for e in current.get(shared) or []
        if not (isinstance(e, dict) and e.get("controllerName") == controller_name)
    ]
    ours = [
        e for e in merged.get(shared) or []
        if isinstance(e, dict) and e.get("controllerName", controller_name) == controller_name
    ]
    merged[shared] = theirs + ours
    return merged


class StatusSink:
    """Keeps the status of every object (standalone mode) and writes only differences.

    ``on_write(key, status)`` is told of every write (a Kubernetes sink would patch the
    status subresource there). The sink never touches the store: our own status writes
    cannot cause a translation.
    """

    def __init__(
        self,
        controller_name: str,
        *,
        clock: Callable[[], str] = utc_now,
        on_write: Callable[[Key, Status], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.controller_name = controller_name
        self.clock = clock
        self.on_write = on_write
        self.metrics = metrics
        self._status: dict[Key, Status] = {}
        # For each key of ``_status``: the computed status it was merged from (when known).
        self._computed: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self.writes = 0

    def get(self, key: Key) -> Status | None:
        return self._status.get(key)

    @property
    def statuses(self) -> Mapping[Key, Status]:
        return self._status

    def publish(
        self,
        computed: Mapping[tuple[str, str, str], Mapping[str, Any]],
        stored: Callable[[Key], Mapping[str, Any] | None] = lambda _key: None,
    ) -> list[Key]:
        """Merge and write the computed statuses; returns the keys written.

        ``stored(key)``: the object's status as given with the object (used until the
        sink has written it once).
        """
        now = self.clock()
        written: list[Key] = []
        last = self._computed
        held = self._status
        # Skipped: what is held was merged from an equal computed status, so merging
        # again would give it back. (A Key is a NamedTuple: it hashes and compares as
        # the plain tuple ``k``.)
        todo = [k for k, status in computed.items() if k not in held or last.get(k) != status]
        for k in sorted(todo):
            key = Key(*k)
            status = computed[k]
            current: Mapping[str, Any] | None = held[key] if key in held else stored(key)
            merged = merge_status(
                key.kind, current, status, self.controller_name, now, namespace=key.namespace
            )
            if merged == dict(current or {}):
                if key in held:
                    last[key] = status
                continue
            held[key] = merged
            last[key] = status
            self._written(key, merged, written)
        for key in sorted(k for k in self._status if k not in computed):
            self._withdraw(key, stored(key), written)
        return written

    def _withdraw(self, key: Key, given: Mapping[str, Any] | None, written: list[Key]) -> None:
        """Translate no longer reports on ``key``: take back what this controller wrote."""
        self._computed.pop(key, None)
        current = self._status[key]
        shared = owned_list(key.kind)
        kept: Status = {}
        if shared is not None:
            kept = {**current, shared: [
                e for e in current.get(shared) or []
                if not (isinstance(e, dict) and e.get("controllerName") == self.controller_name)
            ]}
        before = dict(given or {})
        if shared is None or kept == before or (not before and not any(kept.values())):
            del self._status[key]  # back to the status the object came with
            if current != before:
                self._written(key, before, written)
        elif kept != current:
            self._status[key] = kept
            self._written(key, kept, written)

    def _written(self, key: Key, status: Status, written: list[Key]) -> None:
        written.append(key)
        self.writes += 1
        if self.metrics is not None:
            self.metrics.status_writes.inc()
        if self.on_write is not None:
            self.on_write(key, status)

    def retain(self, keys: Collection[Key]) -> None:
        """Forget the statuses of objects that no longer exist."""
        for key in [k for k in self._status if k not in keys]:
            del self._status[key]
            self._computed.pop(key, None)
