"""Refusal by field name: every field a policy sets that no feature of gateweave implements.

A policy kind declares the spec field paths it implements (:class:`~gateweave.translate.
policies.kinds.PolicyKind` ``implemented``), written without list indices
(``rateLimit.local.rules.limit.requests``). A path is understood when it is listed, or when
a listed entry ``prefix.*`` covers it; the children of a listed object must be listed too,
so a new field added to a feature's object is refused until someone implements it. Every set
field that is not understood is named, with its indices (``spec.rateLimit.local.rules[0].cost``),
and the policy is not accepted: never silently ignored.

Values the CRD defaults inside an object the user set (``invert: false``) are fields like any
other: a feature that handles the object lists them and judges their value itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Every policy kind's targeting fields: the attachment stage reads them.
TARGETING = frozenset({"targetRef.*", "targetRefs.*", "targetSelectors.*"})


def unimplemented(spec: Any, implemented: frozenset[str]) -> list[str]:
    """The set fields of ``spec`` (a stored policy spec) outside ``implemented``, as
    ``spec.``-rooted paths with list indices, in the order they appear."""
    out: list[str] = []
    _walk(spec, "", "spec", implemented | TARGETING, out)
    return out


def _walk(value: Any, path: str, shown: str, implemented: frozenset[str], out: list[str]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if any(path_covers(entry, sub) for entry in implemented):
                continue  # the whole subtree is understood
            if sub in implemented:
                _walk(child, sub, f"{shown}.{key}", implemented, out)
            else:
                out.append(f"{shown}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, path, f"{shown}[{i}]", implemented, out)


def path_covers(entry: str, path: str) -> bool:
    """``entry`` (``a.*``) covers ``path`` and everything under it."""
    return entry.endswith(".*") and (path == entry[:-2] or path.startswith(entry[:-1]))


def refusal(paths: Iterable[str]) -> str:
    """The message naming the refused fields (Envoy Gateway's Accepted=False, reason Invalid)."""
    names = list(paths)
    verb = "is" if len(names) == 1 else "are"
    return f"{', '.join(names)} {verb} not supported by gateweave"
