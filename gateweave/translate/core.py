"""The order of one translation: its stages, named here once, each done by its own module.

1. :func:`context`: the snapshot's indexes (namespaces' labels, ReferenceGrants, EndpointSlices).
2. :func:`gateway_side`: GatewayClasses, Gateways, their listeners and ListenerSets
   (GatewayClass statuses; each Gateway's and listener's findings).
3. :func:`route_side`: every route (:func:`~gateweave.translate.routes.in_order`) translated,
   judged against the listeners and attached (route statuses, attachedRoutes counts,
   per-listener route tables); BackendTLSPolicy statuses.
4. :func:`policies`: Envoy Gateway's policies attached to Gateways, listeners, ListenerSets,
   routes and rules (translate/policies/attach.py): which one governs each, their
   status.ancestors; the xDS IR reads the result (``ctx.policies``).
5. :func:`gateway_statuses`: Gateway and ListenerSet statuses (listeners with attachedRoutes,
   addresses, Programmed).
6. :func:`xds_ir` and :func:`infra_ir`: the two IRs, per Gateway.
7. :func:`by_envoy`: the two IRs regrouped per Envoy (the Gateways of a merged class share one).

:func:`run_pipeline` runs them in this order. The incremental translator (incremental.py)
runs the same stages: on a full translation all of them, but the route side and the xDS IR
as its own per-route and per-virtual-host versions (which remember what they built); on a
change, the gateway side and the infrastructure IR only when what they read changed, the
route side for the routes the change can affect, the policies when what they read changed
(and the effects under the scopes whose holder changed), the xDS IR for what they touched, the
Gateway statuses always.
"""

from __future__ import annotations

from gateweave import ir
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate import gateway, merging, routes, xdsir
from gateweave.translate.context import Ctx, GatewayCtx
from gateweave.translate.options import TranslateOptions
from gateweave.translate.policies.attach import attach_policies
from gateweave.translate.policies.effects import apply_listener_effects, apply_route_effects


def context(snapshot: Snapshot, options: TranslateOptions) -> Ctx:
    """Stage 1: the working state of a translation, with the snapshot's indexes."""
    return Ctx.build(snapshot, options)


def gateway_side(ctx: Ctx) -> list[GatewayCtx]:
    """Stage 2: our Gateways, with their classes, addresses, listeners and ListenerSets judged."""
    return gateway.resolve_gateways(ctx)


def route_side(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    """Stage 3: every route attached to the listeners that take it; route and policy statuses."""
    routes.attach_routes(ctx, gateways)


def policies(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    """Stage 4: Envoy Gateway's policies attached (their statuses; ``ctx.policies`` for the xDS
    IR).
    """
    ctx.policies = attach_policies(ctx, gateways)
    apply_route_effects(ctx.policies, gateways)
    apply_listener_effects(ctx.policies, gateways)


def gateway_statuses(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    """Stage 5: Gateway and ListenerSet statuses, from the findings and the routes attached."""
    gateway.write_gateway_statuses(ctx, gateways)


def xds_ir(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.XdsGateway]:
    """Stage 6: each serving Gateway's xDS IR."""
    return xdsir.build_xds(ctx, gateways)


def infra_ir(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.InfraGateway]:
    """Stage 6: each serving Gateway's infrastructure IR (reads the gateway side only)."""
    return gateway.build_infra(ctx, gateways)


def by_envoy(
    gateways: list[GatewayCtx], xds: dict[str, ir.XdsGateway], infra: dict[str, ir.InfraGateway]
) -> tuple[dict[str, ir.XdsGateway], dict[str, ir.InfraGateway]]:
    """Stage 7: the IRs keyed by Envoy (xDS node): a merged class's Gateways become one."""
    merged = [gw for gw in gateways if gw.node != gw.name]
    return merging.regroup(
        {gw.name: gw.node for gw in merged},
        xds,
        infra,
        {gw.node: gw.gateway_class.metadata.uid for gw in merged},
    )


def run_pipeline(
    snapshot: Snapshot, options: TranslateOptions
) -> tuple[Result, Ctx, list[GatewayCtx]]:
    """One translation, also returning its working state (``gateweave explain`` reads it)."""
    ctx = context(snapshot, options)
    gateways = gateway_side(ctx)
    route_side(ctx, gateways)
    policies(ctx, gateways)
    gateway_statuses(ctx, gateways)
    xds = xds_ir(ctx, gateways)
    infra = infra_ir(ctx, gateways)
    xds, infra = by_envoy(gateways, xds, infra)
    return Result(statuses=ctx.statuses, infra=infra, xds=xds), ctx, gateways


def translate_all(snapshot: Snapshot, options: TranslateOptions) -> Result:
    result, _, gateways = run_pipeline(snapshot, options)
    release(gateways)
    return result


def release(gateways: list[GatewayCtx]) -> None:
    """Break the Gateway <-> listener reference cycles of the working state, so reference
    counting frees it all at once instead of leaving it to a full garbage collection
    (most of a translation's allocations; at 10,000 routes, seconds of collector time)."""
    for gw in gateways:
        gw.listeners = []
        gw.listener_sets = []
