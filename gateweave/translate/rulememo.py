"""Pure pieces of route rules, built once per translation and shared by every rule that has them.

Many routes carry the same header matches, header modifiers or weighted backends; their IR is
a pure function of the (immutable) model value, so one translation builds each distinct one
once, and fewer objects are allocated. The memo
lives in the :class:`~gateweave.translate.backends.BackendResolver` of a translation and goes
with it: nothing is kept from one translation to the next.

A piece that cannot be implemented is remembered as its error message, so each rule that has
it still gets its own :class:`~gateweave.translate.filters.RuleError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.regex import re2_error


class NamedMatch(Protocol):
    """A header or query parameter match of any route kind."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str: ...


class RuleMemo:
    """Per-translation memo tables (keys are model values: frozen, hashable Structs)."""

    __slots__ = ("header_mods", "headers", "query_params", "response_mods", "shapes", "weighted")

    def __init__(self) -> None:
        self.headers: dict[Sequence[NamedMatch], tuple[ir.StringMatch, ...] | str] = {}
        self.query_params: dict[Sequence[NamedMatch], tuple[ir.StringMatch, ...] | str] = {}
        self.header_mods: dict[m.HTTPHeaderFilter, ir.HeaderMods] = {}
        self.response_mods: dict[m.HTTPHeaderFilter, ir.HeaderMods] = {}  # checked for responses
        # A backend and its weight without filters of its own: (cluster name, weight) -> IR
        self.weighted: dict[tuple[str, int], ir.WeightedCluster] = {}
        # A precedence key's match shape (attachment.PrecedenceKey) -> its one shared instance
        self.shapes: dict[tuple[int, ...], tuple[int, ...]] = {}

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shared instance of a precedence key's ``shape`` (equal shapes: one tuple)."""
        return self.shapes.setdefault(shape, shape)

    def weighted_cluster(self, cluster: str, weight: int) -> ir.WeightedCluster:
        """The shared IR of a backend of ``weight`` without filters of its own."""
        key = (cluster, weight)
        hit = self.weighted.get(key)
        if hit is None:
            hit = self.weighted[key] = ir.WeightedCluster(cluster=cluster, weight=weight)
        return hit

    def header_matches(self, entries: Sequence[NamedMatch]) -> tuple[ir.StringMatch, ...] | str:
        """:func:`string_matches` of header matches (a tuple of them), once per distinct value."""
        hit = self.headers.get(entries)
        if hit is None:
            hit = self.headers[entries] = string_matches("header", entries, True)
        return hit

    def query_param_matches(
        self, entries: Sequence[NamedMatch]
    ) -> tuple[ir.StringMatch, ...] | str:
        """:func:`string_matches` of query parameter matches, once per distinct value."""
        hit = self.query_params.get(entries)
        if hit is None:
            hit = self.query_params[entries] = string_matches("query param", entries, False)
        return hit


def string_matches(
    what: str, entries: Sequence[NamedMatch], fold_case: bool
) -> tuple[ir.StringMatch, ...] | str:
    """Header (``fold_case``: names compare case-insensitively) or query parameter matches.

    Only the first entry of an equivalent name counts. Returns the error message of the first
    entry that cannot be implemented instead.
    """
    out: list[ir.StringMatch] = []
    seen: set[str] = set()
    for e in entries:
        name = e.name.lower() if fold_case else e.name
        if name in seen:
            continue
        seen.add(name)
        if e.type not in ("Exact", "RegularExpression"):
            return f"{what} match type {e.type} is not supported"
        if e.type == "RegularExpression":
            err = re2_error(e.value)
            if err:
                return f"invalid {what} regular expression {e.value!r}: {err}"
        out.append(ir.StringMatch(name=e.name, type=e.type, value=e.value))
    return tuple(out)
