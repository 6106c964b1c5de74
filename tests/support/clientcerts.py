"""Client certificates for the client validation tests, signed by a CA of
``gateweave_conformance.tlsgen`` (an ``Issued`` ConfigMap): with the subject alt names a test
wants (as tlsgen's ``Issued``), and the CA's revocation list (PEM) naming some of them; their
SHA-256 hashes as a ClientTrafficPolicy's ``certificateHashes`` (hex) and ``spkiHashes``
(base64) are written."""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateweave_conformance.tlsgen import Issued, TLSSpec


def certificate_hash(issued: Issued) -> str:
    """SHA-256 of the DER certificate, hex (``certificateHashes``)."""
    return hashlib.sha256(issued.cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def spki_hash(issued: Issued) -> str:
    """SHA-256 of the DER SubjectPublicKeyInfo, base64 (``spkiHashes``)."""
    spki = issued.cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def _general_name(name: str) -> x509.GeneralName:
    if name.startswith("email:"):
        return x509.RFC822Name(name.removeprefix("email:"))
    if "://" in name:
        return x509.UniformResourceIdentifier(name)
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def client_cert(ca: Issued, common_name: str, names: Iterable[str] = ()) -> Issued:
    """A client certificate ``ca`` signs, with ``names`` as subject alt names (an IP address, a
    URI, ``email:<address>`` or a DNS name)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    listed = [_general_name(n) for n in names]
    if listed:
        builder = builder.add_extension(x509.SubjectAlternativeName(listed), critical=False)
    spec = TLSSpec("Secret", "default", common_name, signed_by=ca.spec.ref)
    return Issued(spec, builder.sign(ca.key, hashes.SHA256()), key)


def revocation_list(ca: Issued, revoked: Iterable[Issued]) -> str:
    """The CA's CRL (PEM) revoking ``revoked``."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.cert.subject)
        .last_update(now - datetime.timedelta(hours=1))
        .next_update(now + datetime.timedelta(days=1))
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
        .add_extension(x509.CRLNumber(1), critical=False)
    )
    for cert in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(cert.cert.serial_number)
            .revocation_date(now - datetime.timedelta(minutes=5))
            .build()
        )
    crl = builder.sign(ca.key, hashes.SHA256())
    return crl.public_bytes(serialization.Encoding.PEM).decode()
