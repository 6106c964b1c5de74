"""The TLS material the upstream conformance suite generates at start, as manifest dicts.

Upstream creates CAs, certificates and client certificates before running the tests
(FORMAT.md, "Generated TLS material"). This module makes the same objects with
``cryptography``: Secrets of type ``kubernetes.io/tls`` (``tls.crt`` / ``tls.key``,
base64) and ConfigMaps holding a CA (``ca.crt``, PEM text). Keys are EC P-256, which
is fast to generate; the material is made once per process and cached.
"""

from __future__ import annotations

import base64
import datetime
import functools
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

INFRA = "gateway-conformance-infra"
WEB = "gateway-conformance-web-backend"
APP = "gateway-conformance-app-backend"


@dataclass(frozen=True)
class TLSSpec:
    """One generated object (a row of FORMAT.md's table or a case's ``generated:`` entry).

    ``kind: ConfigMap`` is a new CA (``data["ca.crt"]``). ``kind: Secret`` is a
    certificate: self-signed without ``signed_by``; otherwise signed by the CA named
    ``namespace/name`` (a ConfigMap of this set), a server certificate for ``hosts``,
    or a client certificate when ``hosts`` is empty.
    """

    kind: str
    namespace: str
    name: str
    hosts: tuple[str, ...] = ()
    signed_by: str = ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


BUILTIN: tuple[TLSSpec, ...] = (
    TLSSpec("Secret", WEB, "certificate", ("*",)),
    TLSSpec("Secret", INFRA, "tls-validity-checks-certificate", ("*", "*.org", "*.wildcard.org")),
    TLSSpec("ConfigMap", WEB, "web-backend-cm"),
    TLSSpec("ConfigMap", INFRA, "tls-validity-checks-ca-certificate"),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-validity-checks-client-certificate",
        signed_by=f"{INFRA}/tls-validity-checks-ca-certificate",
    ),
    TLSSpec("ConfigMap", INFRA, "tls-validity-checks-per-port-ca-certificate"),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-validity-checks-per-port-client-certificate",
        signed_by=f"{INFRA}/tls-validity-checks-per-port-ca-certificate",
    ),
    TLSSpec("ConfigMap", INFRA, "tls-checks-ca-certificate"),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-checks-certificate",
        ("abc.example.com", "spiffe://abc.example.com/test-identity", "other.example.com"),
        f"{INFRA}/tls-checks-ca-certificate",
    ),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-checks-client-certificate",
        signed_by=f"{INFRA}/tls-checks-ca-certificate",
    ),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-passthrough-checks-certificate",
        ("abc.example.com",),
        f"{INFRA}/tls-checks-ca-certificate",
    ),
    TLSSpec(
        "Secret",
        APP,
        "tls-passthrough-checks-certificate",
        ("abc.example.com",),
        f"{INFRA}/tls-checks-ca-certificate",
    ),
    TLSSpec(
        "Secret",
        INFRA,
        "tls-terminate-checks-certificate",
        ("tls.example.com",),
        f"{INFRA}/tls-checks-ca-certificate",
    ),
    TLSSpec("ConfigMap", INFRA, "mismatch-ca-certificate"),
)


@dataclass(frozen=True)
class Issued:
    """A generated certificate (or CA) with its key, and the PEM forms."""

    spec: TLSSpec
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def manifest(self) -> dict[str, Any]:
        meta = {"name": self.spec.name, "namespace": self.spec.namespace}
        if self.spec.kind == "ConfigMap":
            return {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta,
                "data": {"ca.crt": self.cert_pem.decode()},
            }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta,
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": _b64(self.cert_pem), "tls.key": _b64(self.key_pem)},
        }


@dataclass
class TLSMaterial:
    """Generated objects by ``(kind, "namespace/name")``, in generation order."""

    issued: dict[tuple[str, str], Issued] = field(default_factory=dict)

    def get(self, kind: str, ref: str) -> Issued:
        return self.issued[(kind, ref)]

    def manifests(self) -> list[dict[str, Any]]:
        return [i.manifest() for i in self.issued.values()]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "gateweave conformance"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]),
        ]
    )


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
            continue
        except ValueError:
            pass
        if "://" in host:
            names.append(x509.UniformResourceIdentifier(host))
        else:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _issue(
    spec: TLSSpec, issuer: Issued | None, *, ca: bool, hosts: Sequence[str], client: bool
) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = _name(hosts[0] if hosts else f"{spec.namespace}/{spec.name}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False,
        )
    # A self-signed leaf stays CA:FALSE (as upstream's); clients that trust its tls.crt use it as
    # the trust anchor directly, which OpenSSL and Go accept.
    is_ca = ca
    builder = builder.add_extension(
        x509.BasicConstraints(ca=is_ca, path_length=None), critical=True
    )
    builder = builder.add_extension(
        x509.KeyUsage(
            digital_signature=True,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=is_ca,
            crl_sign=is_ca,
            encipher_only=False,
            decipher_only=False,
        ),
        critical=True,
    )
    if not ca:
        usage = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if hosts:
        builder = builder.add_extension(_san(hosts), critical=False)
    signer = issuer.key if issuer else key
    cert = builder.sign(signer, hashes.SHA256())
    return Issued(spec, cert, key)


def generate(specs: Iterable[TLSSpec], into: TLSMaterial | None = None) -> TLSMaterial:
    """Generate ``specs`` in order (a signer must come before what it signs, or be in ``into``)."""
    material = into if into is not None else TLSMaterial()
    for spec in specs:
        if spec.kind == "ConfigMap":
            material.issued[("ConfigMap", spec.ref)] = _issue(
                spec, None, ca=True, hosts=(), client=False
            )
            continue
        if spec.kind != "Secret":
            raise ValueError(f"generated TLS material: unknown kind {spec.kind!r} for {spec.ref}")
        issuer = None
        if spec.signed_by:
            issuer = material.issued.get(("ConfigMap", spec.signed_by))
            if issuer is None:
                raise ValueError(
                    f"generated TLS material: {spec.ref} is signed by unknown CA {spec.signed_by}"
                )
        client = issuer is not None and not spec.hosts
        material.issued[("Secret", spec.ref)] = _issue(
            spec, issuer, ca=False, hosts=spec.hosts, client=client
        )
    return material


@functools.cache
def builtin() -> TLSMaterial:
    """The suite-wide material of FORMAT.md's table (generated once per process)."""
    return generate(BUILTIN)


@functools.cache
def with_extra(extra: tuple[TLSSpec, ...]) -> TLSMaterial:
    """The builtin material plus a case's ``generated:`` entries (cached per distinct list).

    A case entry may be signed by a builtin CA; it replaces a builtin object of the same kind and
    name.
    """
    base = builtin()
    material = TLSMaterial(dict(base.issued))
    return generate(extra, into=material) if extra else material
