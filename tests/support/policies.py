"""Envoy Gateway policy manifests: for the live tests, and a whole system of them for the
property tests (:func:`policy_system`)."""

from __future__ import annotations

import base64
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


# ---------------------------------------------------------------- a system of every kind, for
# the property tests (tests/support/variants.py's "policies" set)

_GW = "gateway.networking.k8s.io"
_NS = "pol"
_HTPASSWD = "alice:{SHA}" + "A" * 27 + "=\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _at(day: int) -> str:
    return f"2026-01-{day:02d}T00:00:00Z"


def _target(kind: str, name: str, section: str | None = None) -> dict[str, Any]:
    ref = {"group": _GW, "kind": kind, "name": name}
    if section:
        ref["sectionName"] = section
    return ref


def _policy(
    kind: str,
    name: str,
    day: int,
    spec: dict[str, Any],
    *,
    refs: list[dict[str, Any]] | None = None,
    selectors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body = dict(spec)
    if refs is not None:
        body["targetRefs"] = refs
    if selectors is not None:
        body["targetSelectors"] = selectors
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": _NS, "creationTimestamp": _at(day)},
        "spec": body,
    }


def _http_route(
    name: str, parents: list[dict[str, Any]], rules: list[str], labels: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{_GW}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": _NS, "labels": labels, "creationTimestamp": _at(1)},
        "spec": {
            "parentRefs": parents,
            "rules": [
                {
                    "name": rule,
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{name}/{rule}"}}],
                    "backendRefs": [{"name": "svc", "port": 80}],
                }
                for rule in rules
            ],
        },
    }


