"""Envoy bootstrap for one Gateway's Envoy on this host.

Everything but the admin endpoint comes over ADS: the node id is the Gateway name
(``"namespace/name"``), Clusters and Listeners are fetched over an aggregated stream to
the control plane (HTTP/2, quick reconnects), and the listeners bind the Gateway's
address as delivered over LDS.

With :class:`XdsClientTls` the xDS connection is mutual TLS: Envoy presents the client
certificate in ``cert_dir`` (a mounted Secret: :data:`CERT_FILE`, :data:`KEY_FILE`) and
checks the server's against :data:`CA_FILE` and its name. Both come through file-based SDS
(:func:`sds_files`, beside the bootstrap) whose certificates watch ``cert_dir``: a renewed
certificate (Kubernetes swaps the Secret's files at once through its ``..data`` link) is
picked up without a restart.

With ``stats_port`` (the Kubernetes data plane's pods, whose admin stays on loopback) a static
listener on ``0.0.0.0:stats_port`` passes a ``GET`` of exactly the ``stats_paths`` (path without
query) to the admin through a static cluster (:func:`stats_listener`); any other method or path
is answered 404 by Envoy itself, so nothing but those reads reaches the admin from outside.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateweave.ir import InfraGateway

XDS_CLUSTER = "xds_cluster"
_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_CONN_LIMIT = (
    "type.googleapis.com/"
    "envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig"
)


_TLS_SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
_UPSTREAM_TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
# The files of a Gateway's xDS client Secret, and the SDS files naming them.
CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"
CLIENT_SDS, CA_SDS = "xds-client-sds.json", "xds-ca-sds.json"


@dataclass(frozen=True)
class XdsClientTls:
    """Mutual TLS to the xDS server."""

    server_name: str  # the DNS name or IP address the server's certificate must carry
    cert_dir: str  # CERT_FILE, KEY_FILE, CA_FILE (the Gateway's mounted Secret)
    sds_dir: str  # CLIENT_SDS, CA_SDS (sds_files; beside the bootstrap)


# With this flag Envoy skips its walk over every field of each xDS resource it receives, which
# looks for unknown and deprecated fields (the proto's validation rules still run). The walk
# reflects over a port's whole RouteConfiguration on every route change: a quarter to a third
# of Envoy's CPU per change (docs/benchmarks.md, "Envoy's walk over every field of an update").
# What the walk would report is checked before: an unknown field is ignored either way (the
# walk only warns), and `envoy --mode validate` of every conformance case rejects one;
# tests/xds/test_no_deprecated_fields.py finds no deprecated field or value set.
IGNORE_UNKNOWN_DYNAMIC = "--ignore-unknown-dynamic-fields"
# What asks for Envoy's strict check instead (a GatewayParameters' extraArgs): it is then left
# alone, as Envoy would let the other flag win.
REJECT_UNKNOWN_DYNAMIC = "--reject-unknown-dynamic-fields"


def envoy_flags(extra_args: tuple[str, ...]) -> tuple[str, ...]:
    """Envoy command-line flags every Envoy of gateweave runs with (the host data plane and the
    Kubernetes pods), before the Gateway's own ``extra_args``. None that ``extra_args`` decide
    already: Envoy refuses to start on a flag given twice."""
    if REJECT_UNKNOWN_DYNAMIC in extra_args or IGNORE_UNKNOWN_DYNAMIC in extra_args:
        return ()
    return (IGNORE_UNKNOWN_DYNAMIC,)


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def sds_files(tls: XdsClientTls) -> dict[str, str]:
    """The SDS files (name -> JSON) the bootstrap's xDS TLS reads, for ``tls.sds_dir``."""
    watched = {"path": tls.cert_dir}
    client = {
        "@type": _TLS_SECRET,
        "name": "xds_client",
        "tls_certificate": {
            "certificate_chain": {"filename": f"{tls.cert_dir}/{CERT_FILE}"},
            "private_key": {"filename": f"{tls.cert_dir}/{KEY_FILE}"},
            "watched_directory": watched,
        },
    }
    ca = {
        "@type": _TLS_SECRET,
        "name": "xds_ca",
        "validation_context": {
            "trusted_ca": {"filename": f"{tls.cert_dir}/{CA_FILE}"},
            "watched_directory": watched,
            "match_typed_subject_alt_names": [
                {
                    "san_type": "IP_ADDRESS" if is_ip(tls.server_name) else "DNS",
                    "matcher": {"exact": tls.server_name},
                }
            ],
        },
    }
    return {
        name: json.dumps({"resources": [secret]}, indent=2, sort_keys=True) + "\n"
        for name, secret in ((CLIENT_SDS, client), (CA_SDS, ca))
    }


def _transport_socket(tls: XdsClientTls) -> dict[str, Any]:
    def sds(name: str, file: str) -> dict[str, Any]:
        return {
            "name": name,
            "sds_config": {
                "path_config_source": {"path": f"{tls.sds_dir}/{file}"},
                "resource_api_version": "V3",
            },
        }

    context: dict[str, Any] = {
        "@type": _UPSTREAM_TLS,
        "common_tls_context": {
            "tls_certificate_sds_secret_configs": [sds("xds_client", CLIENT_SDS)],
            "validation_context_sds_secret_config": sds("xds_ca", CA_SDS),
        },
    }
    if not is_ip(tls.server_name):
        context["sni"] = tls.server_name
    return {"name": "envoy.transport_sockets.tls", "typed_config": context}


