"""A conformance runner environment (gateweave_conformance.traffic.Env) for unit tests of traffic
steps: every Gateway is one address and port (a test server's), nothing else is looked up."""

from __future__ import annotations

from gateweave_conformance import traffic


class FixedEnv:
    """traffic.Env with every Gateway at ``host:port`` (the step talks to that server directly)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    async def target(self, gateway: str, listener: str | None, default_port: int) -> traffic.Target:
        return traffic.Target(self.host, self.port)

    def trusted_pem(self, ref: str) -> str:
        raise AssertionError(ref)

    def client_cert(self, ref: str) -> tuple[str, str]:
        raise AssertionError(ref)

    def mirror_logs(self, namespace: str, name: str) -> list[list[str]]:
        raise AssertionError(namespace, name)