def _service(name: str, port: int, address: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": _NS},
            "spec": {"ports": [{"name": "http", "port": port, "targetPort": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-1",
                "namespace": _NS,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        },
    ]


def policy_system() -> list[dict[str, Any]]:
    """Two Gateways (listeners HTTP, HTTP, HTTPS; HTTP), four HTTPRoutes (named rules, labels),
    the Secrets, ConfigMap and Services policies read, and policies of the three kinds on
    Gateways, listeners, routes and rules, by targetRefs and targetSelectors, with conflicts
    (same target, different ages), a target that never exists, unimplemented fields."""
    from gateweave_bench.objects import CERT_PEM, KEY_PEM

    tls = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "pol-tls"}]}
    gateways = [
        {
            "apiVersion": f"{_GW}/v1",
            "kind": "Gateway",
            "metadata": {"name": name, "namespace": _NS, "labels": {"tier": tier}},
            "spec": {"gatewayClassName": "pol-class", "listeners": listeners},
        }
        for name, tier, listeners in (
            (
                "gw-a",
                "edge",
                [
                    {"name": "http", "port": 8080, "protocol": "HTTP"},
                    {"name": "other", "port": 8081, "protocol": "HTTP"},
                    {
                        "name": "https",
                        "port": 8443,
                        "protocol": "HTTPS",
                        "hostname": "*.pol.example",
                        "tls": tls,
                    },
                ],
            ),
            ("gw-b", "core", [{"name": "http", "port": 8090, "protocol": "HTTP"}]),
        )
    ]
    limit = {
        "type": "Local",
        "local": {
            "rules": [
                {"limit": {"requests": 10, "unit": "Minute"}},
                {
                    "clientSelectors": [{"headers": [{"name": "x-plan", "value": "free"}]}],
                    "limit": {"requests": 2, "unit": "Minute"},
                    "xRateLimitHeaders": "DraftVersion03",
                },
            ]
        },
    }
    override = {
        "match": {"statusCodes": [{"type": "Value", "value": 500}]},
        "response": {
            "contentType": "text/plain",
            "body": {
                "type": "ValueRef",
                "valueRef": {"group": "", "kind": "ConfigMap", "name": "body"},
            },
        },
    }
    team_a = [{"group": _GW, "kind": "HTTPRoute", "matchLabels": {"team": "a"}}]
    ext = {"http": {"backendRefs": [{"name": "auth", "port": 9000}]}}
    return [
        {
            "apiVersion": f"{_GW}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "pol-class"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        *gateways,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "pol-tls", "namespace": _NS},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": _b64(CERT_PEM), "tls.key": _b64(KEY_PEM)},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "users", "namespace": _NS},
            "data": {".htpasswd": _b64(_HTPASSWD)},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "body", "namespace": _NS},
            "data": {"response.body": "overridden"},
        },
        *_service("svc", 80, "127.0.0.1"),
        *_service("auth", 9000, "127.0.0.2"),
        _http_route("r1", [{"name": "gw-a"}], ["main", "extra"], {"team": "a"}),
        _http_route("r2", [{"name": "gw-a", "sectionName": "http"}], ["main"], {"team": "b"}),
        _http_route("r3", [{"name": "gw-b"}], ["main"], {"team": "a"}),
        _http_route(
            "r4", [{"name": "gw-a", "sectionName": "https"}, {"name": "gw-b"}], ["main"], {}
        ),
        # BackendTrafficPolicy: Gateway (and a younger one there), listener, route, rule,
        # selector (older than the route's own: it takes r1), a target that never exists
        _policy(
            "BackendTrafficPolicy",
            "btp-gw",
            2,
            {"timeout": {"http": {"requestTimeout": "5s"}}},
            refs=[_target("Gateway", "gw-a")],
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-gw-young",
            9,
            {"retry": {"numRetries": 2}},
            refs=[_target("Gateway", "gw-a")],
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-listener",
            3,
            {"loadBalancer": {"type": "Random"}},
            refs=[_target("Gateway", "gw-a", "other")],
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-route",
            5,
            {"responseOverride": [override]},
            refs=[_target("HTTPRoute", "r1"), _target("HTTPRoute", "r4")],
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-rule",
            6,
            {"rateLimit": limit},
            refs=[_target("HTTPRoute", "r1", "main")],
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-sel",
            4,
            {"circuitBreaker": {"maxConnections": 10}},
            selectors=team_a,
        ),
        _policy(
            "BackendTrafficPolicy",
            "btp-missing",
            7,
            {"useClientProtocol": True},
            refs=[_target("HTTPRoute", "r9")],
        ),
        # ClientTrafficPolicy: Gateway (and a younger one), listener, selector
        _policy(
            "ClientTrafficPolicy",
            "ctp-gw",
            2,
            {
                "clientIPDetection": {"xForwardedFor": {"numTrustedHops": 1}},
                # read by the routes' rate limits (effects.py), not by the listener
                "headers": {"disableRateLimitHeaders": True},
            },
            refs=[_target("Gateway", "gw-a")],
        ),
        _policy(
            "ClientTrafficPolicy",
            "ctp-gw-young",
            8,
            {"timeout": {"http": {"idleTimeout": "20s"}}},
            refs=[_target("Gateway", "gw-a")],
        ),
        _policy(
            "ClientTrafficPolicy",
            "ctp-listener",
            3,
            {"timeout": {"http": {"idleTimeout": "30s"}}},
            refs=[_target("Gateway", "gw-a", "other")],
        ),
        _policy(
            "ClientTrafficPolicy",
            "ctp-sel",
            4,
            {"headers": {"withUnderscoresAction": "RejectRequest"}},
            selectors=[{"group": _GW, "kind": "Gateway", "matchLabels": {"tier": "core"}}],
        ),
        # SecurityPolicy: route (basic auth from a Secret; a younger one conflicts), Gateway,
        # listener, a route with extAuth (a Service it resolves)
        _policy(
            "SecurityPolicy",
            "sp-route",
            2,
            {"basicAuth": {"users": {"name": "users"}}},
            refs=[_target("HTTPRoute", "r2")],
        ),
        _policy(
            "SecurityPolicy",
            "sp-route-young",
            6,
            {"cors": {"allowOrigins": ["https://a.example"]}},
            refs=[_target("HTTPRoute", "r2")],
        ),
        _policy(
            "SecurityPolicy",
            "sp-gw",
            3,
            {
                "authorization": {
                    "defaultAction": "Deny",
                    "rules": [{"action": "Allow", "principal": {"clientCIDRs": ["10.0.0.0/8"]}}],
                }
            },
            refs=[_target("Gateway", "gw-b")],
        ),
        _policy(
            "SecurityPolicy",
            "sp-listener",
            4,
            {"cors": {"allowOrigins": ["https://b.example"], "maxAge": "1h"}},
            refs=[_target("Gateway", "gw-a", "https")],
        ),
        _policy("SecurityPolicy", "sp-ext", 5, {"extAuth": ext}, refs=[_target("HTTPRoute", "r4")]),
    ]
