"""The custom resources (Gateway API and Envoy Gateway kinds) as stored, each with its
status: what ``gateweave translate`` prints and what the admin API serves at ``/api/objects``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gateweave.api.decode import Decoded
from gateweave.api.kinds import KINDS, Key
from gateweave.sinks.statusmerge import merge_status

_KIND_ORDER = {kind: i for i, kind in enumerate(KINDS)}


def _key(decoded: Decoded) -> Key:
    meta = decoded.model.metadata
    return Key(decoded.model.kind, meta.namespace, meta.name)


def render_objects(
    decoded_objects: Iterable[Decoded],
    status_of: Callable[[Key, Decoded], Mapping[str, Any] | None],
) -> list[dict[str, Any]]:
    """Every custom resource, with ``status_of(key, obj)`` as its status (None: the
    status it came with), sorted by (kind order in KINDS, namespace, name)."""
    out: list[tuple[tuple[int, str, str], dict[str, Any]]] = []
    for decoded in decoded_objects:
        key = _key(decoded)
        info = KINDS.get(key.kind)
        if info is None or not info.custom:
            continue
        status = status_of(key, decoded)
        obj = dict(decoded.raw)
        if status is not None:
            obj.pop("status", None)
            obj["status"] = dict(status)
        out.append(((_KIND_ORDER[key.kind], key.namespace, key.name), obj))
    out.sort(key=lambda item: item[0])
    return [obj for _, obj in out]


def objects_with_status(
    decoded_objects: Iterable[Decoded],
    statuses: Mapping[tuple[str, str, str], Mapping[str, Any]],
    controller_name: str,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Every custom resource with translate's ``statuses`` merged into the status it
    came with (see :func:`gateweave.sinks.statusmerge.merge_status`); objects translate gave no
    status keep theirs. ``now=None`` leaves ``lastTransitionTime`` out where it changed."""

    def status_of(key: Key, decoded: Decoded) -> Mapping[str, Any] | None:
        computed = statuses.get(key)
        if computed is None:
            return None
        current = decoded.raw.get("status")
        return merge_status(
            key.kind,
            current if isinstance(current, dict) else None,
            computed,
            controller_name,
            now,
            namespace=key.namespace,
        )

    return render_objects(decoded_objects, status_of)
