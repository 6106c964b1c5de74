"""The composition root: one :class:`Settings`, built once by the command line, and
:func:`run`, which wires every part from it (gateweave/app/root.py).

* ``settings.py``: the settings, frozen, one piece per part (provider, data plane, admin
  API, runtime) and the controller name that translation and status sinks share;
* ``root.py``: :func:`run` - store, provider, translator, runtime, status sink, admin API;
* ``dataplane.py``: the one place the data plane is chosen (none, host, Kubernetes);
* ``kube.py``: the Kubernetes provider's parts (client, watches, status writer, leader election).
"""

from gateweave.app.root import App, Hooks, run
from gateweave.app.settings import (
    AdminSettings,
    FileSettings,
    HostDataplane,
    KubeDataplane,
    KubeSettings,
    RuntimeSettings,
    Settings,
)

__all__ = [
    "AdminSettings",
    "App",
    "FileSettings",
    "Hooks",
    "HostDataplane",
    "KubeDataplane",
    "KubeSettings",
    "RuntimeSettings",
    "Settings",
    "run",
]
