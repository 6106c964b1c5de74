"""Envoy Gateway's policy kinds are read as the API server would: validated against their
vendored CRDs (schema and CEL rules), defaults applied, a bad one refused at its field."""

from __future__ import annotations

from typing import Any

from gateweave.api import models as m
from gateweave.api.decode import Decoding, decode

EG = "gateway.envoyproxy.io"


def btp(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


TARGET = {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}]}


def test_a_policy_decodes_with_its_spec_as_stored() -> None:
    rl = {
        "type": "Local",
        "local": {
            "rules": [
                {
                    "limit": {"requests": 3, "unit": "Minute"},
                    "clientSelectors": [{"headers": [{"name": "x-user", "value": "a"}]}],
                }
            ]
        },
    }
    dec, errors = decode(btp({**TARGET, "rateLimit": rl}), mode=Decoding.STRICT)
    assert errors == [] and dec is not None
    model = dec.model
    assert isinstance(model, m.BackendTrafficPolicy) and model.metadata.namespace == "default"
    header = model.spec["rateLimit"]["local"]["rules"][0]["clientSelectors"][0]["headers"][0]
    assert header["type"] == "Exact" and header["invert"] is False  # CRD defaults


def test_a_bad_policy_is_refused_at_its_field() -> None:
    _, errors = decode(
        btp(
            {
                **TARGET,
                "rateLimit": {
                    "type": "Local",
                    "local": {"rules": [{"limit": {"requests": 3, "unit": "Fortnight"}}]},
                },
            }
        ),
        mode=Decoding.STRICT,
    )
    assert errors and errors[0].field.startswith("spec.rateLimit.local.rules[0].limit.unit"), errors
    _, errors = decode(btp({**TARGET, "retries": 3}), mode=Decoding.STRICT)
    assert errors and "retries" in errors[0].message, errors
