"""ClientTrafficPolicy ``tls.clientValidation``: the client certificates the terminating filter
chains of the governed listeners ask for, and how they are checked (ctp.py's :func:`resolve`
reads it, for the listener's :class:`~gateweave.ir.ClientSettings`): the CA certificates of
``caCertificateRefs`` and the ``mode``; the SHA-256 hashes of the certificate
(``certificateHashes``) or of its public key (``spkiHashes``), matchers of its subject alt names
(``subjectAltNames``), revocation lists (``crl``) and ``allowExpiredCertificate``. ConfigMaps and
Secrets are read as Envoy Gateway reads them (another namespace's with a ReferenceGrant to
ClientTrafficPolicies).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from cryptography import x509

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import certs
from gateweave.translate.policies import clienttls
from gateweave.translate.regex import re2_error

FIELDS: frozenset[str] = frozenset(
    {
        "tls.clientValidation",
        "tls.clientValidation.caCertificateRefs",
        "tls.clientValidation.caCertificateRefs.group",
        "tls.clientValidation.caCertificateRefs.kind",
        "tls.clientValidation.caCertificateRefs.name",
        "tls.clientValidation.caCertificateRefs.namespace",
        "tls.clientValidation.optional",
        "tls.clientValidation.mode",
        "tls.clientValidation.spkiHashes",
        "tls.clientValidation.certificateHashes",
        "tls.clientValidation.allowExpiredCertificate",
        "tls.clientValidation.crl",
        "tls.clientValidation.crl.onlyVerifyLeafCertificate",
        "tls.clientValidation.crl.refs",
        "tls.clientValidation.crl.refs.group",
        "tls.clientValidation.crl.refs.kind",
        "tls.clientValidation.crl.refs.name",
        "tls.clientValidation.crl.refs.namespace",
        "tls.clientValidation.subjectAltNames",
        *(
            f"tls.clientValidation.subjectAltNames.{kind}{part}"
            for kind in ("dnsNames", "emailAddresses", "ipAddresses", "uris", "otherNames")
            for part in ("", ".type", ".value")
        ),
        "tls.clientValidation.subjectAltNames.otherNames.oid",
    }
)

_VALIDATION_AT = "spec.tls.clientValidation"
# Envoy Gateway's client validation modes as the IR's (ClientValidation.mode)
_VALIDATION_MODES = {
    "RequireAndVerify": "AllowValidOnly",
    "VerifyIfGiven": "VerifyIfGiven",
    "RequireAny": "RequireAny",
    "Request": "AllowInsecureFallback",
}


def client_validation(
    ctx: Any, namespace: str, spec: dict[str, Any], out: list[str]
) -> ir.ClientValidation | None:
    """``tls.clientValidation`` (None when unset): the CA bundle of its ``caCertificateRefs``
    (the ``ca.crt`` of ConfigMaps or Secrets; another namespace's with a ReferenceGrant to
    ClientTrafficPolicies of ``namespace``) and its mode (unset: ``RequireAndVerify``, or
    ``VerifyIfGiven`` when ``optional``), with the further checks of a certificate; problems go
    to ``out``."""
    raw = clienttls.tls_object(spec, "clientValidation", out)
    if raw is None:
        return None
    problems = len(out)
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        out.append(f"{_VALIDATION_AT}.optional: {optional!r} is not true or false")
    mode = raw.get("mode", "VerifyIfGiven" if optional is True else "RequireAndVerify")
    if mode not in _VALIDATION_MODES:
        out.append(f"{_VALIDATION_AT}.mode: {mode!r} is not one of {', '.join(_VALIDATION_MODES)}")
    refs = raw.get("caCertificateRefs")
    if not isinstance(refs, list) or not refs:
        out.append(f"{_VALIDATION_AT}.caCertificateRefs: gateweave needs the CA certificates")
        refs = []
    bundles = [
        _ca_bundle(ctx, namespace, ref, f"{_VALIDATION_AT}.caCertificateRefs[{i}]", out)
        for i, ref in enumerate(refs)
    ]
    spki = _hashes(raw, "spkiHashes", _spki_problem, out)
    hashes = _hashes(raw, "certificateHashes", _hex_problem, out)
    sans = _subject_alt_names(raw.get("subjectAltNames"), out)
    crl, leaf_only = _crl(ctx, namespace, raw.get("crl"), out)
    expired = raw.get("allowExpiredCertificate", False)
    if not isinstance(expired, bool):
        out.append(f"{_VALIDATION_AT}.allowExpiredCertificate: {expired!r} is not true or false")
    elif expired and mode not in ("RequireAndVerify", "VerifyIfGiven"):
        out.append(
            f"{_VALIDATION_AT}.allowExpiredCertificate: only with mode VerifyIfGiven or "
            "RequireAndVerify"
        )
    if len(out) > problems:
        return None
    pem = "".join(b if b.endswith("\n") else b + "\n" for b in bundles if b)
    return ir.ClientValidation(
        ca_pem=pem,
        mode=_VALIDATION_MODES[mode],
        spki_hashes=spki,
        certificate_hashes=hashes,
        subject_alt_names=sans,
        crl_pem=crl,
        crl_leaf_only=leaf_only,
        allow_expired=expired is True,
    )


def _referenced(ctx: Any, namespace: str, ref: Any, at: str, out: list[str]) -> Any:
    """The ConfigMap or Secret ``ref`` names (another namespace's with a ReferenceGrant to
    ClientTrafficPolicies of ``namespace``); None with the problem in ``out``."""
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
        out.append(f"{at}: {ref!r} is not a reference with a name")
        return None
    group, kind = ref.get("group", ""), ref.get("kind", "Secret")
    if group not in ("", "core") or kind not in ("ConfigMap", "Secret"):
        out.append(f"{at}: {group or 'core'}/{kind} is not a ConfigMap or Secret")
        return None
    ns, name = ref.get("namespace") or namespace, ref["name"]
    if not ctx.reference_allowed(
        m.ENVOY_GATEWAY_GROUP, "ClientTrafficPolicy", namespace, "", kind, ns, name
    ):
        out.append(
            f"{at}: {kind} {ns}/{name} is in another namespace and no ReferenceGrant allows it"
        )
        return None
    objects = ctx.snapshot.config_maps if kind == "ConfigMap" else ctx.snapshot.secrets
    obj = objects.get((ns, name))
    if obj is None:
        out.append(f"{at}: {kind} {ns}/{name} does not exist")
    return obj


def _ca_bundle(ctx: Any, namespace: str, ref: Any, at: str, out: list[str]) -> str:
    """The CA certificates (PEM) under ``ca.crt`` of the ConfigMap or Secret ``ref`` names
    ("" with the problem in ``out`` when it cannot be read)."""
    obj = _referenced(ctx, namespace, ref, at, out)
    if obj is None:
        return ""
    pem = certs.ca_from_object(obj)
    if not pem:
        out.append(f"{at}: {_shown(obj)} has no valid PEM certificates under ca.crt")
    return pem


def _shown(obj: Any) -> str:
    kind = "ConfigMap" if isinstance(obj, m.ConfigMap) else "Secret"
    return f"{kind} {obj.metadata.namespace}/{obj.metadata.name}"


def _spki_problem(value: str) -> str | None:
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    return None if len(digest) == 32 else "is not a base64 SHA-256 hash"


def _hex_problem(value: str) -> str | None:
    digits = value.replace(":", "")
    ok = len(digits) == 64 and all(c in "0123456789abcdefABCDEF" for c in digits)
    return None if ok else "is not a hex SHA-256 hash"


def _hashes(
    raw: dict[str, Any], key: str, problem: Callable[[str], str | None], out: list[str]
) -> tuple[str, ...]:
    """``clientValidation.<key>``: SHA-256 hashes, each checked by ``problem``."""
    at = f"{_VALIDATION_AT}.{key}"
    values = clienttls.strings(raw.get(key), at, out) or ()
    for i, value in enumerate(values):
        why = problem(value)
        if why is not None:
            out.append(f"{at}[{i}]: {value!r} {why}")
    return values


# subjectAltNames' lists as Envoy's SAN types
_SAN_TYPES = {
    "dnsNames": "DNS",
    "emailAddresses": "EMAIL",
    "ipAddresses": "IP_ADDRESS",
    "uris": "URI",
    "otherNames": "OTHER_NAME",
}
_MATCHES = ("Exact", "Prefix", "Suffix", "RegularExpression")
_OID = re.compile(r"[0-9]+(\.[0-9]+)+")


def _subject_alt_names(raw: Any, out: list[str]) -> tuple[ir.ClientSANMatch, ...]:
    """``clientValidation.subjectAltNames``: the matchers of each kind of name, in the CRD's
    order of kinds."""
    at = f"{_VALIDATION_AT}.subjectAltNames"
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        out.append(f"{at}: {raw!r} is not an object")
        return ()
    found: list[ir.ClientSANMatch] = []
    for key, san_type in _SAN_TYPES.items():
        entries = raw.get(key) or []
        if not isinstance(entries, list):
            out.append(f"{at}.{key}: {entries!r} is not a list")
            continue
        for i, entry in enumerate(entries):
            where = f"{at}.{key}[{i}]"
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(value, str) or not value:
                out.append(f"{where}: a value is needed")
                continue
            match, oid = entry.get("type", "Exact"), entry.get("oid", "")
            if match not in _MATCHES:
                out.append(f"{where}.type: {match!r} is not one of {', '.join(_MATCHES)}")
                continue
            if match == "RegularExpression" and (why := re2_error(value)) is not None:
                out.append(f"{where}.value {value!r}: {why}")
                continue
            if san_type == "OTHER_NAME" and not (isinstance(oid, str) and _OID.fullmatch(oid)):
                out.append(f"{where}.oid: {oid!r} is not an object identifier")
                continue
            found.append(ir.ClientSANMatch(type=san_type, match=match, value=value, oid=oid))
    return tuple(found)


_CRL_BLOCK = re.compile(r"-----BEGIN X509 CRL-----.*?-----END X509 CRL-----", re.DOTALL)


def _crl(ctx: Any, namespace: str, raw: Any, out: list[str]) -> tuple[str, bool]:
    """``clientValidation.crl``: the revocation lists (PEM) under ``ca.crl`` of its ``refs``
    (ConfigMaps or Secrets, read as the CA certificates are), and whether only the client's own
    certificate is checked against them."""
    at = f"{_VALIDATION_AT}.crl"
    if raw is None:
        return "", False
    if not isinstance(raw, dict):
        out.append(f"{at}: {raw!r} is not an object")
        return "", False
    leaf_only = raw.get("onlyVerifyLeafCertificate", False)
    if not isinstance(leaf_only, bool):
        out.append(f"{at}.onlyVerifyLeafCertificate: {leaf_only!r} is not true or false")
    refs = raw.get("refs")
    if not isinstance(refs, list) or not refs:
        out.append(f"{at}.refs: at least one reference is needed")
        return "", False
    lists: list[str] = []
    for i, ref in enumerate(refs):
        where = f"{at}.refs[{i}]"
        obj = _referenced(ctx, namespace, ref, where, out)
        if obj is None:
            continue
        text = (
            obj.data.get("ca.crl")
            if isinstance(obj, m.ConfigMap)
            else certs.secret_value(obj, "ca.crl")
        )
        blocks = _CRL_BLOCK.findall(text or "")
        if not blocks or not all(_crl_readable(b) for b in blocks):
            out.append(f"{where}: {_shown(obj)} has no valid PEM revocation list under ca.crl")
            continue
        lists.extend(blocks)
    return "".join(b + "\n" for b in lists), leaf_only is True


def _crl_readable(block: str) -> bool:
    try:
        x509.load_pem_x509_crl(block.encode())
    except ValueError:
        return False
    return True
