"""ClientTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and reads the winning policy's spec
where its effect lands in the IR
(:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_listener` for listeners).
"""

from __future__ import annotations

from typing import Any

IMPLEMENTED: frozenset[str] = frozenset()


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (nothing is implemented yet)."""
    return []
