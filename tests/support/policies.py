"""Envoy Gateway policy manifests for the live tests."""

from __future__ import annotations

from typing import Any

from gateweave_bench import harness as h

EG = "gateway.envoyproxy.io"


def policy(
    kind: str, name: str, target_kind: str, target: str, spec: dict[str, Any]
) -> dict[str, Any]:
    """A policy of ``kind`` (namespace default) targeting the ``target_kind`` ``target``."""
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": kind,
        "metadata": h.meta(name),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": target_kind, "name": target}
            ],
            **spec,
        },
    }


def backend_traffic_policy(name: str, route: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A BackendTrafficPolicy targeting the HTTPRoute ``route`` (namespace default)."""
    return policy("BackendTrafficPolicy", name, "HTTPRoute", route, spec)


def client_traffic_policy(name: str, gateway: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A ClientTrafficPolicy targeting the Gateway ``gateway`` (namespace default)."""
    return policy("ClientTrafficPolicy", name, "Gateway", gateway, spec)
