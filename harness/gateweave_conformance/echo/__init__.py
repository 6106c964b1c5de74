"""Local stand-ins for the upstream conformance echo backends (shared/conformance/ECHO.md).

One :class:`EchoSpec` describes one replica of an echo Deployment; :func:`start_echo`
binds its listeners on the running asyncio loop and returns a :class:`RunningEcho`.
``python -m gateweave.conformance.echo`` runs one replica as a process.
"""

from gateweave.conformance.echo.naming import pod_name
from gateweave.conformance.echo.probe import probe_once, wait_ready
from gateweave.conformance.echo.server import RunningEcho, start_echo
from gateweave.conformance.echo.spec import MODES, EchoSpec, Mode

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
