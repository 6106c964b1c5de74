"""Envoy bootstrap for one Gateway's Envoy on this host.

Everything but the admin endpoint comes over ADS: the node id is the Gateway name
(``"namespace/name"``), Clusters and Listeners are fetched over an aggregated stream to
the control plane (HTTP/2, quick reconnects), and the listeners bind the Gateway's
address as delivered over LDS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

XDS_CLUSTER = "xds_cluster"
_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_CONN_LIMIT = (
    "type.googleapis.com/"
    "envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig"
)


@dataclass(frozen=True)
class BootstrapParams:
    node_id: str  # the Gateway: "namespace/name"
    xds_host: str
    xds_port: int
    admin_port: int
    admin_host: str = "127.0.0.1"
    delta: bool = False  # Delta xDS instead of State of the World
    node_cluster: str = "gateweave"
    metadata: Mapping[str, str] = field(default_factory=dict)
    max_connections: int = 50_000  # global downstream connection limit


def _socket(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def render(params: BootstrapParams) -> dict[str, Any]:
    """The bootstrap as a JSON-ready dict (v3 API)."""
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
                            {
                                "lb_endpoints": [
                                    {
                                        "endpoint": {
                                            "address": _socket(params.xds_host, params.xds_port)
                                        }
                                    }
                                ]
                            }
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


def write(path: Path, params: BootstrapParams) -> Path:
    """Write the bootstrap as JSON (Envoy picks the format from the ``.json`` suffix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(render(params), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path
