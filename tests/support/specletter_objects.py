"""Minimal inputs for the spec-letter tests (issue 16, items 1-6), as raw manifests.

Certificates are made here with ``cryptography`` (RSA, ECDSA or Ed25519 keys, chosen DNS
subjectAltNames), once per process for each distinct request.
"""

from __future__ import annotations

import base64
import datetime
import functools
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from gateweave.api.decode import decode
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate import translate

G = "gateway.networking.k8s.io/v1"
NS = "default"
CONTROLLER = "gateweave.io/gateway-controller"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@functools.cache
def private_key(algorithm: str, variant: int = 0) -> PrivateKey:
    """A private key: ``rsa``, ``ecdsa`` or ``ed25519``; another ``variant`` is another key."""
    del variant  # only part of the cache key
    if algorithm == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(algorithm)


@functools.cache
def certificate(
    sans: tuple[str, ...], algorithm: str = "ecdsa", variant: int = 0
) -> tuple[str, str]:
    """(certificate PEM, key PEM): self-signed, for DNS names ``sans``."""
    key = private_key(algorithm, variant)
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0] if sans else "no-san")])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=30))
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]), critical=False
        )
    cert = builder.sign(key, None if algorithm == "ed25519" else hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


def key_pem(algorithm: str, variant: int = 0) -> str:
    key = private_key(algorithm, variant)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def tls_secret(name: str, cert_pem: str, key: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(cert_pem), "tls.key": _b64(key)},
    }


def secret_for(name: str, *sans: str) -> dict[str, Any]:
    """A kubernetes.io/tls Secret with a certificate for ``sans`` and its own key."""
    cert, key = certificate(tuple(sans))
    return tls_secret(name, cert, key)


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": G,
        "kind": "GatewayClass",
        "metadata": {"name": "gw"},
        "spec": {"controllerName": CONTROLLER},
    }


def https(
    name: str, hostname: str | None, secret: str, port: int = 443, protocol: str = "HTTPS"
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "port": port,
        "protocol": protocol,
        "tls": {"certificateRefs": [{"name": secret}]},
    }
    if hostname is not None:
        out["hostname"] = hostname
    return out


def listener(
    name: str, port: int, protocol: str, hostname: str | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": port, "protocol": protocol, **extra}
    if hostname is not None:
        out["hostname"] = hostname
    return out


def gateway(
    listeners: list[dict[str, Any]], name: str = "gw", allow_sets: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"gatewayClassName": "gw", "listeners": listeners}
    if allow_sets:
        spec["allowedListeners"] = {"namespaces": {"from": "Same"}}
    return {
        "apiVersion": G,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def listener_set(
    name: str, listeners: list[dict[str, Any]], gateway_name: str = "gw", created: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": G,
        "kind": "ListenerSet",
        "metadata": meta,
        "spec": {"parentRef": {"name": gateway_name}, "listeners": listeners},
    }


def service(name: str, port: int = 8443, port_name: str = "https") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ports": [{"name": port_name, "port": port, "targetPort": port}]},
    }


def endpoint_slice(
    service_name: str, address: str, port: int = 8443, port_name: str = "https"
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-1",
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address]}],
        "ports": [{"name": port_name, "port": port}],
    }


def http_route(
    name: str,
    backends: list[tuple[str, int, int]],
    parent: str = "gw",
    hostnames: tuple[str, ...] = (),
) -> dict[str, Any]:
    """An HTTPRoute with one rule sending to ``(service, port, weight)`` backends."""
    spec: dict[str, Any] = {
        "parentRefs": [{"name": parent}],
        "rules": [{"backendRefs": [{"name": s, "port": p, "weight": w} for s, p, w in backends]}],
    }
    if hostnames:
        spec["hostnames"] = list(hostnames)
    return {
        "apiVersion": G,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def tls_route(name: str, section: str, backend: str = "secure", port: int = 8443) -> dict[str, Any]:
    """A TLSRoute for tls.example.com on listener ``section`` of Gateway gw."""
    return {
        "apiVersion": G,
        "kind": "TLSRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": section}],
            "hostnames": ["tls.example.com"],
            "rules": [{"backendRefs": [{"name": backend, "port": port}]}],
        },
    }


def backend_tls_policy(
    name: str, service_name: str, ca_configmaps: list[str] | None = None, well_known: str = ""
) -> dict[str, Any]:
    validation: dict[str, Any] = {"hostname": "backend.example.com"}
    if ca_configmaps:
        validation["caCertificateRefs"] = [
            {"group": "", "kind": "ConfigMap", "name": n} for n in ca_configmaps
        ]
    if well_known:
        validation["wellKnownCACertificates"] = well_known
    return {
        "apiVersion": G,
        "kind": "BackendTLSPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": service_name}],
            "validation": validation,
        },
    }


def ca_configmap(name: str, sans: tuple[str, ...] = ("ca.example.com",)) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"ca.crt": certificate(sans)[0]},
    }


def models(raws: list[dict[str, Any]]) -> list[Any]:
    out = []
    for raw in raws:
        dec, errors = decode(raw)
        assert dec is not None and not errors, errors
        out.append(dec.model)
    return out


def run(raws: list[dict[str, Any]]) -> Result:
    return translate(Snapshot.from_objects(models(raws)))


def listener_conditions(
    result: Result, kind: str, name: str, listener_name: str
) -> dict[str, tuple[str, str]]:
    """A listener's conditions as {type: (status, reason)}."""
    status: dict[str, Any] = result.statuses[(kind, NS, name)]
    (entry,) = [e for e in status["listeners"] if e["name"] == listener_name]
    return {cond["type"]: (cond["status"], cond["reason"]) for cond in entry["conditions"]}


def conditions(result: Result, kind: str, name: str) -> dict[str, tuple[str, str]]:
    status: dict[str, Any] = result.statuses[(kind, NS, name)]
    return {cond["type"]: (cond["status"], cond["reason"]) for cond in status["conditions"]}


def route_conditions(
    result: Result, name: str, kind: str = "HTTPRoute"
) -> dict[str, tuple[str, str]]:
    status: dict[str, Any] = result.statuses[(kind, NS, name)]
    (parent,) = status["parents"]
    return {cond["type"]: (cond["status"], cond["reason"]) for cond in parent["conditions"]}
