"""Where a governing policy's effect lands in the xDS IR: per route, on each listener.

A route attached to a listener is governed, rule by rule, by the most specific policy
holding a scope above it (:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).
:func:`apply_route_effects` gives each attachment the IR routes those policies change
(``Attachment.effects``, by IR route name, on an attachment of that listener's own); the xDS IR assembly
(:func:`~gateweave.translate.xdsir.virtual_host`) serves those instead of the route's own.
Nothing changes where no policy applies. A feature with an effect on routes adds it in its
kind's ``route_effect`` (btp.py).
"""

from __future__ import annotations

from gateweave import ir
from gateweave.translate.attachment import Attachment
from gateweave.translate.context import GatewayCtx
from gateweave.translate.policies import btp
from gateweave.translate.policies.attach import PolicyIndex, spec_of

_HTTP_KINDS = ("HTTPRoute", "GRPCRoute")


def apply_route_effects(index: PolicyIndex, gateways: list[GatewayCtx]) -> None:
    if "BackendTrafficPolicy" not in index.holders:
        return
    for gw in gateways:
        for lc in gw.all_listeners():
            for k, att in enumerate(lc.routes):
                if att.kind not in _HTTP_KINDS:
                    continue
                route = att.route
                rules = route.spec.rules
                prefix = ir.route_prefix(att.kind, route.metadata.namespace, route.metadata.name)
                effects: dict[str, ir.Route] = {}
                for r in att.translation.sorted_http:
                    index_text = r.name[len(prefix):].split("/", 1)[0]
                    i = int(index_text) if index_text.isdigit() else -1
                    rule = rules[i].name if 0 <= i < len(rules) else None
                    hit = index.for_route("BackendTrafficPolicy", att.kind, route, rule, lc)
                    if hit is not None:
                        changed = btp.route_effect(spec_of(hit[1].policy), r)
                        if changed is not r:
                            effects[r.name] = changed
                if effects:
                    # A new attachment: the route side shares one between listeners.
                    lc.routes[k] = Attachment(att.translation, att.hostnames, effects)
