"""Envoy Gateway's ``Backend`` kind (gateway.envoyproxy.io/v1alpha1): whether it is accepted,
and the endpoints, protocol and TLS a backendRef to it gets.

A Backend is judged on its own and on the Secrets and ConfigMaps its ``tls`` names: it is
``Accepted`` with Envoy Gateway's reason and message, or ``Accepted=False`` (reason
``Invalid``) saying what is wrong - an address or TLS setting Envoy Gateway would refuse, a
reference that does not resolve, or a field gateweave does not implement, named (never
ignored). A route whose backendRef names a Backend that is not accepted gets
``ResolvedRefs=False`` pointing at it. Its status is written when a route of ours refers to
it, as Envoy Gateway writes the status of the Backends its routes use.

Endpoints keep the order they are written in. fqdn endpoints are host names Envoy
resolves (a DNS cluster); ip and unix ones are addresses (sent over EDS).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import certs
from gateweave.translate import conditions as c
from gateweave.translate.context import Ctx

APP_H2C = "gateway.envoyproxy.io/h2c"
APP_WS = "gateway.envoyproxy.io/ws"
APP_WSS = "gateway.envoyproxy.io/wss"

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# spec.tls fields gateweave does not implement: a Backend setting one is not accepted.
_UNSUPPORTED_TLS = (
    ("alpn_protocols", "alpnProtocols"),
    ("ciphers", "ciphers"),
    ("ecdh_curves", "ecdhCurves"),
    ("signature_algorithms", "signatureAlgorithms"),
    ("min_version", "minVersion"),
    ("max_version", "maxVersion"),
    ("fingerprints", "fingerprints"),
)


@dataclass(frozen=True)
class BackendVerdict:
    """A Backend as judged: ``problems`` empty when accepted; its endpoints and TLS when usable."""

    problems: tuple[str, ...]
    endpoints: tuple[ir.Endpoint, ...] = ()
    tls: ir.UpstreamTLS | None = None

    @property
    def accepted(self) -> bool:
        return not self.problems


def is_hostname(name: str) -> bool:
    """A lowercase RFC 1123 subdomain (a trailing dot allowed), as Kubernetes checks host names."""
    bare = name[:-1] if name.endswith(".") else name
    return 0 < len(bare) <= 253 and _SUBDOMAIN.match(bare) is not None


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def judge(ctx: Ctx, backend: m.Backend) -> BackendVerdict:
    """Whether ``backend`` is accepted, and if so its IR endpoints and upstream TLS."""
    on_host = ctx.options.address_mode == "standalone"
    spec = backend.spec
    problems: list[str] = []
    if spec.type != "Endpoints":
        problems.append(f"spec.type {spec.type} is not supported by gateweave")
    if spec.fallback:
        problems.append("spec.fallback is not supported by gateweave")
    tls, tls_problems = _tls(ctx, backend)
    problems.extend(tls_problems)
    endpoints: list[ir.Endpoint] = []
    for i, ep in enumerate(spec.endpoints):
        where = f"spec.endpoints[{i}]"
        if ep.zone is not None:
            problems.append(f"{where}.zone is not supported by gateweave")
        hostname = ep.hostname or ""
        if hostname:
            problems.extend(_hostname_problems(hostname, "hostname", on_host))
        if ep.fqdn is not None:
            problems.extend(_hostname_problems(ep.fqdn.hostname, "FQDN", on_host))
            endpoints.append(
                ir.Endpoint(
                    address=ep.fqdn.hostname,
                    port=ep.fqdn.port,
                    type=ir.ENDPOINT_FQDN,
                    hostname=hostname,
                )
            )
        elif ep.ip is not None:
            problems.extend(_ip_problems(ep.ip.address, on_host))
            endpoints.append(ir.Endpoint(address=ep.ip.address, port=ep.ip.port, hostname=hostname))
        elif ep.unix is not None:
            endpoints.append(
                ir.Endpoint(address=ep.unix.path, port=0, type=ir.ENDPOINT_UNIX, hostname=hostname)
            )
    if problems:
        return BackendVerdict(problems=tuple(problems))
    return BackendVerdict(problems=(), endpoints=tuple(endpoints), tls=tls)


def _hostname_problems(hostname: str, what: str, on_host: bool) -> list[str]:
    # Envoy Gateway's checks and words; on the host (standalone) a one-label name is fine
    # (docker compose service names), in a cluster it is not.
    if not is_hostname(hostname):
        return [f"hostname {hostname} is not a valid {what}"]
    if not on_host and len(hostname.split(".")) < 2:
        return [
            f"hostname {hostname} should be a domain with at least two segments separated by dots"
        ]
    if is_ip(hostname):
        return [f"hostname {hostname} is an IP address"]
    return []


def _ip_problems(address: str, on_host: bool) -> list[str]:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return [f"IP address {address} is invalid"]
    if ip.is_loopback and not on_host:
        return [
            f"IP address {address} in the loopback range is only supported when using the Host "
            "infrastructure"
        ]
    return []


def _tls(ctx: Ctx, backend: m.Backend) -> tuple[ir.UpstreamTLS | None, list[str]]:
    t = backend.spec.tls
    if t is None:
        return None, []
    ns = backend.metadata.namespace
    problems = [
        f"spec.tls.{name} is not supported by gateweave"
        for attr, name in _UNSUPPORTED_TLS
        if getattr(t, attr) is not None
    ]
    if t.auto_sni_from_endpoint_hostname:
        problems.append("spec.tls.autoSNIFromEndpointHostname is not supported by gateweave")
    well_known = t.well_known_ca_certificates or ""
    if not t.insecure_skip_verify and not t.ca_certificate_refs and not well_known:
        problems.append(
            "must specify either CACertificateRefs or WellKnownCACertificates when "
            "InsecureSkipVerify is unset or false"
        )
    if well_known and well_known != "System":
        problems.append(
            f"spec.tls.wellKnownCACertificates {well_known} is not supported by gateweave (only "
            "System)"
        )
    pems: list[str] = []
    for i, ref in enumerate(t.ca_certificate_refs):
        where = f"spec.tls.caCertificateRefs[{i}]"
        obj: Any = None
        if ref.group in ("", "core") and ref.kind == "ConfigMap":
            obj = ctx.snapshot.config_maps.get((ns, ref.name))
        elif ref.group in ("", "core") and ref.kind == "Secret":
            obj = ctx.snapshot.secrets.get((ns, ref.name))
        else:
            problems.append(
                f"{where}: {ref.group}/{ref.kind} is not supported (a ConfigMap or a Secret)"
            )
            continue
        if obj is None:
            problems.append(f"{where}: {ref.kind} {ns}/{ref.name} not found")
            continue
        pem = certs.ca_from_object(obj)
        if not pem:
            problems.append(
                f"{where}: {ref.kind} {ns}/{ref.name} has no valid PEM certificate in ca.crt"
            )
            continue
        pems.append(pem.strip() + "\n")
    cert_pem = key_pem = ""
    ref2 = t.client_certificate_ref
    if ref2 is not None:
        secret_ns = ref2.namespace or ns
        where = f"spec.tls.clientCertificateRef {ref2.kind} {secret_ns}/{ref2.name}"
        secret = ctx.snapshot.secrets.get((secret_ns, ref2.name))
        if secret_ns != ns:
            problems.append(
                "clientCertificateRef Secret is not located in the same namespace as Backend. "
                f"Secret namespace: {secret_ns} does not match Backend namespace: {ns}"
            )
        elif ref2.group not in ("", "core") or ref2.kind != "Secret":
            problems.append(f"{where}: only core Secrets are supported")
        elif secret is None:
            problems.append(f"{where} not found")
        else:
            pair = certs.tls_keypair(secret)
            if isinstance(pair, str):
                problems.append(f"{where}: {pair}")
            else:
                cert_pem, key_pem = pair
    if problems:
        return None, problems
    upstream = ir.UpstreamTLS(
        sni=t.sni or "",
        ca_pem="".join(pems),
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
        insecure_skip_verify=t.insecure_skip_verify,
    )
    return upstream, []


def upstream_protocol(family: str, backend: m.Backend, verdict: BackendVerdict) -> tuple[str, str]:
    """(upstream protocol, problem) of an accepted Backend used by a route family."""
    apps = backend.spec.app_protocols
    if family == "UDP":
        if any(ep.type == ir.ENDPOINT_UNIX for ep in verdict.endpoints):
            return "UDP", "a unix socket endpoint cannot carry UDP"
        if verdict.tls is not None:
            return "UDP", "spec.tls cannot apply to UDP"
        return "UDP", ""
    if family == "TCP":
        return "TCP", ""
    websocket = APP_WS in apps or APP_WSS in apps
    if family == "GRPC":
        if websocket:
            return "H2C", "appProtocol WebSocket is not supported for gRPC"
        return "H2C", ""
    if websocket:  # WebSocket upgrades are HTTP/1.1, as Envoy Gateway forces for them
        return "WEBSOCKET", ""
    if APP_H2C in apps:
        return "H2C", ""
    return "HTTP1", ""


def backend_status(backend: m.Backend, verdict: BackendVerdict) -> dict[str, Any]:
    """The Backend's status as Envoy Gateway writes it: one ``Accepted`` condition."""
    if verdict.accepted:
        cond = c.backend_accepted()
    else:
        cond = c.backend_invalid("The Backend was not accepted: " + "; ".join(verdict.problems))
    return {"conditions": [c.to_status(cond, backend.metadata.generation)]}
