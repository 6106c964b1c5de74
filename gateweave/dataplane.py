"""The standalone data plane: the ADS server and Envoy processes on this host, as the
runtime's xDS and infra sinks (gateweave/sinks)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from gateweave.infra.host import HostInfra
from gateweave.runtime import Runtime
from gateweave.sinks.hostinfra import HostInfraSink
from gateweave.sinks.xds import XdsPublisher
from gateweave.xds.server import AdsServer


def host_dataplane(
    *, xds_host: str = "127.0.0.1", xds_port: int = 0, work_dir: str | None = None, delta: bool = False
) -> Callable[[Runtime], AbstractAsyncContextManager[None]]:
    """A ``dataplane_setup`` for :func:`gateweave.serve.serve`: ADS server + host Envoys for its lifetime."""

    @contextlib.asynccontextmanager
    async def setup(runtime: Runtime) -> AsyncIterator[None]:
        server = AdsServer(registry=runtime.metrics.registry)
        port = await server.start(xds_host, xds_port)
        with contextlib.ExitStack() as stack:
            base = Path(work_dir) if work_dir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gateweave-")))
            infra = HostInfra(xds_host=xds_host, xds_port=port, work_dir=base, delta=delta)
            try:
                runtime.attach(
                    xds_sink=XdsPublisher(server, runtime.set_dataplane_state),
                    infra_sink=HostInfraSink(infra),
                )
                yield
            finally:
                await infra.close()
                await server.stop()

    return setup
