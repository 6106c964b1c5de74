"""ClientTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here and reads the winning policy's spec where its effect lands in the IR
(:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_listener` for listeners).
"""

from __future__ import annotations

IMPLEMENTED: frozenset[str] = frozenset()
