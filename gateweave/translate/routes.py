"""Routes of every kind: parentRef resolution, attachment, backends, route status. (Being written.)"""

from __future__ import annotations

from gateweave.translate.context import Ctx, GatewayCtx


def attach_routes(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    """Attach every route to the listeners it may attach to and write every route's status."""
