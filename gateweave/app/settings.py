"""Everything ``gateweave serve`` is configured with, in one frozen value.

The command line builds a :class:`Settings` once (so do the harnesses that run gateweave in
their own process: the conformance runner, the quickstart, tests); every part the
composition root wires reads its piece of it, and nothing else. The controller name, for
one, is read from here by the translation's options and by the status sink alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gateweave import DEFAULT_CONTROLLER_NAME, ir
from gateweave.admin import DEFAULT_ADMIN_ADDRESS
from gateweave.admintoken import TOKEN_ENV, TOKEN_FILE, read_token_file, write_new_token
from gateweave.infra.netenv import privileged_ports_below
from gateweave.infra.statedir import default_state_dir
from gateweave.translate.options import TranslateOptions

if TYPE_CHECKING:
    from gateweave.kube.xdsca import CertLifetimes

DEFAULT_ADDRESS_POOL = "127.10.0.0/16"


@dataclass(frozen=True)
class FileSettings:
    """Objects from a directory of manifests (the file provider)."""

    config_dir: str
    debounce_ms: int = 50  # how long a burst of file events settles before it is read


@dataclass(frozen=True)
class KubeSettings:
    """Objects from the Kubernetes API server; statuses written through the status subresource."""

    kubeconfig: str | None = None  # None: in-cluster, else $KUBECONFIG / ~/.kube/config
    namespace: str | None = None  # None: every namespace
    leader_elect: bool = False
    lease_namespace: str = (
        ""  # "": the pod's namespace in a cluster, else namespace, else "default"
    )
    lease_name: str = "gateweave-controller"
    identity: str = ""  # "": hostname + pid
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    status_rate: float = 20.0  # status writes per second (token bucket) ...
    status_burst: int = 50  # ... and how many may be saved up
    watch_timeout: int = 300
    backoff: tuple[float, float] = (0.2, 10.0)  # a broken watch's retry delay: first, at most


@dataclass(frozen=True)
class HostDataplane:
    """Envoy processes on this host, one per Gateway, fed by an xDS server on a unix socket in
    the state directory (gateweave/app/dataplane.py), where their records and logs live too."""

    # None: derived from what is served (gateweave.infra.statedir.default_state_dir)
    state_dir: str | None = None
    delta: bool = False  # the Envoys use the delta xDS protocol (else state of the world)


def _cert_lifetimes() -> CertLifetimes:
    # Imported here: kube.xdsca brings the Kubernetes client (kubernetes_asyncio, about 43 MB
    # resident), which only the Kubernetes provider and data plane use.
    from gateweave.kube.xdsca import CertLifetimes

    return CertLifetimes()


@dataclass(frozen=True)
class KubeDataplane:
    """An Envoy Deployment and Service per Gateway, fed by the xDS server this process runs on
    ``xds_bind:xds_port``, which the pods reach at ``xds_host`` (the control plane's Service)."""

    xds_bind: str = "0.0.0.0"
    xds_port: int = 18000
    xds_host: str = "gateweave.gateweave-system.svc"
    envoy_image: str = ""  # "": gateweave.sinks.kubeinfra.DEFAULT_IMAGE
    service_type: str = "LoadBalancer"
    # xDS is mutual TLS with certificates from gateweave's CA (a Secret in the controller's
    # namespace, gateweave/kube/xdsca.py); plain text only when asked for (development).
    xds_plaintext: bool = False
    certificates: CertLifetimes = field(default_factory=_cert_lifetimes)


@dataclass(frozen=True)
class AdminSettings:
    address: str = DEFAULT_ADMIN_ADDRESS  # HOST:PORT (port 0: a free one)
    # The bearer token's file (gateweave/admintoken.py), else the token itself (serve: from
    # $GATEWEAVE_ADMIN_TOKEN, e.g. a Secret in Kubernetes); neither: a random token written
    # to <state dir>/admin-token at every start.
    token_file: str | None = None
    token: str | None = field(default=None, repr=False)
    metrics_auth: bool = False  # /metrics needs the token too


@dataclass(frozen=True)
class RuntimeSettings:
    """The processor: how a burst of events is coalesced into one translation."""

    window: float = 0.05  # quiet time that ends a burst arriving while busy
    max_delay: float = 0.5  # bound from the first pending event to its translation
    # Also translate every change in full and fail the translation on any difference from the
    # incremental result (slow; tests and CI run with it: GATEWEAVE_CHECK_INCREMENTAL=1).
    check_incremental: bool = False


@dataclass(frozen=True)
class Settings:
    provider: FileSettings | KubeSettings
    # None: translate and write statuses only (a valid Gateway counts as Programmed).
    dataplane: HostDataplane | KubeDataplane | None = field(default_factory=HostDataplane)
    controller_name: str = DEFAULT_CONTROLLER_NAME
    address_pool: str = (
        DEFAULT_ADDRESS_POOL  # standalone addresses of Gateways without spec.addresses...
    )
    default_address: str = (
        "pool"  # ... or this address (e.g. 0.0.0.0: every interface); "pool": the pool
    )
    admin: AdminSettings = field(default_factory=AdminSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    # Every Gateway's access log (file, stdout, off) and OpenTelemetry tracing (serve
    # --access-log, --tracing-endpoint, --tracing-sampling), the defaults below each Gateway's
    # GatewayParameters (translate/parameters.py; there, in the Kubernetes data plane an access
    # log "file" becomes the Envoy pod's standard output).
    telemetry: ir.Telemetry = field(default_factory=ir.Telemetry)

    def __post_init__(self) -> None:
        if isinstance(self.dataplane, KubeDataplane) and not isinstance(
            self.provider, KubeSettings
        ):
            raise ValueError("the Kubernetes data plane needs the Kubernetes provider")

    def state_dir(self) -> Path:
        """The host data plane's state directory: as given, else one per served directory."""
        given = self.dataplane.state_dir if isinstance(self.dataplane, HostDataplane) else None
        if given:
            return Path(given)
        served = (
            self.provider.config_dir if isinstance(self.provider, FileSettings) else "kubernetes"
        )
        return default_state_dir(served)

    def admin_token(self) -> tuple[str, str]:
        """The admin API's token and where it is (said to a client refused): read from
        ``admin.token_file``, else ``admin.token``, else a new one written to the state
        directory."""
        if self.admin.token_file:
            return read_token_file(self.admin.token_file), self.admin.token_file
        if self.admin.token:
            return self.admin.token, f"${TOKEN_ENV} of the server"
        path = self.state_dir() / TOKEN_FILE
        return write_new_token(path), str(path)

    def translate_options(self) -> TranslateOptions:
        """The translation's options: in the Kubernetes data plane listeners bind 0.0.0.0 in
        pods and Gateway addresses come from their Services."""
        kubernetes = isinstance(self.dataplane, KubeDataplane)
        return TranslateOptions(
            controller_name=self.controller_name,
            address_pool=self.address_pool,
            default_address=self.default_address,
            privileged_ports_below=privileged_ports_below()
            if isinstance(self.dataplane, HostDataplane)
            else 0,
            address_mode="kubernetes" if kubernetes else "standalone",
            default_concurrency=0 if kubernetes else machine_cpus(),
            telemetry=self.telemetry,
        )


def machine_cpus() -> int:
    """The CPUs this process may run on (its affinity), the default
    of each Envoy's --concurrency.
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
