"""Infrastructure managers: make the Envoys the infra IR asks for exist."""

from gateweave.infra.host import GatewayProcess, HostInfra, State

__all__ = ["GatewayProcess", "HostInfra", "State"]
