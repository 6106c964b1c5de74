"""ClientTrafficPolicy ``tls``: the settings of the filter chains terminating TLS on the
listeners a policy governs (ctp.py puts them into the listener's
:class:`~gateweave.ir.ClientSettings`). Each function reads one part of ``tls`` and puts its
problems, with their place, into ``out``. ``tls.clientValidation``: clientvalidation.py.
"""

from __future__ import annotations

from typing import Any

FIELDS: frozenset[str] = frozenset(
    {
        "tls",
        "tls.minVersion",
        "tls.maxVersion",
        "tls.ciphers",
        "tls.alpnProtocols",
        "tls.ecdhCurves",
        "tls.signatureAlgorithms",
        "tls.session",
        "tls.session.resumption",
        "tls.session.resumption.stateless",
        "tls.session.resumption.stateful",
    }
)

VERSIONS = ("Auto", "1.0", "1.1", "1.2", "1.3")
_ALPN = ("http/1.0", "http/1.1", "h2")
# The TLS 1.2 and older cipher suites Envoy's TLS library (BoringSSL) knows by name; a name it
# does not know makes Envoy refuse the whole listener. "[A|B]": A and B of equal preference.
_CIPHERS: frozenset[str] = frozenset(
    {
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-PSK-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-PSK-AES128-CBC-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "ECDHE-PSK-AES256-CBC-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA",
        "PSK-AES128-CBC-SHA",
        "AES256-SHA",
        "PSK-AES256-CBC-SHA",
        "DES-CBC3-SHA",
    }
)


def _cipher_known(entry: str) -> bool:
    names = entry[1:-1].split("|") if entry.startswith("[") and entry.endswith("]") else [entry]
    return all(name in _CIPHERS for name in names)


def strings(value: Any, at: str, out: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        out.append(f"{at}: {value!r} is not a list of strings")
        return None
    return tuple(value)


def versions(
    spec: dict[str, Any], out: list[str]
) -> tuple[str, str, tuple[str, ...], tuple[str, ...] | None]:
    """(``tls.minVersion``, ``tls.maxVersion`` ("" when unset or Auto), ``tls.ciphers``,
    ``tls.alpnProtocols`` (None when unset)); problems go to ``out``."""
    tls = spec.get("tls")
    if tls is None:
        return "", "", (), None
    if not isinstance(tls, dict):
        out.append(f"spec.tls: {tls!r} is not an object")
        return "", "", (), None
    versions: list[str] = []
    for key in ("minVersion", "maxVersion"):
        version = tls.get(key)
        if version is not None and version not in VERSIONS:
            out.append(f"spec.tls.{key}: {version!r} is not one of {', '.join(VERSIONS)}")
            version = None
        versions.append("" if version in (None, "Auto") else str(version))
    low, high = versions
    # as the CRD's rules: an unset minimum stands for 1.2 (Envoy Gateway's), Auto for the lowest
    least = low or ("1.0" if tls.get("minVersion") == "Auto" else "1.2")
    if high and least > high:
        out.append(f"spec.tls.maxVersion: {high} is below spec.tls.minVersion {least}")
    ciphers = strings(tls.get("ciphers"), "spec.tls.ciphers", out) or ()
    if ciphers and low == "1.3":
        out.append("spec.tls.ciphers: no cipher suite is chosen when the minimum version is 1.3")
    for i, cipher in enumerate(ciphers):
        if not _cipher_known(cipher):
            out.append(f"spec.tls.ciphers[{i}]: {cipher!r} is not a cipher suite Envoy knows")
    alpn = strings(tls.get("alpnProtocols"), "spec.tls.alpnProtocols", out)
    for i, protocol in enumerate(alpn or ()):
        if protocol not in _ALPN:
            out.append(
                f"spec.tls.alpnProtocols[{i}]: {protocol!r} is not one of {', '.join(_ALPN)}"
            )
    return low, high, ciphers, alpn


# The key exchange groups and signature algorithms Envoy's TLS library (BoringSSL) knows by name
# (a name it does not know makes Envoy refuse the whole listener).
CURVES = ("X25519", "P-256", "P-384", "P-521", "X25519MLKEM768")
SIGNATURE_ALGORITHMS = (
    "rsa_pkcs1_sha1",
    "rsa_pkcs1_sha256",
    "rsa_pkcs1_sha384",
    "rsa_pkcs1_sha512",
    "ecdsa_sha1",
    "ecdsa_secp256r1_sha256",
    "ecdsa_secp384r1_sha384",
    "ecdsa_secp521r1_sha512",
    "rsa_pss_rsae_sha256",
    "rsa_pss_rsae_sha384",
    "rsa_pss_rsae_sha512",
    "ed25519",
)


def groups(spec: dict[str, Any], out: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(``tls.ecdhCurves``, ``tls.signatureAlgorithms``), empty when unset; problems go to
    ``out``."""
    tls = spec.get("tls")
    if not isinstance(tls, dict):
        return (), ()
    got: list[tuple[str, ...]] = []
    for key, known in (("ecdhCurves", CURVES), ("signatureAlgorithms", SIGNATURE_ALGORITHMS)):
        names = strings(tls.get(key), f"spec.tls.{key}", out) or ()
        bad = [i for i, name in enumerate(names) if name not in known]
        for i in bad:
            out.append(f"spec.tls.{key}[{i}]: {names[i]!r} is not one of {', '.join(known)}")
        got.append(() if bad else names)
    return got[0], got[1]


def tls_object(spec: dict[str, Any], key: str, out: list[str]) -> dict[str, Any] | None:
    """``tls.<key>``, an object; None when unset, or (with the problem in ``out``) when it is
    not one."""
    tls = spec.get("tls")
    value = tls.get(key) if isinstance(tls, dict) else None
    if value is not None and not isinstance(value, dict):
        out.append(f"spec.tls.{key}: {value!r} is not an object")
        return None
    return value


_RESUMPTIONS = ("stateless", "stateful")


def session(spec: dict[str, Any], out: list[str]) -> tuple[str, ...] | None:
    """The kinds of TLS session resumption ``tls.session.resumption`` allows (``stateless``:
    session tickets, ``stateful``: session IDs), the others off as in Envoy Gateway; None when
    ``tls.session`` is unset (Envoy's: both). Problems go to ``out``."""
    session = tls_object(spec, "session", out)
    if session is None:
        return None
    resumption = session.get("resumption")
    resumption = {} if resumption is None else resumption
    if not isinstance(resumption, dict):
        out.append(f"spec.tls.session.resumption: {resumption!r} is not an object")
        return None
    for kind in _RESUMPTIONS:
        if resumption.get(kind) not in (None, {}):
            out.append(f"spec.tls.session.resumption.{kind}: {resumption[kind]!r} is not {{}}")
    return tuple(kind for kind in _RESUMPTIONS if resumption.get(kind) is not None)
