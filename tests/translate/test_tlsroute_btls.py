"""A BackendTLSPolicy re-encrypts a TLSRoute's traffic only behind
a listener that terminates TLS.
"""

from __future__ import annotations

from typing import Any

from gateweave.api.decode import decode
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave_conformance import tlsgen

G = "gateway.networking.k8s.io/v1"


def objects() -> list[Any]:
    material = tlsgen.builtin()
    raws: list[dict[str, Any]] = [
        {
            "apiVersion": G,
            "kind": "GatewayClass",
            "metadata": {"name": "gw"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        {
            "apiVersion": G,
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "gateway-conformance-infra"},
            "spec": {
                "gatewayClassName": "gw",
                "listeners": [
                    {
                        "name": "terminate",
                        "port": 8443,
                        "protocol": "TLS",
                        "hostname": "tls.example.com",
                        "tls": {
                            "mode": "Terminate",
                            "certificateRefs": [{"name": "tls-terminate-checks-certificate"}],
                        },
                    },
                    {
                        "name": "passthrough",
                        "port": 9443,
                        "protocol": "TLS",
                        "hostname": "tls.example.com",
                        "tls": {"mode": "Passthrough"},
                    },
                ],
            },
        },
        {
            "apiVersion": G,
            "kind": "TLSRoute",
            "metadata": {"name": "r", "namespace": "gateway-conformance-infra"},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "hostnames": ["tls.example.com"],
                "rules": [{"backendRefs": [{"name": "svc", "port": 8443}]}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": "gateway-conformance-infra"},
            "spec": {"ports": [{"name": "btls", "port": 8443, "targetPort": 8443}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "svc-1",
                "namespace": "gateway-conformance-infra",
                "labels": {"kubernetes.io/service-name": "svc"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.9"]}],
            "ports": [{"name": "btls", "port": 8443}],
        },
        {
            "apiVersion": G,
            "kind": "BackendTLSPolicy",
            "metadata": {"name": "p", "namespace": "gateway-conformance-infra"},
            "spec": {
                "targetRefs": [
                    {"group": "", "kind": "Service", "name": "svc", "sectionName": "btls"}
                ],
                "validation": {
                    "caCertificateRefs": [
                        {"group": "", "kind": "ConfigMap", "name": "tls-checks-ca-certificate"}
                    ],
                    "hostname": "abc.example.com",
                },
            },
        },
        *material.manifests(),
    ]
    out = []
    for raw in raws:
        dec, errors = decode(raw)
        assert not errors, errors
        if dec is not None:
            out.append(dec.model)
    return out


def test_terminate_chain_re_encrypts_and_passthrough_does_not() -> None:
    result = translate(Snapshot.from_objects(objects()))
    gw = result.xds["gateway-conformance-infra/gw"]
    clusters = {c.name: c for c in gw.clusters}
    by_port = {p.port: p for p in gw.ports}
    (term,) = by_port[8443].filter_chains
    (passthrough,) = by_port[9443].filter_chains
    assert term.tls is not None and passthrough.tls is None
    assert term.tcp is not None and passthrough.tcp is not None
    upstream = clusters[term.tcp.backends[0].cluster]
    plain = clusters[passthrough.tcp.backends[0].cluster]
    assert (
        upstream.tls is not None and upstream.tls.sni == "abc.example.com" and upstream.tls.ca_pem
    )
    assert plain.tls is None
    assert upstream.name != plain.name and upstream.endpoints == plain.endpoints
