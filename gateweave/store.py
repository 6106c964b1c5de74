"""The current objects by key, with API-server-like bookkeeping and change notification.

The store keeps, per :class:`~gateweave.api.kinds.Key`, the object as stored (``raw``,
kept packed as msgpack bytes: translation reads only the model) and its typed model. Like
the API server it counts ``metadata.generation`` (1 on create, +1 on every spec change,
unchanged when only metadata or status change) unless the provider is the API server
itself, whose metadata is kept as given.

Two kinds of change are told apart:

* the *model* changed (what :func:`gateweave.translate.translate` sees: spec, labels,
  annotations, generation...): listeners hear ``model_changed=True`` and
  :attr:`Store.changed` is set;
* only the stored form changed (a status, a resourceVersion): the new form is stored
  and listeners hear ``model_changed=False`` - there is nothing to translate.

Re-applying an identical object is no change at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from gateweave.api.decode import Decoded
from gateweave.api.kinds import Key
from gateweave.snapshot import ChangeLog, Snapshot

# Fields of metadata the store itself maintains: they never make an apply a change.
_BOOKKEEPING = ("generation", "resourceVersion")


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored object. ``decoded.model`` carries the store's generation; ``decoded`` is
    kept packed (:meth:`Decoded.packed`): ``raw`` is a new dict on each read."""

    decoded: Decoded
    generation: int
    resource_version: int
    source: str = ""

    @property
    def raw(self) -> dict[str, Any]:
        return self.decoded.raw

    @property
    def status(self) -> Any:
        """``raw.get("status")``, without unpacking the rest of the object."""
        return self.decoded.status

    @property
    def model(self) -> Any:
        return self.decoded.model


@dataclass(frozen=True)
class Change:
    key: Key
    op: str  # "added" | "updated" | "deleted"
    model_changed: bool


Listener = Callable[[Change], None]


def key_of(decoded: Decoded) -> Key:
    meta = decoded.model.metadata
    return Key(decoded.model.kind, meta.namespace, meta.name)


def _without(raw: dict[str, Any], *top: str) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in top}


def _content(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` without the metadata fields the store maintains."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return raw
    return {**raw, "metadata": _without(meta, *_BOOKKEEPING)}


def _normalize_model(model: Any, generation: int) -> Any:
    """The model as translate sees it: the store's generation, no resourceVersion (it
    changes on every write, status included, and means nothing to a translation)."""
    meta = model.metadata
    if meta.generation == generation and not meta.resource_version:
        return model
    new_meta = msgspec.structs.replace(meta, generation=generation, resource_version="")
    return msgspec.structs.replace(model, metadata=new_meta)


class Store:
    """Objects by key. Not thread-safe: use it from the event loop's thread."""

    def __init__(self) -> None:
        self._objects: dict[Key, Stored] = {}
        self._by_kind: dict[str, dict[tuple[str, str], Any]] = {}
        self._unsorted: set[str] = set()  # kinds that gained a key since the last snapshot
        self._listeners: list[Listener] = []
        self._version = 0
        self.changelog = (
            ChangeLog()
        )  # keys whose model changed: lets translation diff snapshots cheaply
        self.changed = asyncio.Event()  # set when a model changed; consumers clear it

    # ------------------------------------------------------------ reading

    @property
    def resource_version(self) -> int:
        """Counts every stored change (model or not)."""
        return self._version

    def get(self, key: Key) -> Stored | None:
        return self._objects.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._objects))

    def keys(self) -> list[Key]:
        return list(self._objects)

    def items(self) -> Iterator[tuple[Key, Stored]]:
        return iter(list(self._objects.items()))

    def decoded_objects(self) -> list[Decoded]:
        return [s.decoded for s in self._objects.values()]

    def snapshot(self) -> Snapshot:
        """The current models, each kind's map in (namespace, name) order whatever order
        the events came in. Shallow copies of the per-kind maps: models are immutable
        and shared, so this costs one dict copy per kind, and later changes to the store
        never show through a snapshot already handed out."""
        for kind in self._unsorted:
            self._by_kind[kind] = dict(sorted(self._by_kind[kind].items()))
        self._unsorted.clear()
        snap = Snapshot(changelog=self.changelog, position=self.changelog.position)
        for kind, objs in self._by_kind.items():
            snap.by_kind(kind).update(objs)
        return snap

    # ------------------------------------------------------------ notification

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every change; returns a function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _notify(self, change: Change) -> None:
        if change.model_changed:
            self.changed.set()
        for listener in list(self._listeners):
            listener(change)

    # ------------------------------------------------------------ writing

    def apply(
        self, decoded: Decoded, *, source: str = "", authoritative: bool = False
    ) -> Change | None:
        """Create or update an object; returns the change, or None when nothing changed.

        ``authoritative``: the provider's metadata (generation) is the truth (Kubernetes);
        otherwise the store counts generations like the API server does.
        """
        key = key_of(decoded)
        old = self._objects.get(key)
        raw = given = decoded.raw
        old_raw = old.raw if old is not None else {}  # (unpacked once)
        meta: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
        if authoritative:
            generation = int(meta.get("generation") or 1)
        elif old is None:
            generation = 1
        elif _without(old_raw, "metadata", "status") == _without(raw, "metadata", "status"):
            generation = old.generation
        else:
            generation = old.generation + 1
        if old is not None and old.generation == generation and _content(old_raw) == _content(raw):
            old_rv = old_raw.get("metadata", {}).get("resourceVersion")
            if not (authoritative and old_rv != meta.get("resourceVersion")):
                return None  # identical re-apply
        if not authoritative and meta.get("generation") != generation:
            raw = {**raw, "metadata": {**meta, "generation": generation}}
        model = _normalize_model(decoded.model, generation)
        model_changed = old is None or old.model != model
        if old is not None and not model_changed:
            model = old.model  # keep sharing the same instance
        self._version += 1
        kept = decoded if raw is given and model is decoded.model else Decoded(raw, model)
        self._objects[key] = Stored(kept.packed(), generation, self._version, source)
        if old is None:
            self._unsorted.add(key.kind)
        self._by_kind.setdefault(key.kind, {})[(key.namespace, key.name)] = model
        if model_changed:
            self.changelog.record(key)
        change = Change(key, "added" if old is None else "updated", model_changed)
        self._notify(change)
        return change

    def delete(self, key: Key) -> Change | None:
        if self._objects.pop(key, None) is None:
            return None
        self._by_kind[key.kind].pop((key.namespace, key.name), None)
        self.changelog.record(key)
        self._version += 1
        change = Change(key, "deleted", True)
        self._notify(change)
        return change
