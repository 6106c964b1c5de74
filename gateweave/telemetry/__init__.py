"""The traffic the Envoys see, named as the Gateway API names it.

* :mod:`.stats` reads every running Envoy's statistics (its admin ``/stats`` as JSON, with
  bounded timeouts) and names them with the xDS IR: Envoy's stat prefixes become the
  Gateway, listener, route, rule and backend they were made from;
* :mod:`.prometheus` turns them into the data-plane metric families of ``/metrics``;
* :mod:`.traffic` counts requests and errors per route and Gateway with their rates
  (``/api/traffic``);
* :mod:`.accesslog` reads a Gateway's access log for ``gateweave logs``.

The Envoys themselves are found through an :class:`Envoys`, the one place that says which
Envoys are read: the host data plane's supervisor (each Gateway's Envoy's admin on loopback),
or the Kubernetes data plane's :class:`gateweave.kube.pods.EnvoyPods` (each Ready pod's stats
port; their access logs are the pods' logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Protocol


class EnvoyId(NamedTuple):
    """One Envoy whose statistics are read."""

    gateway: str  # the Gateway (infra IR name, "namespace/name") it serves
    pod: str = ""  # a Kubernetes Envoy pod's name; "" for the Envoy on this host


class Envoys(Protocol):
    """The running Envoys, by Gateway (``"namespace/name"``)."""

    def stats_addresses(self) -> dict[EnvoyId, str]:
        """Where each running Envoy's statistics are read (``host:port`` serving Envoy's admin
        ``/stats`` and ``/stats/prometheus``)."""
        ...

    def access_log(self, name: str) -> Path | None:
        """Where the Envoy of Gateway ``name`` writes its access log file, if it has one."""
        ...
