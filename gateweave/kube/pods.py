"""The Envoy pods of the Kubernetes data plane, watched: where their statistics are read.

:class:`EnvoyPods` lists and then watches the Pods that carry the labels every Envoy pod
gateweave generates carries (:func:`gateweave.ir.envoy_labels`, the label selector
:data:`SELECTOR`), in the watched namespace (all by default), and keeps each one's address and
readiness. It is the Kubernetes data plane's :class:`gateweave.telemetry.Envoys`: the statistics
of a Gateway are read from each of its Ready pods (those in the Gateway's namespace with its
Deployment's selector labels; for a merged GatewayClass, its Deployment's namespace and
the class's label) at ``status.podIP`` and the stats port
(:data:`gateweave.sinks.kubeinfra.STATS_PORT`), and summed per Gateway by the reader
(gateweave/telemetry/stats.py). Every replica watches (every replica serves ``/metrics``).

The watch re-lists when its resourceVersion has expired (410 Gone), and retries with backoff
when the API server cannot be reached or refuses (RBAC: ``list`` and ``watch`` on ``pods``);
meanwhile the pods last seen are read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from gateweave.ir import ENVOY_APP_LABELS
from gateweave.kube.client import Gone, KubeClient, KubeError, ResourcePath
from gateweave.providers.kubernetes import Backoff
from gateweave.sinks.kubeinfra import STATS_PORT
from gateweave.telemetry import EnvoyId

log = structlog.get_logger("gateweave.kube.pods")
_RETRYABLE = (KubeError, aiohttp.ClientError, TimeoutError, OSError, ValueError)

PODS = ResourcePath("", "v1", "pods", True)
# What every Envoy pod carries whatever its Gateway or merged class.
SELECTOR = ",".join(f"{k}={v}" for k, v in sorted(ENVOY_APP_LABELS.items()))


@dataclass(frozen=True)
class EnvoyPod:
    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str  # status.podIP ("" before it has one)
    ready: bool  # the Ready condition is True


def envoy_pod(raw: Mapping[str, Any]) -> EnvoyPod | None:
    """A Pod object as far as reading its stats goes (``None``: not one)."""
    meta, status = raw.get("metadata"), raw.get("status") or {}
    if not isinstance(meta, dict) or not isinstance(status, dict):
        return None
    labels = meta.get("labels") or {}
    conditions = status.get("conditions") or []
    ready = any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
        if isinstance(conditions, list)
    )
    ip = status.get("podIP")
    return EnvoyPod(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        ip=ip if isinstance(ip, str) else "",
        ready=ready,
    )


def stats_address(ip: str, port: int = STATS_PORT) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class EnvoyPods:
    """The Envoy pods, watched; ``owners()`` says which Envoy (infra IR name) the pods in a
    namespace carrying a label value belong to
    (:meth:`gateweave.sinks.kubeinfra.KubernetesInfra.pod_owners`)."""

    def __init__(
        self,
        client: KubeClient,
        owners: Callable[[], Mapping[tuple[str, str, str], str]],
        *,
        namespace: str = "",
        backoff: tuple[float, float] = (0.2, 10.0),
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.owners = owners
        self.collection = PODS.collection(namespace)
        self.backoff = backoff
        self.watch_timeout = watch_timeout
        self.pods: dict[tuple[str, str], EnvoyPod] = {}  # (namespace, name) -> pod
        self._rv = ""

    # ------------------------------------------------------------ the telemetry's Envoys

    def stats_addresses(self) -> dict[EnvoyId, str]:
        """Each Ready pod of each Gateway: its stats port at its pod address."""
        owners = self.owners()
        labels = sorted({label for _ns, label, _value in owners})
        out: dict[EnvoyId, str] = {}
        for pod in self.pods.values():
            if not (pod.ready and pod.ip):
                continue
            for label in labels:
                owner = owners.get((pod.namespace, label, pod.labels.get(label, "")))
                if owner is not None:
                    out[EnvoyId(owner, pod.name)] = stats_address(pod.ip)
                    break
        return dict(sorted(out.items()))

    def access_log(self, name: str) -> Path | None:
        """None: a pod's access log is its standard output (``kubectl logs``)."""
        return None

    # ------------------------------------------------------------ list and watch

    def _apply(self, etype: str, raw: Any) -> None:
        pod = envoy_pod(raw) if isinstance(raw, dict) else None
        if pod is None:
            return
        if etype == "DELETED":
            self.pods.pop((pod.namespace, pod.name), None)
        elif etype in ("ADDED", "MODIFIED"):
            self.pods[(pod.namespace, pod.name)] = pod

    async def relist(self) -> None:
        items, self._rv = await self.client.list(self.collection, label_selector=SELECTOR)
        self.pods = {}
        for raw in items:
            self._apply("ADDED", raw)

    async def run(self) -> None:
        """List, then watch until cancelled (listing again when needed)."""
        backoff = Backoff(*self.backoff)
        while True:
            try:
                if not self._rv:
                    await self.relist()
                events = 0
                async for event in self.client.watch(
                    self.collection,
                    self._rv,
                    timeout_seconds=self.watch_timeout,
                    label_selector=SELECTOR,
                ):
                    events += 1
                    obj = event.get("object") or {}
                    self._apply(str(event.get("type")), obj)
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self._rv = str(rv)
                    backoff.reset()
                if not events:  # ended without even a bookmark: do not spin
                    await asyncio.sleep(backoff.delay())
            except Gone:
                self._rv = ""
            except asyncio.CancelledError:
                raise
            except _RETRYABLE as exc:
                delay = backoff.delay()
                log.warning(
                    "watching Envoy pods failed; retrying", error=str(exc), retry_in=round(delay, 2)
                )
                await asyncio.sleep(delay)
