"""The traffic the Envoys see, named as the Gateway API names it.

* :mod:`.stats` reads every running Envoy's statistics (its admin ``/stats`` as JSON, with
  bounded timeouts) and names them with the xDS IR: Envoy's stat prefixes become the
  Gateway, listener, route, rule and backend they were made from;
* :mod:`.prometheus` turns them into the data-plane metric families of ``/metrics``;
* :mod:`.traffic` counts requests and errors per route and Gateway with their rates
  (``/api/traffic``);
* :mod:`.accesslog` reads a Gateway's access log for ``gateweave logs``.

The Envoys themselves are found through an :class:`Envoys` (the host data plane's
supervisor is one); the Kubernetes data plane has none here (its Envoys' stats are
scraped from the pods, their access logs are the pods' logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Envoys(Protocol):
    """The running Envoys, by Gateway (``"namespace/name"``)."""

    def admin_addresses(self) -> dict[str, str]:
        """Each running Envoy's admin ``host:port``."""
        ...

    def access_log(self, name: str) -> Path | None:
        """Where the Envoy of Gateway ``name`` writes its access log file, if it has one."""
        ...
