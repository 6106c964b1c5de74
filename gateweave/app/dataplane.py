"""The data plane, chosen here and nowhere else: none, Envoy processes on this host, or Envoy
Deployments in Kubernetes. Either way an xDS server feeds the Envoys and the runtime gets
its xDS and infra sinks (gateweave/sinks); the Envoys' reports come back through
``runtime.set_dataplane_state``, which translate turns into Programmed, and the route objects
an Envoy rejects through ``runtime.quarantine``, which translate leaves out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import structlog

from gateweave.app.settings import HostDataplane, KubeDataplane, Settings
from gateweave.infra.host import HostInfra
from gateweave.infra.statedir import StateDir
from gateweave.runtime import Runtime
from gateweave.sinks.hostinfra import HostInfraSink
from gateweave.sinks.xds import XdsPublisher
from gateweave.telemetry import Envoys
from gateweave.xds.server import AdsServer

if TYPE_CHECKING:
    from gateweave.app.kube import KubeSource

log = structlog.get_logger("gateweave.app")


def claim_state(settings: Settings) -> StateDir | None:
    """The host data plane's state directory, locked for this process (before anything else
    starts, so a second serve on it stops at once); ``None`` for the other data planes."""
    if not isinstance(settings.dataplane, HostDataplane):
        return None
    state = StateDir.open(settings.state_dir())
    log.info("state directory", path=str(state.path))
    return state


def dataplane(
    settings: Settings, runtime: Runtime, kube: KubeSource | None, state: StateDir | None
) -> AbstractAsyncContextManager[Envoys | None]:
    """The data plane of ``settings``, attached to ``runtime`` for the duration of the context
    (``state``: what :func:`claim_state` gave); the context's value is its Envoys (whose
    statistics the admin API reads): the processes on this host, or the Kubernetes pods."""
    chosen = settings.dataplane
    if isinstance(chosen, HostDataplane):
        assert state is not None
        return _host(state, chosen, runtime)
    if isinstance(chosen, KubeDataplane):
        assert (
            kube is not None
        )  # Settings refuses a Kubernetes data plane without the Kubernetes provider
        return _kubernetes(chosen, runtime, kube)
    return contextlib.nullcontext()


@contextlib.asynccontextmanager
async def _host(state: StateDir, chosen: HostDataplane, runtime: Runtime) -> AsyncIterator[Envoys]:
    """An ADS server and one Envoy process per Gateway, on this host, kept in a state directory
    that outlives this process: an explicit stop (the context ends, or is cancelled) drains
    and stops the Envoys; a failure (an exception) leaves them serving for the next serve."""
    server = AdsServer(registry=runtime.metrics.registry)
    publisher: XdsPublisher | None = None
    try:
        # The Envoys' xDS transport: a unix socket only this user can connect to.
        await server.start_unix(str(state.socket))
        infra = HostInfra(
            work_dir=state.envoys,
            xds_pipe=str(state.socket),
            delta=chosen.delta,
            metrics=runtime.metrics,
        )
        publisher = XdsPublisher(server, runtime.set_dataplane_state, runtime.quarantine)
        runtime.attach(xds_sink=publisher, infra_sink=HostInfraSink(infra))
        try:
            yield infra
        except Exception:
            await infra.detach()
            raise
        except BaseException:  # cancelled: the caller stops us
            await infra.close()
            raise
        await infra.close()
    finally:
        if publisher is not None:
            await publisher.close()
        await server.stop()


@contextlib.asynccontextmanager
async def _kubernetes(
    settings: KubeDataplane, runtime: Runtime, kube: KubeSource
) -> AsyncIterator[Envoys]:
    """An ADS server and an Envoy Deployment + Service per Gateway, or per merged GatewayClass
    (managed by the leader only).
    xDS is mutual TLS with gateweave's CA (unless ``xds_plaintext``), its certificates renewed
    while it runs. The Envoy pods are watched (by every replica) for their statistics."""
    from gateweave.app.kube import controller_namespace
    from gateweave.kube.pods import EnvoyPods
    from gateweave.kube.xdsca import XdsCertificates
    from gateweave.sinks.kubeinfra import DEFAULT_IMAGE, KubernetesInfra

    certs: XdsCertificates | None = None
    if not settings.xds_plaintext:
        certs = XdsCertificates(
            kube.client,
            controller_namespace(kube.settings),
            [settings.xds_host],
            settings.certificates,
        )
    server = AdsServer(
        registry=runtime.metrics.registry, tls=await certs.start() if certs is not None else None
    )
    await server.start(settings.xds_bind, settings.xds_port)
    infra = KubernetesInfra(
        kube.client,
        xds_host=settings.xds_host,
        xds_port=settings.xds_port,
        image=settings.envoy_image or DEFAULT_IMAGE,
        service_type=settings.service_type,
        certs=certs,
        # a merged GatewayClass's objects: where the provider watches them (their Service's
        # address is its Gateways')
        namespace=kube.settings.namespace or controller_namespace(kube.settings),
        scope=kube.settings.namespace or "",
    )
    infra.enabled = kube.leading
    kube.infra = infra
    report = runtime.set_dataplane_state
    if kube.elector is not None:  # several replicas: Envoy acknowledgements shared through the API
        from gateweave.sinks.sharedacks import SharedAcks

        kube.acks = SharedAcks(
            kube.client,
            namespace=kube.elector.namespace,
            identity=kube.elector.identity,
            publish=report,
            pods=lambda gw: server.status(gw).streams,
            lease_duration=kube.elector.lease_duration,
            period=kube.elector.retry_period,
        )
        report = kube.acks.report
    publisher = XdsPublisher(server, report, runtime.quarantine)
    renewal = (
        asyncio.create_task(certs.run(infra.renew), name="gateweave-xds-certificates")
        if certs
        else None
    )
    pods = EnvoyPods(
        kube.client,
        infra.pod_owners,
        namespace=kube.settings.namespace or "",
        backoff=kube.settings.backoff,
        watch_timeout=kube.settings.watch_timeout,
    )
    watch = asyncio.create_task(pods.run(), name="gateweave-envoy-pods")
    try:
        runtime.attach(xds_sink=publisher, infra_sink=infra)
        yield pods
    finally:
        for task in (renewal, watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await publisher.close()
        await server.stop()
