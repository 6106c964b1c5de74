"""Assembly of the xDS IR per Gateway from resolved listeners and attached routes. (Being written.)"""

from __future__ import annotations

from gateweave import ir
from gateweave.translate.context import Ctx, GatewayCtx


def build_xds(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.XdsGateway]:
    return {}
