"""The certificates of xDS mutual TLS, made with ``cryptography`` (no I/O, no clock: the
time is passed in).

gateweave runs its own certificate authority: an ECDSA P-256 key and a self-signed CA
certificate. From it it issues the xDS server's certificate (the names Envoy pods dial) and,
per Gateway, a client certificate whose only identity is a URI SAN naming the Gateway
(:func:`gateway_identity`), which the xDS server maps back to the one xDS node the client
may ask for and report on (:func:`node_of_identity`).

Every certificate is renewed once :data:`RENEW_AT` of its lifetime has passed
(:func:`due`); a renewed CA is trusted alongside the one it replaces until that one expires
(:meth:`Authority.rotated`), so certificates issued by either keep working meanwhile, and
signs nothing until every peer had time to trust it (:meth:`Authority.issuer`).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

RENEW_AT = 2 / 3  # of a certificate's lifetime: when it is renewed
CA_LIFETIME = datetime.timedelta(days=365)
LEAF_LIFETIME = datetime.timedelta(days=30)
_BACKDATE = datetime.timedelta(minutes=5)  # clock skew between replicas and pods
_SPIFFE = "spiffe://gateweave"


@dataclass(frozen=True)
class KeyPair:
    cert_pem: str
    key_pem: str


def gateway_identity(node_id: str) -> str:
    """The URI SAN of the client certificate of the Gateway ``"namespace/name"``."""
    namespace, _, name = node_id.partition("/")
    return f"{_SPIFFE}/ns/{namespace}/gateway/{name}"


def node_of_identity(uri: str) -> str | None:
    """The xDS node (``"namespace/name"``) a :func:`gateway_identity` names, else ``None``."""
    prefix = f"{_SPIFFE}/ns/"
    if not uri.startswith(prefix):
        return None
    namespace, sep, name = uri[len(prefix) :].partition("/gateway/")
    if not sep or not namespace or not name or "/" in namespace or "/" in name:
        return None
    return f"{namespace}/{name}"


def identities(cert_pem: str | bytes) -> list[str]:
    """The URI SANs of a certificate."""
    cert = x509.load_pem_x509_certificate(
        cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
    )
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return list(san.get_values_for_type(x509.UniformResourceIdentifier))


def due(cert_pem: str, now: datetime.datetime) -> bool:
    """Whether the (first) certificate of ``cert_pem`` is past :data:`RENEW_AT` of its life."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    start, end = cert.not_valid_before_utc + _BACKDATE, cert.not_valid_after_utc
    return now >= start + (end - start) * RENEW_AT


def expired(cert_pem: str, now: datetime.datetime) -> bool:
    return now >= x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
    lifetime: datetime.timedelta,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
    )


def new_ca(now: datetime.datetime, lifetime: datetime.timedelta = CA_LIFETIME) -> KeyPair:
    """A CA key and its self-signed certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(f"gateweave xDS CA {now:%Y%m%dT%H%M%S.%f}")
    cert = (
        _builder(name, name, key.public_key(), now, lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def _age(cert_pem: str, now: datetime.datetime) -> datetime.timedelta:
    return now - x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_before_utc - _BACKDATE


@dataclass(frozen=True)
class Authority:
    """The CA, and the one it replaced (trusted until it expires)."""

    current: KeyPair
    previous: KeyPair | None = None

    @classmethod
    def generate(
        cls, now: datetime.datetime, lifetime: datetime.timedelta = CA_LIFETIME
    ) -> Authority:
        return cls(new_ca(now, lifetime))

    def rotated(
        self, now: datetime.datetime, lifetime: datetime.timedelta = CA_LIFETIME
    ) -> Authority:
        """A new CA; this one stays trusted (and issuing, see :meth:`issuer`) meanwhile."""
        return Authority(new_ca(now, lifetime), self.current)

    def bundle(self, now: datetime.datetime) -> str:
        """The CA certificates to trust, PEM: this one, and the one it replaced until it expires."""
        pems = [self.current.cert_pem]
        if self.previous is not None and not expired(self.previous.cert_pem, now):
            pems.append(self.previous.cert_pem)
        return "".join(pems)

    def issuer(self, now: datetime.datetime, propagation: datetime.timedelta) -> KeyPair:
        """The CA that signs new certificates: a new CA only once it is ``propagation`` old,
        so that every peer trusts it (Kubernetes takes up to a minute or so to update a
        mounted Secret) before it meets a certificate it signed."""
        previous = self.previous
        if (
            previous is None
            or expired(previous.cert_pem, now)
            or _age(self.current.cert_pem, now) >= propagation
        ):
            return self.current
        return previous


def _issue(
    ca: KeyPair,
    subject: str,
    san: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    now: datetime.datetime,
    lifetime: datetime.timedelta,
) -> KeyPair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    lifetime = min(lifetime, ca_cert.not_valid_after_utc - now)  # a leaf never outlives its CA
    cert = (
        _builder(_name(subject), ca_cert.subject, key.public_key(), now, lifetime)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def issue_server(
    ca: KeyPair,
    hosts: list[str],
    now: datetime.datetime,
    lifetime: datetime.timedelta = LEAF_LIFETIME,
) -> KeyPair:
    """The xDS server's certificate, for the DNS names or IP addresses ``hosts``."""
    san: list[x509.GeneralName] = []
    for host in hosts:
        try:
            san.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            san.append(x509.DNSName(host))
    return _issue(ca, hosts[0], san, ExtendedKeyUsageOID.SERVER_AUTH, now, lifetime)


def issue_client(
    ca: KeyPair, node_id: str, now: datetime.datetime, lifetime: datetime.timedelta = LEAF_LIFETIME
) -> KeyPair:
    """The client certificate of the Gateway ``node_id`` (``"namespace/name"``)."""
    san: list[x509.GeneralName] = [x509.UniformResourceIdentifier(gateway_identity(node_id))]
    return _issue(ca, node_id, san, ExtendedKeyUsageOID.CLIENT_AUTH, now, lifetime)


def issued_by(cert_pem: str, ca: KeyPair) -> bool:
    """Whether ``cert_pem`` was signed by ``ca``."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem.encode()))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
