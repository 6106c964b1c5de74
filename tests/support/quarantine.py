"""Route objects for the quarantine tests: a Gateway with one HTTP listener and HTTPRoutes to
one Service, each on its own path prefix."""

from __future__ import annotations

from typing import Any

from gateweave import ir
from tests.support.specletter_objects import models

NS = "default"
GW = "gateway.networking.k8s.io/v1"


def gateway_objects() -> list[dict[str, Any]]:
    """A GatewayClass, a Gateway with one HTTP listener on port 8080 and a Service ``svc``."""
    return [
        {
            "apiVersion": GW,
            "kind": "GatewayClass",
            "metadata": {"name": "gw"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        {
            "apiVersion": GW,
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": NS},
            "spec": {
                "gatewayClassName": "gw",
                "listeners": [{"name": "http", "protocol": "HTTP", "port": 8080}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": NS},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        },
    ]


def route_objects(*routes: str) -> list[Any]:
    raws = gateway_objects()
    for name in routes:
        raws.append(
            {
                "apiVersion": GW,
                "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "parentRefs": [{"name": "gw"}],
                    "rules": [
                        {
                            "matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}],
                            "backendRefs": [{"name": "svc", "port": 80}],
                        }
                    ],
                },
            }
        )
    return models(raws)


def route_names(gw: ir.XdsGateway) -> list[str]:
    return [r.name for p in gw.ports if p.http for vh in p.http.virtual_hosts for r in vh.routes]
