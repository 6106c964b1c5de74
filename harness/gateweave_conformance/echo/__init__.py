"""Local stand-ins for the upstream conformance echo backends
(third_party/gateway-api/conformance/ECHO.md).

One :class:`EchoSpec` describes one replica of an echo Deployment; :func:`start_echo`
binds its listeners on the running asyncio loop and returns a :class:`RunningEcho`.
``python -m gateweave_conformance.echo`` runs one replica as a process.
"""

from gateweave_conformance.echo.naming import pod_name
from gateweave_conformance.echo.probe import probe_once, wait_ready
from gateweave_conformance.echo.server import RunningEcho, start_echo
from gateweave_conformance.echo.spec import MODES, EchoSpec, Mode

__all__ = [
    "MODES",
    "EchoSpec",
    "Mode",
    "RunningEcho",
    "pod_name",
    "probe_once",
    "start_echo",
    "wait_ready",
]
