"""What the runtime publishes to: three sinks, each a protocol here, each implementation in
its own module beside the others.

* **status** (every object's computed status): ``localstatus.LocalStatusSink`` standalone
  (kept in memory; the admin API serves it), ``kubestatus.KubeStatusSink`` in Kubernetes (the
  ``status`` subresource). Both merge with ``statusmerge.merge_status``.
* **xDS** (each Gateway's xDS IR): ``xds.XdsPublisher``, the ADS server (both data planes).
* **infra** (each Gateway's infra IR): ``hostinfra.HostInfraSink``, Envoy processes on this
  host; ``kubeinfra.KubernetesInfra``, an Envoy Deployment and Service per Gateway.

What a sink needs of a translated object travels in what it is handed, never read from the
store (e.g. ``InfraGateway.uid`` for the ownerReferences of a Gateway's Kubernetes objects);
the Kubernetes status sink reads the store only for what the API server holds (the status and
resourceVersion it writes over). Which implementations run is decided in one place, the
composition root (:mod:`gateweave.app`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from gateweave.api.kinds import Key
from gateweave.ir import InfraGateway, XdsGateway

StatusKey = tuple[str, str, str]  # (kind, namespace, name), as translate keys statuses


class StatusSink(Protocol):
    """Takes every object's computed status (without times, only this controller's entries)."""

    def publish(
        self,
        computed: Mapping[StatusKey, Mapping[str, Any]],
        stored: Callable[[Key], Mapping[str, Any] | None],
    ) -> Sequence[Key]:
        """Merge each computed status into the stored one (``stored(key)``: the status the
        object came with) and write what differs; the keys written (or queued)."""
        ...

    def retain(self, keys: Collection[Key]) -> None:
        """Forget what is held for objects that no longer exist."""
        ...

    def get(self, key: Key) -> Mapping[str, Any] | None:
        """The status as this sink last wrote (or knows) it."""
        ...


class XdsSink(Protocol):
    """Takes each Gateway's xDS IR: ``changed`` (new or different) and ``removed`` names."""

    def update(
        self, changed: Mapping[str, XdsGateway], removed: Sequence[str]
    ) -> Awaitable[None] | None: ...


class InfraSink(Protocol):
    """Takes each Gateway's infrastructure IR: ``changed`` and ``removed`` names."""

    def update(
        self, changed: Mapping[str, InfraGateway], removed: Sequence[str]
    ) -> Awaitable[None] | None: ...
