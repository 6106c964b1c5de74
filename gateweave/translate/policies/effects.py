"""Where a governing policy's effect lands in the xDS IR: per route, on each listener.

A route attached to a listener is governed, rule by rule, by the most specific policy
holding a scope above it (:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_route`).
:func:`apply_route_effects` gives each attachment the IR routes those policies change
(``Attachment.effects``, by IR route name, on an attachment of that listener's own); the xDS IR
assembly
(:func:`~gateweave.translate.xdsir.virtual_host`) serves those instead of the route's own.
Nothing changes where no policy applies. A listener takes its governing ClientTrafficPolicy's effect
(:func:`apply_listener_effects`, ``ListenerCtx.client``), which the xDS IR puts on its port (HTTP)
or filter chain (HTTPS), and its routes' rate limits its ``headers.disableRateLimitHeaders``
(:func:`rate_limit_headers_off`). The clusters a policy's effect adds (a SecurityPolicy's auth
service) ride on the attachment too (``Attachment.effect_clusters``). A feature with an effect on
routes adds it in its kind's ``route_effect`` (btp.py, security.py) and a line in
``_ROUTE_EFFECTS``.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gateweave import ir
from gateweave.translate.attachment import Attachment
from gateweave.translate.context import GatewayCtx, ListenerCtx
from gateweave.translate.policies import btp, ctp, ratelimit, security
from gateweave.translate.policies.attach import PolicyIndex, PolicyReport, spec_of

_HTTP_KINDS = ("HTTPRoute", "GRPCRoute")


def _btp_effect(rep: PolicyReport, route: ir.Route) -> ir.Route:
    return btp.route_effect(spec_of(rep.policy), rep.effect or (), route)


def _security_effect(rep: PolicyReport, route: ir.Route) -> ir.Route:
    return security.route_effect(rep.effect, route)


def _own_clusters(rep: PolicyReport) -> dict[str, ir.Cluster]:
    """The upstreams a policy's effect sends to beyond the route's own (a SecurityPolicy's auth
    service).
    """
    return (
        {cl.name: cl for cl in rep.effect.clusters}
        if isinstance(rep.effect, security.Effect)
        else {}
    )


# Per policy kind with effects on routes: how its governing policy changes an IR route.
_ROUTE_EFFECTS: tuple[tuple[str, Callable[[PolicyReport, ir.Route], ir.Route]], ...] = (
    ("BackendTrafficPolicy", _btp_effect),
    ("SecurityPolicy", _security_effect),
)


RouteEffects = tuple[tuple[str, Callable[[PolicyReport, ir.Route], ir.Route]], ...]


def route_effect_kinds(index: PolicyIndex) -> RouteEffects:
    """The policy kinds with effects on routes that hold some scope in ``index``."""
    return tuple((kind, effect) for kind, effect in _ROUTE_EFFECTS if kind in index.holders)


def attachment_effects(
    index: PolicyIndex, kinds: RouteEffects, lc: ListenerCtx, att: Attachment
) -> tuple[dict[str, ir.Route] | None, dict[str, ir.Cluster] | None]:
    """What the policies governing ``att``'s routes on listener ``lc`` make of them: the changed
    IR routes by name and the clusters they add (``Attachment.effects`` and
    ``Attachment.effect_clusters``); (None, None) when no policy changes any."""
    if not kinds or att.kind not in _HTTP_KINDS:
        return None, None
    route = att.route
    rules = route.spec.rules
    prefix = ir.route_prefix(att.kind, route.metadata.namespace, route.metadata.name)
    effects: dict[str, ir.Route] = {}
    clusters: dict[str, ir.Cluster] = {}
    headers_off: bool | None = None  # the listener's, read at its first rate limited route
    for r in att.translation.sorted_http:
        index_text = r.name[len(prefix) :].split("/", 1)[0]
        i = int(index_text) if index_text.isdigit() else -1
        rule = rules[i].name if 0 <= i < len(rules) else None
        changed = r
        for kind, effect in kinds:
            hit = index.for_route(kind, att.kind, route, rule, lc)
            if hit is not None:
                changed = effect(hit[1], changed)
                clusters.update(_own_clusters(hit[1]))
        if changed.rate_limit is not None and changed.rate_limit.x_ratelimit_headers:
            if headers_off is None:
                headers_off = rate_limit_headers_off(index, lc)
            if headers_off:
                changed = msgspec.structs.replace(
                    changed, rate_limit=ratelimit.without_headers(changed.rate_limit)
                )
        if changed is not r:
            effects[r.name] = changed
    if not effects:
        return None, None
    return effects, clusters or None


def rate_limit_headers_off(index: PolicyIndex, lc: ListenerCtx) -> bool:
    """Whether the ClientTrafficPolicy governing listener ``lc`` turns the x-ratelimit-* headers
    of its routes' rate limits off (``headers.disableRateLimitHeaders``), as Envoy Gateway does
    per listener. (The incremental translation computes a listener's route effects again when
    its ClientTrafficPolicy changes, as for any scope above the routes.)"""
    hit = index.for_listener("ClientTrafficPolicy", lc)
    return hit is not None and ctp.rate_limit_headers_off(spec_of(hit[1].policy), [])


def apply_route_effects(index: PolicyIndex, gateways: list[GatewayCtx]) -> None:
    kinds = route_effect_kinds(index)
    if not kinds:
        return
    for gw in gateways:
        for lc in gw.all_listeners():
            for k, att in enumerate(lc.routes):
                effects, clusters = attachment_effects(index, kinds, lc, att)
                if effects:
                    # A new attachment: the route side shares one between listeners.
                    lc.routes[k] = Attachment(att.translation, att.hostnames, effects, clusters)


def listener_client(index: PolicyIndex, lc: ListenerCtx) -> ir.ClientSettings | None:
    """The client settings of the ClientTrafficPolicy governing listener ``lc`` (None: none)."""
    hit = index.for_listener("ClientTrafficPolicy", lc)
    return ctp.listener_effect(spec_of(hit[1].policy), hit[1].effect) if hit is not None else None


def apply_listener_effects(index: PolicyIndex, gateways: list[GatewayCtx]) -> None:
    """Each listener takes the effect of the ClientTrafficPolicy governing it
    (``ListenerCtx.client``).
    """
    if "ClientTrafficPolicy" not in index.holders:
        return
    for gw in gateways:
        for lc in gw.all_listeners():
            lc.client = listener_client(index, lc)
