"""The Kubernetes side of the wiring: the API client, the provider, the status sink and, with
leader election, the elector.

:class:`KubeSource` is what the composition root needs from it: an initial sync before the
first translation, the status sink the runtime publishes to, and the tasks to run (the
watches, the status writer and the elector). Leadership switches on and off what only the
leader may do: writing statuses and, with the Kubernetes data plane, managing the Envoy
Deployments (``infra``, set by :func:`gateweave.app.dataplane.dataplane`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from gateweave.app.settings import KubeSettings, Settings
from gateweave.errors import OperatorError
from gateweave.kube.client import KubeClient
from gateweave.metrics import Metrics
from gateweave.providers import ErrorBook
from gateweave.providers.kubernetes import KubernetesProvider
from gateweave.sinks.kubestatus import KubeStatusSink
from gateweave.store import Store

if TYPE_CHECKING:
    from gateweave.leader import LeaderElector
    from gateweave.sinks.kubeinfra import KubernetesInfra
    from gateweave.sinks.sharedacks import SharedAcks

SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _own_namespace() -> str:
    """The pod's namespace when running in a cluster."""
    try:
        with open(SA_NAMESPACE_FILE) as f:
            return f.read().strip()
    except OSError:
        return ""


def controller_namespace(kube: KubeSettings) -> str:
    """Where gateweave keeps its own objects (the Lease, the xDS CA Secret): ``lease_namespace``
    if set, else the pod's namespace in a cluster, else the watched namespace, else default."""
    return kube.lease_namespace or _own_namespace() or kube.namespace or "default"


class KubeSource:
    def __init__(
        self,
        settings: Settings,
        client: KubeClient,
        store: Store,
        errors: ErrorBook,
        metrics: Metrics,
    ) -> None:
        kube = settings.provider
        assert isinstance(kube, KubeSettings)
        self.settings = kube
        self.client = client
        self.provider = KubernetesProvider(
            client,
            store,
            errors,
            namespace=kube.namespace,
            backoff=kube.backoff,
            watch_timeout=kube.watch_timeout,
        )
        self.status_writer = KubeStatusSink(
            client,
            store,
            self.provider.path,
            settings.controller_name,
            rate=kube.status_rate,
            burst=kube.status_burst,
            metrics=metrics,
        )
        self.elector: LeaderElector | None = None
        self.infra: KubernetesInfra | None = None
        self.acks: SharedAcks | None = (
            None  # with leader election and a data plane (gateweave.app.dataplane)
        )
        if kube.leader_elect:
            from gateweave.leader import LeaderElector

            self.status_writer.enabled = False
            self.elector = LeaderElector(
                client,
                namespace=controller_namespace(kube),
                name=kube.lease_name,
                identity=kube.identity or None,
                lease_duration=kube.lease_duration,
                renew_deadline=kube.renew_deadline,
                retry_period=kube.retry_period,
                on_change=self._leadership,
            )

    @classmethod
    async def open(
        cls, settings: Settings, store: Store, errors: ErrorBook, metrics: Metrics
    ) -> KubeSource:
        kube = settings.provider
        assert isinstance(kube, KubeSettings)
        if kube.kubeconfig and not os.path.isfile(kube.kubeconfig):
            raise OperatorError(f"kubeconfig {kube.kubeconfig} does not exist or is not a file")
        try:
            client = await KubeClient.load(kube.kubeconfig)
        except Exception as exc:  # the loader fails in many ways on a file that is no kubeconfig
            where = f"kubeconfig {kube.kubeconfig}" if kube.kubeconfig else "the default kubeconfig"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OperatorError(f"cannot load {where}: {first}") from None
        return cls(settings, client, store, errors, metrics)

    @property
    def leading(self) -> bool:
        """Whether this replica may write (always, without leader election)."""
        return self.elector is None or self.elector.leading

    def _leadership(self, leading: bool) -> None:
        self.status_writer.enabled = leading
        if leading:
            self.status_writer.kick()
        if self.infra is not None:
            self.infra.enabled = leading
            if leading:
                asyncio.get_running_loop().create_task(self.infra.reconcile())

    async def sync(self, hold: contextlib.ExitStack | None = None) -> None:
        await self.provider.sync(hold)

    def tasks(self) -> list[Coroutine[Any, Any, None]]:
        out = [self.provider.run(), self.status_writer.run()]
        if self.elector is not None:
            out.append(self.elector.run())
        if self.acks is not None:
            out.append(self.acks.run())
        return out

    async def close(self) -> None:
        if self.elector is not None:
            await self.elector.release()
        await self.client.close()
