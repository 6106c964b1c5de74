"""The standalone status sink: every object's status kept here (the admin API serves it).

:class:`LocalStatusSink` writes only what differs from what it holds. It also keeps, for
each status it holds, the computed status it was merged from: an object whose computed
status equals that one is skipped without merging (merging again would give back what it
holds, times included). When translate stops reporting on an object that still exists (a
Gateway whose GatewayClass is gone or no longer ours), the sink withdraws what it wrote: a
route's or policy's entries of ours are dropped (other controllers' stay), any other
object's status reverts to the one it came with.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateweave.api.kinds import Key
from gateweave.sinks.statusmerge import (
    Status,
    StatusWrites,
    merge_status,
    not_the_same,
    owned_list,
)


@dataclass(eq=False)
class LocalStatusSink(StatusWrites):
    """Keeps the status of every object (standalone mode) and writes only differences.

    ``on_write(key, status)`` is told of every write. The sink never touches the store: our
    own status writes cannot cause a translation.
    """

    _status: dict[Key, Status] = field(default_factory=dict, init=False)
    # For each key of ``_status``: the computed status it was merged from (when known).
    _computed: dict[tuple[str, str, str], Mapping[str, Any]] = field(
        default_factory=dict, init=False
    )

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
        # Skipped: what is held was merged from the very same computed status, or from an
        # equal one: merging again would give it back.
        todo = [
            k for k in not_the_same(computed, last) if k not in held or last.get(k) != computed[k]
        ]
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
        # What is held for a key translate no longer reports on is withdrawn. Every key
        # skipped above is held (``_computed``'s keys are), so when the held keys are as many
        # as the computed ones held, there is none: no pass over them.
        reported = len(computed) - sum(1 for k in todo if k not in held)
        if len(held) != reported:
            for key in sorted(k for k in held if k not in computed):
                self._withdraw(key, stored(key), written)
        return written

    def _withdraw(self, key: Key, given: Mapping[str, Any] | None, written: list[Key]) -> None:
        """Translate no longer reports on ``key``: take back what this controller wrote."""
        self._computed.pop(key, None)
        current = self._status[key]
        shared = owned_list(key.kind)
        kept: Status = {}
        if shared is not None:
            kept = {
                **current,
                shared: [
                    e
                    for e in current.get(shared) or []
                    if not (isinstance(e, dict) and e.get("controllerName") == self.controller_name)
                ],
            }
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
        self._count_write(key, status)

    def retain(self, keys: Collection[Key]) -> None:
        """Forget the statuses of objects that no longer exist."""
        for key in [k for k in self._status if k not in keys]:
            del self._status[key]
            self._computed.pop(key, None)
