"""Versions of each object of a conformance object set, for property tests: the object as the
case has it (BASE), with a change that matters to translate (SPEC), and with a metadata-only
change (META); a universe is the items of one named case set."""

from __future__ import annotations

import base64
import copy
import functools
from dataclasses import dataclass
from typing import Any

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.store import key_of
from tests.support.conformance_objects import case_set, decoded
from tests.support.policies import policy_system

CASE_SETS: dict[str, tuple[str, ...]] = {
    "backendtls": ("BackendTLSPolicy.yaml",),
    "attached-routes": ("GatewayWithAttachedRoutes.yaml",),
    "listenersets": ("ListenerSetHTTPRouting.yaml",),
    "tls-hostnames": ("TLSRouteHostnameIntersection.yaml",),
    "secret-grants": ("GatewaySecretInvalidReferenceGrant.yaml",),
    "udp-sections": ("UDPRouteParentRefPortAndSectionName.yaml",),
    "union": (
        "HTTPRouteMultipleGateways.yaml",
        "GRPCRouteListenerHostnameMatching.yaml",
        "TCPRouteReferenceGrant.yaml",
        "HTTPRouteReferenceGrant.yaml",
        "BackendTLSPolicyConflictResolution.yaml",
    ),
    "parameters": ("GatewayWithAttachedRoutes.yaml",),  # with EXTRA_OBJECTS["parameters"]
    "policies": (),  # EXTRA_OBJECTS["policies"] alone
}

