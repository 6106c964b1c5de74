"""A route's rules, one by one: each rule translated, or dropped with the reason it cannot be.

HTTPRoute and GRPCRoute share this loop; each passes its own one-rule translation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gateweave import ir
from gateweave.translate.attachment import PrecedenceKey, RouteTranslation
from gateweave.translate.backends import BackendResolver
from gateweave.translate.context import SortKey
from gateweave.translate.filters import RuleError

Order = SortKey
# (translation, resolver, rule index, rule, IR route name prefix, route order, keys, cluster
# names) -> appends the precedence keys of the rule's IR routes to ``keys`` and the names of the
# clusters they send to to ``cluster names``, or raises RuleError before appending any.
OneRule = Callable[
    [RouteTranslation, BackendResolver, int, Any, str, Order, list[PrecedenceKey], list[str]], None
]


def translate_rules(
    kind: str,
    route: Any,
    rules: Sequence[Any],
    resolver: BackendResolver,
    order: Order,
    one_rule: OneRule,
) -> RouteTranslation:
    """``order``: the route's :func:`~gateweave.translate.context.sort_key`."""
    tr = RouteTranslation(kind=kind, route=route, order=order)
    tr.rule_count = len(rules)
    # Per-route invariants of every rule's IR routes: the name prefix and the precedence tie-break.
    meta = route.metadata
    prefix = ir.route_prefix(kind, meta.namespace, meta.name)
    # What the rules make, kept by the translation in its final form only (memory at scale:
    # docs/benchmarks.md, eighth round): the keys as the sorted routes, the names as a tuple.
    keys: list[PrecedenceKey] = []
    used: list[str] = []
    resolver.clusters.clear()
    for i, rule in enumerate(rules):
        try:
            one_rule(tr, resolver, i, rule, prefix, order, keys, used)
        except RuleError as err:
            tr.drop_rule(f"rule {rule.name or i}", str(err), err.incompatible_filters)
    tr.keep_sorted(keys)
    tr.keep_clusters(resolver.clusters)
    if used:
        tr.http_clusters = tuple(used)
    return tr
