"""Start and stop one echo replica."""

from __future__ import annotations

from gateweave_conformance.echo.fileserver import start_files
from gateweave_conformance.echo.grpcserver import start_grpc
from gateweave_conformance.echo.handlers import HttpEcho, Identity
from gateweave_conformance.echo.httpserver import start_http
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.logbook import EchoLog
from gateweave_conformance.echo.probe import wait_ready
from gateweave_conformance.echo.spec import EchoSpec
from gateweave_conformance.echo.tcpserver import start_tcp
from gateweave_conformance.echo.udpserver import start_dns, start_udp

# The listener whose answer tells that a replica is ready, per mode.
_PROBED = {
    "http": "http",
    "grpc": "grpc",
    "tcp": "tcp",
    "udp": "udp",
    "dns": "dns",
    "files": "files",
}


class RunningEcho:
    """A started replica: its bound ports, its log, ``ready()`` and ``stop()``."""

    def __init__(
        self, spec: EchoSpec, log: EchoLog, listeners: Listeners, ports: dict[str, int]
    ) -> None:
        self.spec = spec
        self.log = log
        self.ports = ports
        self._listeners = listeners
        self._stopped = False

    @property
    def host(self) -> str:
        return self.spec.host

    @property
    def log_lines(self) -> list[str]:
        return self.log.lines

    async def ready(self, timeout: float = 10.0) -> bool:
        """True once the replica answers its mode's readiness probe."""
        if self._stopped:
            return False
        return await wait_ready(
            self.spec.mode, self.spec.host, self.ports[_PROBED[self.spec.mode]], timeout
        )

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self._listeners.close()
        self.log.close()


async def start_echo(spec: EchoSpec) -> RunningEcho:
    """Bind every listener of ``spec`` and serve on the running loop.

    Raises OSError when a port cannot be bound (nothing stays bound then).
    """
    log = EchoLog(spec.log_path, spec.log_stdout)
    identity = Identity(spec.namespace, spec.ingress, spec.service, spec.pod)
    listeners = Listeners()
    try:
        if spec.mode == "http":
            ports = await start_http(spec, HttpEcho(identity, str(spec.http_port), log), listeners)
        elif spec.mode == "grpc":
            ports = await start_grpc(spec, identity, log, listeners)
        elif spec.mode == "tcp":
            ports = await start_tcp(spec, identity, log, listeners)
        elif spec.mode == "udp":
            ports = await start_udp(spec, identity, log, listeners)
        elif spec.mode == "dns":
            ports = await start_dns(spec, log, listeners)
        elif spec.mode == "files":
            ports = await start_files(spec, log, listeners)
        else:
            raise ValueError(f"unknown echo mode {spec.mode!r}")
    except BaseException:
        await listeners.close()
        log.close()
        raise
    return RunningEcho(spec, log, listeners, ports)
