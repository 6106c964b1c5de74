"""The infra sink of the host data plane: one Envoy process per Gateway of the infra IR
(the processes themselves are supervised by :class:`gateweave.infra.host.HostInfra`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateweave.infra.host import HostInfra
from gateweave.ir import InfraGateway


class HostInfraSink:
    """Keeps one Envoy process per Gateway of the infra IR."""

    def __init__(self, infra: HostInfra) -> None:
        self.infra = infra
        self.desired: dict[str, InfraGateway] = {}

    async def update(self, changed: Mapping[str, InfraGateway], removed: Sequence[str]) -> None:
        for name in removed:
            self.desired.pop(name, None)
        self.desired.update(changed)
        await self.infra.reconcile(dict(self.desired))
