"""Reading certificates and keys out of Secrets and ConfigMaps.

Parsing is a pure function of the object's content, so results are memoised by content.
"""

from __future__ import annotations

import base64
import binascii
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificatePublicKeyTypes,
    PublicKeyTypes,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
)

from gateweave.api import models as m


def secret_value(secret: m.Secret, key: str) -> str | None:
    """A Secret's value for ``key`` as text (``stringData`` wins, like the API server's merge)."""
    if key in secret.string_data:
        return secret.string_data[key]
    raw = secret.data.get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


@lru_cache(maxsize=4096)
def _check_cert_chain(pem: str) -> str:
    """'' when ``pem`` holds at least one valid X.509 certificate, else why not."""
    try:
        certs = x509.load_pem_x509_certificates(pem.encode())
    except ValueError as exc:
        return f"invalid certificate PEM: {exc}"
    return "" if certs else "no certificate in PEM data"


@lru_cache(maxsize=4096)
def _keypair_problem(cert_pem: str, key_pem: str) -> str:
    """'' when ``cert_pem`` holds a certificate chain whose first (leaf) certificate is the one
    of the private key ``key_pem``, else why not. Memoised on the Secret's content: parsing and
    comparing happen once per distinct Secret, not per listener or translation."""
    problem = _check_cert_chain(cert_pem)
    if problem:
        return problem
    try:
        key = load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        return f"invalid private key PEM: {exc}"
    try:
        leaf_key = x509.load_pem_x509_certificates(cert_pem.encode())[0].public_key()
    except (ValueError, UnsupportedAlgorithm) as exc:
        return f"the certificate's public key cannot be read: {exc}"
    # A key matches its certificate when their public keys are the same (any algorithm: RSA,
    # ECDSA, Ed25519...); compared in their one DER encoding. Envoy refuses a mismatched pair.
    if _public_der(leaf_key) != _public_der(key.public_key()):
        return (
            "tls.key is not the private key of the certificate in tls.crt (their public keys "
            "differ)"
        )
    return ""


def _public_der(key: CertificatePublicKeyTypes | PublicKeyTypes) -> bytes:
    return key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)


@lru_cache(maxsize=4096)
def dns_names(cert_pem: str) -> tuple[str, ...]:
    """The DNS subjectAltNames of the first (leaf) certificate of a PEM chain, lowercased and
    sorted; () when it has none or cannot be read. Clients match a server name against these
    alone (RFC 6125 6.4.4: not the subject's commonName once DNS names are present; browsers
    and Go never read it), so they are what a certificate covers."""
    try:
        leaf = x509.load_pem_x509_certificates(cert_pem.encode())[0]
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.DNSName)
    except (
        ValueError,
        IndexError,
        x509.ExtensionNotFound,
        x509.DuplicateExtension,
        x509.UnsupportedGeneralNameType,
    ):
        return ()
    return tuple(sorted({n.lower() for n in names}))


def tls_keypair(secret: m.Secret) -> tuple[str, str] | str:
    """(cert_pem, key_pem) from a kubernetes.io/tls style Secret, or a message saying what is
    wrong.
    """
    cert, key = secret_value(secret, "tls.crt"), secret_value(secret, "tls.key")
    if not cert or not key:
        return "Secret must contain tls.crt and tls.key"
    problem = _keypair_problem(cert, key)
    return problem or (cert, key)


def ca_bundle(data: dict[str, str] | None) -> str:
    """The PEM bundle under ``ca.crt`` if it holds valid certificates, else ''."""
    if not data:
        return ""
    pem = data.get("ca.crt", "")
    return pem if pem and not _check_cert_chain(pem) else ""


def ca_from_object(obj: m.ConfigMap | m.Secret) -> str:
    """CA bundle (``ca.crt``) of a ConfigMap or Secret, or '' when missing/invalid."""
    if isinstance(obj, m.ConfigMap):
        return ca_bundle(obj.data)
    value = secret_value(obj, "ca.crt")
    return ca_bundle({"ca.crt": value} if value else None)
