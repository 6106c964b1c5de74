"""Envoy Gateway policy manifests for the live tests."""

from __future__ import annotations

from typing import Any

from gateweave_bench import harness as h

EG = "gateway.envoyproxy.io"


def backend_traffic_policy(name: str, route: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A BackendTrafficPolicy targeting the HTTPRoute ``route`` (namespace default)."""
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": h.meta(name),
        "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route}], **spec},
    }


def client_traffic_policy(name: str, gateway: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A ClientTrafficPolicy targeting the Gateway ``gateway`` (namespace default)."""
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "ClientTrafficPolicy",
        "metadata": h.meta(name),
        "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}], **spec},
    }
