"""Envoy Gateway's ``Backend`` kind as the API server with Envoy Gateway's CRDs would take it:
its vendored schema, CEL rules included, and located errors for what it rejects."""

from __future__ import annotations

from typing import Any

import pytest

from gateweave.api import cel, schema
from gateweave.api import models as m
from gateweave.api.decode import decode
from gateweave.api.kinds import KINDS, lookup
from gateweave.api.load import load_text

EG = "gateway.envoyproxy.io"
EG_PLURALS = ("backends", "backendtrafficpolicies", "clienttrafficpolicies", "securitypolicies")


def _rules(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out += [r for r in node.get("x-kubernetes-validations") or [] if isinstance(r, dict)]
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    out += _rules(sub)
            elif key in ("items", "additionalProperties"):
                out += _rules(value)
            elif key in ("allOf", "anyOf", "oneOf"):
                for sub in value:
                    out += _rules(sub)
    return out


@pytest.mark.parametrize("plural", EG_PLURALS)
def test_every_cel_rule_of_the_vendored_crds_compiles(plural: str) -> None:
    """All four CRDs are vendored for the policies to come; their rules must already be readable."""
    schemas = schema.load_schemas(EG, plural)
    assert set(schemas) == {"v1alpha1"}
    rules = _rules(schemas["v1alpha1"])
    assert rules
    for rule in rules:
        for key in ("rule", "messageExpression"):
            if key in rule:
                cel.compile_rule(rule[key])


def test_the_registered_kinds_of_the_group() -> None:
    assert [k for k, info in KINDS.items() if info.group == EG] == [
        "Backend",
        "BackendTrafficPolicy",
        "ClientTrafficPolicy",
        "SecurityPolicy",
    ]
    for kind, model in (
        ("Backend", m.Backend),
        ("BackendTrafficPolicy", m.BackendTrafficPolicy),
        ("ClientTrafficPolicy", m.ClientTrafficPolicy),
        ("SecurityPolicy", m.SecurityPolicy),
    ):
        info = lookup(f"{EG}/v1alpha1", kind)
        assert info is not None and info.custom and info.model is model
    assert lookup(f"{EG}/v1alpha1", "EnvoyExtensionPolicy") is None


def backend(spec: dict[str, Any], name: str = "b") -> dict[str, Any]:
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_a_backend_decodes_with_its_defaults() -> None:
    dec, errors = decode(
        backend({"endpoints": [{"unix": {"path": "/run/app.sock"}}], "tls": {"sni": "x.test"}})
    )
    assert errors == [] and dec is not None
    assert dec.raw["spec"]["type"] == "Endpoints"  # CRD default
    assert dec.raw["spec"]["tls"]["insecureSkipVerify"] is False
    model = dec.model
    assert isinstance(model, m.Backend) and model.metadata.namespace == "default"
    assert model.spec.endpoints[0].unix == m.BackendUnixEndpoint(path="/run/app.sock")
    wk, _ = decode(
        backend(
            {
                "endpoints": [{"ip": {"address": "10.0.0.1", "port": 1}}],
                "tls": {"wellKnownCACertificates": "System", "autoSNIFromEndpointHostname": False},
            }
        )
    )
    assert wk is not None and wk.model.spec.tls.well_known_ca_certificates == "System"
    assert wk.model.spec.tls.auto_sni_from_endpoint_hostname is False


TEXT = """\
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: Backend
metadata:
  name: fine
spec:
  endpoints:
  - fqdn: {hostname: app.internal, port: 8080}
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: Backend
metadata:
  name: mixed
spec:
  endpoints:
  - fqdn: {hostname: app.internal, port: 8080}
  - ip: {address: 10.0.0.1, port: 8080}
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: Backend
metadata:
  name: both
spec:
  endpoints:
  - ip: {address: 10.0.0.1, port: 8080}
    unix: {path: /run/x.sock}
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: Backend
metadata:
  name: badport
spec:
  endpoints:
  - ip: {address: 10.0.0.1, port: 70000}
  tls: {insecureSkipVerify: true, wellKnownCACertificates: System}
"""


def test_schema_and_cel_rejections_are_located() -> None:
    loaded = load_text(TEXT, "backends.yaml")
    assert not loaded.errors
    found: dict[str, list[str]] = {}
    for item in loaded.objects:
        dec, errors = decode(item.raw, item.source)
        name = item.raw["metadata"]["name"]
        found[name] = [str(e) for e in errors]
        assert (dec is None) == bool(errors)
    assert found["fine"] == []
    assert found["mixed"] == [
        'backends.yaml:9: Backend default/mixed: spec.endpoints: Invalid value: "array": '
        "fqdn addresses cannot be mixed with other address types"
    ]
    assert found["both"] == [
        'backends.yaml:18: Backend default/both: spec.endpoints[0]: Invalid value: "object": '
        "only one of fqdn, ip or unix can be specified"
    ]
    assert found["badport"] == [
        "backends.yaml:27: Backend default/badport: spec.endpoints[0].ip.port: Invalid value: "
        "70000: "
        "spec.endpoints[0].ip.port in body should be less than or equal to 65535",
        'backends.yaml:27: Backend default/badport: spec.tls: Invalid value: "object": must not '
        "contain "
        "either CACertificateRefs or WellKnownCACertificates when InsecureSkipVerify is enabled",
    ]
