"""Inputs of a translation besides the objects themselves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.ir import Telemetry


class DataplaneState(msgspec.Struct, frozen=True, kw_only=True):
    """What the data plane reported for one Gateway (fed back in by the runtime).

    ``acked``: Envoy acknowledged the current configuration. ``error``: Envoy's message
    for the last rejected configuration (a NACK), or why the proxy is not running.
    """

    acked: bool = False
    error: str = ""
    # Envoy pods (Kubernetes: each pod is its own xDS client; empty for one Envoy): those
    # running the current configuration, those connected that do not (yet), and the pod
    # whose rejection ``error`` is.
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    rejected_by: str = ""


class TranslateOptions(msgspec.Struct, frozen=True, kw_only=True):
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # How Gateways get addresses (see translate/addresses.py). "standalone": a loopback
    # address per Gateway that its listeners bind. "kubernetes" (serve --dataplane
    # kubernetes): listeners bind 0.0.0.0 in the Gateway's Envoy pod, spec.addresses are
    # requested from the Gateway's Service, and status.addresses are the Service's.
    address_mode: Literal["standalone", "kubernetes"] = "standalone"
    # Standalone mode: Gateways without a usable spec.addresses get an address from this pool...
    address_pool: str = "127.10.0.0/16"
    # ... or, unless "pool", bind this address (serve --default-address, e.g. 0.0.0.0).
    default_address: str = "pool"
    # Standalone mode: the IP addresses assigned to this host's interfaces (read by serve at
    # start and whenever they change); loopback and unspecified addresses are usable anyway.
    local_addresses: tuple[str, ...] = ()
    # Ports below this one the Envoys may not bind (no root, no CAP_NET_BIND_SERVICE: serve
    # passes net.ipv4.ip_unprivileged_port_start); 0: every port.
    privileged_ports_below: int = 0
    # Per Gateway ("ns/name"): the data plane's report. None: no data plane (offline
    # translation, --no-dataplane), so a valid Gateway counts as Programmed.
    dataplane: Mapping[str, DataplaneState] | None = None
    # Route objects a Gateway's Envoy rejected (the data plane found them; the runtime keeps
    # each until the object changes), with who rejected it and Envoy's message: each is left
    # out of the xDS IR, Accepted=False/UnsupportedValue with that message (translate/routes.py).
    rejected: Mapping[tuple[str, str, str], str] = msgspec.field(default_factory=dict)
    # Every Gateway's access log and tracing (serve --access-log, --tracing-endpoint).
    telemetry: Telemetry = Telemetry()
    # Envoy's --concurrency where no GatewayParameters sets it: serve passes the CPUs this
    # machine gives it (host data plane); 0 leaves it to Envoy (a pod: its node's CPUs).
    default_concurrency: int = 0
