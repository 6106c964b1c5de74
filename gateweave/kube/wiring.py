"""``gateweave serve --provider kubernetes``: the client, provider and status writer, wired.

:class:`KubeSource` is what ``serve`` needs from the Kubernetes side: an initial sync
before the first translation, the status sink the runtime publishes to, and the tasks
to run (the watches, the status writer and, with leader election, the elector).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateweave.kube.client import KubeClient
from gateweave.metrics import Metrics
from gateweave.providers import ErrorBook
from gateweave.providers.kubernetes import KubernetesProvider
from gateweave.sinks.kubestatus import KubeStatusSink
from gateweave.store import Store

if TYPE_CHECKING:
    from gateweave.runtime import Runtime


@dataclass(frozen=True)
class KubeSettings:
    kubeconfig: str | None = None  # None: in-cluster, else $KUBECONFIG / ~/.kube/config
    namespace: str | None = None  # None: every namespace
    leader_elect: bool = False
    lease_namespace: str = ""  # "": the pod's namespace in a cluster, else namespace, else "default"
    lease_name: str = "gateweave-controller"
    identity: str = ""  # "" : hostname + pid
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    status_rate: float = 20.0
    status_burst: int = 50
    watch_timeout: int = 300
    # The Kubernetes data plane (serve with a data plane): an Envoy Deployment + Service per
    # Gateway, fed by the xDS server this process runs on xds_bind:xds_port and that pods
    # reach at xds_host (the control plane's Service).
    kube_dataplane: bool = False
    xds_bind: str = "0.0.0.0"
    xds_port: int = 18000
    xds_host: str = "gateweave.gateweave-system.svc"
    envoy_image: str = ""
    service_type: str = "LoadBalancer"
    backoff: tuple[float, float] = (0.2, 10.0)


SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _own_namespace() -> str:
    """The pod's namespace when running in a cluster (the Lease lives there)."""
    try:
        with open(SA_NAMESPACE_FILE) as f:
            return f.read().strip()
    except OSError:
        return ""


class KubeSource:
    def __init__(self, settings: KubeSettings, client: KubeClient, store: Store, errors: ErrorBook,
                 controller_name: str, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.client = client
        self.provider = KubernetesProvider(client, store, errors, namespace=settings.namespace,
                                           backoff=settings.backoff, watch_timeout=settings.watch_timeout)
        self.status_writer = KubeStatusSink(client, store, self.provider.path, controller_name,
                                              rate=settings.status_rate, burst=settings.status_burst,
                                              metrics=metrics)
        self.elector: Any = None
        self.infra: Any = None
        if settings.leader_elect:
            from gateweave.leader import LeaderElector

            self.status_writer.enabled = False
            self.elector = LeaderElector(
                client,
                namespace=settings.lease_namespace or _own_namespace() or settings.namespace or "default",
                name=settings.lease_name,
                identity=settings.identity or None,
                lease_duration=settings.lease_duration,
                renew_deadline=settings.renew_deadline,
                retry_period=settings.retry_period,
                on_change=self._leadership,
            )

    @classmethod
    async def open(cls, settings: KubeSettings, store: Store, errors: ErrorBook, controller_name: str,
                   metrics: Metrics | None = None) -> KubeSource:
        client = await KubeClient.load(settings.kubeconfig)
        return cls(settings, client, store, errors, controller_name, metrics)

    def _leadership(self, leading: bool) -> None:
        self.status_writer.enabled = leading
        if leading:
            self.status_writer.kick()
        if self.infra is not None:
            self.infra.enabled = leading
            if leading:
                asyncio.get_running_loop().create_task(self.infra.reconcile())

    def dataplane_setup(self) -> Callable[[Runtime], AbstractAsyncContextManager[None]]:
        """The Kubernetes data plane: xDS server + Envoy Deployments/Services per Gateway."""
        from gateweave.sinks.kubeinfra import DEFAULT_IMAGE, KubernetesInfra
        from gateweave.sinks.xds import XdsPublisher
        from gateweave.xds.server import AdsServer

        settings = self.settings

        @contextlib.asynccontextmanager
        async def setup(runtime: Runtime) -> AsyncIterator[None]:
            server = AdsServer(registry=runtime.metrics.registry)
            await server.start(settings.xds_bind, settings.xds_port)
            self.infra = KubernetesInfra(self.client, xds_host=settings.xds_host,
                                         xds_port=settings.xds_port, image=settings.envoy_image or DEFAULT_IMAGE,
                                         service_type=settings.service_type)
            self.infra.enabled = self.elector is None or self.elector.leading
            try:
                runtime.attach(xds_sink=XdsPublisher(server, runtime.set_dataplane_state), infra_sink=self.infra)
                yield
            finally:
                await server.stop()

        return setup

    async def sync(self) -> None:
        await self.provider.sync()

    def tasks(self) -> list[Coroutine[Any, Any, None]]:
        out = [self.provider.run(), self.status_writer.run()]
        if self.elector is not None:
            out.append(self.elector.run())
        return out

    async def close(self) -> None:
        if self.elector is not None:
            await self.elector.release()
        await self.client.close()