_NS = "gateway-conformance-infra"
_PARAMS = "gateweave.io/v1alpha1"
# Objects a case set adds to its conformance cases. "parameters": gateweave's parameters kind
# as a GatewayClass's defaults and one Gateway's override, and a Gateway binding every
# interface (0.0.0.0) whose port 80 overlaps the other Gateways'.
EXTRA_OBJECTS: dict[str, tuple[dict[str, Any], ...]] = {
    "parameters": (
        {
            "apiVersion": _PARAMS,
            "kind": "GatewayParameters",
            "metadata": {"name": "class-params", "namespace": _NS},
            "spec": {
                "envoy": {"concurrency": 2, "logLevel": "info"},
                "kubernetes": {"replicas": 2},
            },
        },
        {
            "apiVersion": _PARAMS,
            "kind": "GatewayParameters",
            "metadata": {"name": "gw-params", "namespace": _NS},
            "spec": {
                "envoy": {
                    "concurrency": 4,
                    "extraArgs": ["--component-log-level", "upstream:debug"],
                }
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "params-class"},
            "spec": {
                "controllerName": "gateweave.io/gateway-controller",
                "parametersRef": {
                    "group": "gateweave.io",
                    "kind": "GatewayParameters",
                    "name": "class-params",
                    "namespace": _NS,
                },
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "params-gw", "namespace": _NS},
            "spec": {
                "gatewayClassName": "params-class",
                "infrastructure": {
                    "parametersRef": {
                        "group": "gateweave.io",
                        "kind": "GatewayParameters",
                        "name": "gw-params",
                    }
                },
                "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}],
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "a-every-interface", "namespace": _NS},
            "spec": {
                "gatewayClassName": "params-class",
                "addresses": [{"type": "IPAddress", "value": "0.0.0.0"}],
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
    ),
    # Envoy Gateway policies of every kind on Gateways, listeners, routes and rules
    # (tests/support/policies.py)
    "policies": tuple(policy_system()),
}
_POLICY_KINDS = ("BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy")

VARIANT_LABEL = "gateweave.test/variant"
BASE, SPEC, META = 0, 1, 2
NOT_A_CERT = base64.b64encode(b"not a certificate").decode()


# ---------------------------------------------------------------- versions of each object


def _labelled(raw: dict[str, Any], value: str) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    meta = out["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), VARIANT_LABEL: value}
    return out


def metadata_variant(raw: dict[str, Any]) -> dict[str, Any]:
    out = _labelled(raw, "metadata")
    out["metadata"]["annotations"] = {
        **(out["metadata"].get("annotations") or {}),
        "gateweave.test/note": "x",
    }
    return out


def _change_listener(spec: dict[str, Any]) -> None:
    listeners = spec.get("listeners") or []
    for listener in listeners:
        if listener.get("protocol") in ("HTTP", "HTTPS", "TLS"):
            listener["hostname"] = "variant.example.net"
            return
    if listeners:
        used = {lst.get("port") for lst in listeners}
        listeners[0]["port"] = next(p for p in range(20000, 20100) if p not in used)


def _change_http_route(spec: dict[str, Any]) -> None:
    rules = spec.setdefault("rules", [{}])
    rule = rules[0]
    matches = rule.get("matches") or []
    path = matches[0].get("path") if matches else None
    if path and isinstance(path.get("value"), str):
        path["value"] = path["value"].rstrip("/") + "/variant"
    else:
        rule["matches"] = [{"path": {"type": "PathPrefix", "value": "/variant"}}, *matches]


def _change_policy(spec: dict[str, Any]) -> None:
    """Another target: selectors pick other labels; a section is dropped (the whole Gateway or
    route); else a section is named that does not exist (TargetNotFound)."""
    for sel in spec.get("targetSelectors") or []:
        sel["matchLabels"] = {k: f"{v}-variant" for k, v in (sel.get("matchLabels") or {}).items()}
    refs = spec.get("targetRefs") or []
    if refs and refs[0].get("sectionName"):
        del refs[0]["sectionName"]
    elif refs:
        refs[0]["sectionName"] = "variant"


def _change_endpoint(endpoint: dict[str, Any]) -> None:
    """An Envoy Gateway Backend's endpoint elsewhere: another port, or another socket path."""
    for family in ("ip", "fqdn"):
        if isinstance(endpoint.get(family), dict):
            endpoint[family]["port"] = endpoint[family].get("port", 80) + 1
    if isinstance(endpoint.get("unix"), dict):
        endpoint["unix"]["path"] = f"{endpoint['unix'].get('path', '/tmp/x')}-variant"


def spec_variant(raw: dict[str, Any]) -> dict[str, Any]:
    """A label added and, for most kinds, a change that matters to translate."""
    out = _labelled(raw, "spec")
    kind, data = out["kind"], out.get("data")
    spec: dict[str, Any] = out.get("spec") or {}
    if kind in ("Gateway", "ListenerSet"):
        _change_listener(spec)
    elif kind == "HTTPRoute":
        _change_http_route(spec)
    elif kind in ("GRPCRoute", "TLSRoute"):
        spec["hostnames"] = [*(spec.get("hostnames") or []), "variant.example.net"]
    elif kind in ("TCPRoute", "UDPRoute"):
        ref = spec["rules"][0]["backendRefs"][0]
        ref["port"] = ref.get("port", 80) + 1
    elif kind == "Service" and spec.get("ports"):
        spec["ports"][0]["port"] += 1
    elif kind == "GatewayClass":
        spec["controllerName"] = "example.com/not-gateweave"
    elif kind == "GatewayParameters":
        spec.setdefault("envoy", {})["concurrency"] = 7
        spec["kubernetes"] = {"service": {"type": "NodePort"}}
    elif kind == "BackendTLSPolicy":
        spec["validation"]["hostname"] = "variant.example.net"
    elif kind == "ReferenceGrant":
        spec["from"][0]["namespace"] = "nowhere"
    elif kind == "Secret" and isinstance(data, dict) and "tls.crt" in data:
        data["tls.crt"] = NOT_A_CERT
    elif kind == "ConfigMap" and isinstance(data, dict) and "ca.crt" in data:
        data["ca.crt"] = "not a certificate"
    elif kind in _POLICY_KINDS:
        _change_policy(spec)
    elif kind == "Secret" and isinstance(data, dict) and ".htpasswd" in data:
        data[".htpasswd"] = base64.b64encode(b"bob:{SHA}" + b"B" * 27 + b"=\n").decode()
    elif kind == "ConfigMap" and isinstance(data, dict) and "response.body" in data:
        data["response.body"] = "variant"
    elif kind == "Backend" and spec.get("endpoints"):
        _change_endpoint(spec["endpoints"][0])
    elif kind == "EndpointSlice" and out.get("endpoints"):
        out["endpoints"][0]["addresses"] = ["127.20.250.250"]
    return out


@dataclass(frozen=True)
class Item:
    key: Key
    versions: tuple[Decoded, Decoded, Decoded]  # BASE, SPEC, META


@dataclass(frozen=True)
class Universe:
    items: tuple[Item, ...]
    important: tuple[int, ...]  # GatewayClass and Gateways: changes to them matter most


def _variant(make: Any, base: Decoded) -> Decoded:
    result, errors = decode(make(base.raw))
    if result is None:  # the change is not valid for this object: a label alone
        result, errors = decode(_labelled(base.raw, "spec"))
    assert result is not None, errors
    return result


@functools.cache
def universe(name: str) -> Universe:
    items = tuple(
        Item(key_of(dec), (dec, _variant(spec_variant, dec), _variant(metadata_variant, dec)))
        for dec in [
            *case_set(CASE_SETS[name]),
            *(decoded(raw) for raw in EXTRA_OBJECTS.get(name, ())),
        ]
    )
    important = tuple(i for i, it in enumerate(items) if it.key.kind in ("GatewayClass", "Gateway"))
    return Universe(items, important)