@dataclass(frozen=True)
class BootstrapParams:
    node_id: str  # the Gateway: "namespace/name"
    xds_host: str
    xds_port: int
    admin_port: int
    xds_pipe: str = ""  # the xDS server's unix socket (then xds_host and xds_port are unused)
    admin_host: str = "127.0.0.1"
    delta: bool = False  # Delta xDS instead of State of the World
    node_cluster: str = "gateweave"
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the node's (see node_metadata)
    max_connections: int = 50_000  # global downstream connection limit
    tls: XdsClientTls | None = None  # mutual TLS to the xDS server (else plain text)
    stats_port: int = 0  # a listener passing GETs of stats_paths to the admin (0: none)
    stats_paths: tuple[str, ...] = ()


def node_metadata(gateway: InfraGateway) -> dict[str, Any]:
    """The node metadata of a Gateway's Envoy: the Gateway it serves, and its
    ``spec.infrastructure`` labels and annotations (as every object generated for it carries)."""
    out: dict[str, Any] = {
        "namespace": gateway.namespace,
        "gateway": gateway.gateway_name,
        "gateway_class": gateway.gateway_class,
    }
    if gateway.labels:
        out["labels"] = dict(sorted(gateway.labels.items()))
    if gateway.annotations:
        out["annotations"] = dict(sorted(gateway.annotations.items()))
    return out


def _socket(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _xds_address(params: BootstrapParams) -> dict[str, Any]:
    if params.xds_pipe:
        return {"pipe": {"path": params.xds_pipe}}
    return _socket(params.xds_host, params.xds_port)


STATS_LISTENER = "gateweave-stats"  # the stats port's listener (not a name translate makes)
ADMIN_CLUSTER = "gateweave-admin"  # the admin, as the stats listener's upstream
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"


def stats_listener(params: BootstrapParams) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stats port's listener and the admin cluster it routes to: ``GET`` of each of
    ``params.stats_paths`` exactly (the path without its query; normalized first, so no
    ``..`` or doubled slash reaches another admin page), nothing else (Envoy's 404)."""
    get = [{"name": ":method", "string_match": {"exact": "GET"}}]
    routes = [
        {"match": {"path": path, "headers": get}, "route": {"cluster": ADMIN_CLUSTER}}
        for path in params.stats_paths
    ]
    manager = {
        "@type": _HCM + "HttpConnectionManager",
        "stat_prefix": "gateweave_stats",
        "normalize_path": True,
        "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "route_config": {
            "name": STATS_LISTENER,
            "virtual_hosts": [{"name": STATS_LISTENER, "domains": ["*"], "routes": routes}],
        },
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": _ROUTER}}],
    }
    listener = {
        "name": STATS_LISTENER,
        "address": _socket("0.0.0.0", params.stats_port),
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": manager,
                    }
                ]
            }
        ],
    }
    cluster = {
        "name": ADMIN_CLUSTER,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": ADMIN_CLUSTER,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": _socket(params.admin_host, params.admin_port)}}
                    ]
                }
            ],
        },
    }
    return listener, cluster


def render(params: BootstrapParams) -> dict[str, Any]:
    """The bootstrap as a JSON-ready dict (v3 API)."""
    doc = _render(params)
    if params.tls is not None:
        doc["static_resources"]["clusters"][0]["transport_socket"] = _transport_socket(params.tls)
    if params.stats_port:
        listener, cluster = stats_listener(params)
        doc["static_resources"]["listeners"] = [listener]
        doc["static_resources"]["clusters"].append(cluster)
    return doc


def _render(params: BootstrapParams) -> dict[str, Any]:
    ads_source = {"ads": {}, "resource_api_version": "V3"}
    return {
        "node": {
            "id": params.node_id,
            "cluster": params.node_cluster,
            "metadata": dict(sorted(params.metadata.items())),
        },
        "admin": {"address": _socket(params.admin_host, params.admin_port)},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC" if params.delta else "GRPC",
                "transport_api_version": "V3",
                "set_node_on_first_message_only": True,
                "grpc_services": [
                    {
                        "envoy_grpc": {
                            "cluster_name": XDS_CLUSTER,
                            "retry_policy": {
                                "retry_back_off": {
                                    "base_interval": "0.1s",
                                    "max_interval": "0.5s",
                                }
                            },
                        }
                    }
                ],
            },
            "cds_config": ads_source,
            "lds_config": ads_source,
        },
        "static_resources": {
            "clusters": [
                {
                    "name": XDS_CLUSTER,
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "load_assignment": {
                        "cluster_name": XDS_CLUSTER,
                        "endpoints": [
                            {"lb_endpoints": [{"endpoint": {"address": _xds_address(params)}}]}
                        ],
                    },
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": _HTTP_OPTIONS,
                            "explicit_http_config": {"http2_protocol_options": {}},
                        }
                    },
                }
            ]
        },
        # Envoy's runtime has only the layer its admin API changes (POST /runtime_modify, on
        # loopback): nothing is set, so every runtime value keeps Envoy's default, the limits
        # translate applies among them (translate/regex.py).
        "layered_runtime": {"layers": [{"name": "admin", "admin_layer": {}}]},
        "overload_manager": {
            "resource_monitors": [
                {
                    "name": "envoy.resource_monitors.global_downstream_max_connections",
                    "typed_config": {
                        "@type": _CONN_LIMIT,
                        "max_active_downstream_connections": params.max_connections,
                    },
                }
            ]
        },
    }


def content(params: BootstrapParams) -> bytes:
    """The bootstrap file's bytes: JSON (Envoy picks the format from the ``.json`` suffix)."""
    return (json.dumps(render(params), indent=2, sort_keys=True) + "\n").encode()


def digest(params: BootstrapParams) -> str:
    """What an Envoy started with this bootstrap is recorded with (gateweave.infra.statedir)."""
    return hashlib.sha256(content(params)).hexdigest()


def write(path: Path, params: BootstrapParams) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(content(params))
    tmp.replace(path)
    return path
