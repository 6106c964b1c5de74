"""A deterministic layered layout of the graph: one column per layer, nodes near their neighbours.

Columns are the nodes' ``column`` (empty ones take no room). Within a column, a node wants
the mean height of its neighbours in the columns already placed (the barycentre heuristic
that keeps edges short and crossings few), nodes are taken in that order (ties by id), and
each is put at the height it wants or just below the one before. One pass left to right
places every column from its left neighbours; one pass right to left then moves each
column towards its right neighbours (a Gateway beside its listeners, a class beside its
Gateways). No randomness and no iteration to convergence: the same graph gives the same
coordinates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

NODE_W, NODE_H = 210, 58  # the size of a node (the page draws them so: /api/graph says it)
COL_GAP, ROW_GAP, MARGIN = 56, 14, 28  # MARGIN leaves room above for the column titles


class _Placed(Protocol):
    id: str
    column: int
    x: int
    y: int


class _Linked(Protocol):
    source: str
    target: str


def place(nodes: Sequence[_Placed], edges: Sequence[_Linked]) -> tuple[int, int]:
    """Set every node's ``x`` and ``y`` (top left corner); returns the drawing's (width, height)."""
    if not nodes:
        return 2 * MARGIN, 2 * MARGIN
    columns: dict[int, list[_Placed]] = defaultdict(list)
    for node in sorted(nodes, key=lambda n: n.id):
        columns[node.column].append(node)
    order = sorted(columns)
    for i, col in enumerate(order):
        for node in columns[col]:
            node.x = MARGIN + i * (NODE_W + COL_GAP)
    by_id = {n.id: n for n in nodes}
    neighbours: dict[str, list[_Placed]] = defaultdict(list)
    for e in edges:
        if e.source in by_id and e.target in by_id and e.source != e.target:
            neighbours[e.source].append(by_id[e.target])
            neighbours[e.target].append(by_id[e.source])

    def wanted(node: _Placed, side: set[int], keep: bool) -> float | None:
        ys = [n.y + NODE_H / 2 for n in neighbours[node.id] if n.column in side]
        if ys:
            return sum(ys) / len(ys) - NODE_H / 2
        return float(node.y) if keep else None

    for i, col in enumerate(order):  # left to right
        left = set(order[:i])
        _pack(columns[col], {n.id: wanted(n, left, False) for n in columns[col]})
    for i in range(len(order) - 2, -1, -1):  # right to left
        right = set(order[i + 1 :])
        col_nodes = columns[order[i]]
        _pack(col_nodes, {n.id: wanted(n, right, True) for n in col_nodes})
    width = MARGIN + len(order) * (NODE_W + COL_GAP) - COL_GAP + MARGIN
    height = max(n.y for n in nodes) + NODE_H + MARGIN
    return width, height


def _pack(column: list[_Placed], want: dict[str, float | None]) -> None:
    """Order a column by the height each node wants (those that want none last, by id) and
    place them there, each at least a row below the one before."""
    column.sort(key=lambda n: (want[n.id] is None, want[n.id] or 0.0, n.id))
    y = MARGIN
    for node in column:
        w = want[node.id]
        node.y = max(y, round(w)) if w is not None else y
        y = node.y + NODE_H + ROW_GAP
