"""TLS transport sockets: downstream (listener termination) and upstream (BackendTLSPolicy, Backend
``tls``).
"""

from __future__ import annotations

import os

from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf import wrappers_pb2

from gateweave import ir
from gateweave.xds.resources import pack

TLS_SOCKET = "envoy.transport_sockets.tls"

# Where the system trust store lives (wellKnownCACertificates: System); the first
# existing file wins, the Debian path is the fallback.
SYSTEM_CA_FILES: tuple[str, ...] = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, some BSDs
)

HTTP_ALPN: tuple[str, ...] = ("h2", "http/1.1")


def system_ca_file() -> str:
    for path in SYSTEM_CA_FILES:
        if os.path.exists(path):
            return path
    return SYSTEM_CA_FILES[0]


def _inline(pem: str) -> base_pb2.DataSource:
    return base_pb2.DataSource(inline_string=pem)


def _certificate(cert_pem: str, key_pem: str) -> common_pb2.TlsCertificate:
    return common_pb2.TlsCertificate(
        certificate_chain=_inline(cert_pem), private_key=_inline(key_pem)
    )


def _socket(
    context: tls_pb2.DownstreamTlsContext | tls_pb2.UpstreamTlsContext,
) -> base_pb2.TransportSocket:
    return base_pb2.TransportSocket(name=TLS_SOCKET, typed_config=pack(context))


def downstream_context(
    term: ir.TLSTermination, default_alpn: tuple[str, ...] = ()
) -> tls_pb2.DownstreamTlsContext:
    """TLS termination on a listener filter chain.

    Several certificates are allowed (Envoy picks one by SNI and key type). Client
    validation: ``AllowValidOnly`` requires a certificate that chains to the CA;
    ``AllowInsecureFallback`` asks for one but accepts connections without a
    certificate or with one that fails verification (the spec delegates
    authorization to the backend in that mode).
    """
    common = tls_pb2.CommonTlsContext(
        tls_certificates=[_certificate(c.cert_pem, c.key_pem) for c in term.certificates],
        alpn_protocols=list(term.alpn or default_alpn),
    )
    # The constructor copies ``common``: build it completely first.
    context = tls_pb2.DownstreamTlsContext(common_tls_context=common)
    if term.client_validation is not None:
        _validate_clients(context, term.client_validation)
    return context


def _validate_clients(
    context: tls_pb2.DownstreamTlsContext, validation: ir.ClientValidation
) -> None:
    """Client certificates asked for on ``context``, required and verified against the CA as
    ``validation.mode`` says (:class:`~gateweave.ir.ClientValidation`), and held to its hashes,
    subject alt names, revocation lists and expiry."""
    verify = validation.mode in ("AllowValidOnly", "VerifyIfGiven")
    checks = common_pb2.CertificateValidationContext(
        trusted_ca=_inline(validation.ca_pem),
        trust_chain_verification=(
            common_pb2.CertificateValidationContext.VERIFY_TRUST_CHAIN
            if verify
            else common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
        ),
        verify_certificate_spki=validation.spki_hashes,
        verify_certificate_hash=validation.certificate_hashes,
        match_typed_subject_alt_names=[_client_san(san) for san in validation.subject_alt_names],
        only_verify_leaf_cert_crl=validation.crl_leaf_only,
        allow_expired_certificate=validation.allow_expired,
    )
    if validation.crl_pem:
        checks.crl.CopyFrom(_inline(validation.crl_pem))
    context.common_tls_context.validation_context.CopyFrom(checks)
    context.require_client_certificate.CopyFrom(
        wrappers_pb2.BoolValue(value=validation.mode in ("AllowValidOnly", "RequireAny"))
    )


def _client_san(san: ir.ClientSANMatch) -> common_pb2.SubjectAltNameMatcher:
    if san.match == "RegularExpression":
        matcher = string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=san.value))
    else:
        matcher = string_pb2.StringMatcher(**{san.match.lower(): san.value})
    return common_pb2.SubjectAltNameMatcher(
        san_type=common_pb2.SubjectAltNameMatcher.SanType.Value(san.type),
        matcher=matcher,
        oid=san.oid,
    )


_VERSIONS = {
    "1.0": common_pb2.TlsParameters.TLSv1_0,
    "1.1": common_pb2.TlsParameters.TLSv1_1,
    "1.2": common_pb2.TlsParameters.TLSv1_2,
    "1.3": common_pb2.TlsParameters.TLSv1_3,
}


def apply_client_tls(context: tls_pb2.DownstreamTlsContext, client: ir.ClientSettings) -> None:
    """A ClientTrafficPolicy's TLS settings on a terminating filter chain: the lowest and
    highest TLS versions a client may use, the TLS 1.2 and older cipher suites, the key exchange
    groups and signature algorithms offered, the ALPN protocols (in place of the chain's own), the
    kinds of session resumption allowed and the client certificate validation (in place of the
    chain's own)."""
    params = context.common_tls_context.tls_params
    if client.tls_min_version:
        params.tls_minimum_protocol_version = _VERSIONS[client.tls_min_version]
    if client.tls_max_version:
        params.tls_maximum_protocol_version = _VERSIONS[client.tls_max_version]
    params.cipher_suites.extend(client.tls_ciphers)
    params.ecdh_curves.extend(client.tls_ecdh_curves)
    params.signature_algorithms.extend(client.tls_signature_algorithms)
    if client.tls_alpn is not None:
        del context.common_tls_context.alpn_protocols[:]
        context.common_tls_context.alpn_protocols.extend(client.tls_alpn)
    if client.tls_client_validation is not None:
        _validate_clients(context, client.tls_client_validation)
    if client.tls_resumption is not None:
        context.disable_stateless_session_resumption = "stateless" not in client.tls_resumption
        context.disable_stateful_session_resumption = "stateful" not in client.tls_resumption


def downstream_socket(
    term: ir.TLSTermination,
    default_alpn: tuple[str, ...] = (),
    client: ir.ClientSettings | None = None,
) -> base_pb2.TransportSocket:
    """The terminating socket of a filter chain; ``client``: its ClientTrafficPolicy's effect."""
    context = downstream_context(term, default_alpn)
    if client is not None:
        apply_client_tls(context, client)
    return _socket(context)


_SAN_TYPES = {
    "DNS": common_pb2.SubjectAltNameMatcher.DNS,
    "URI": common_pb2.SubjectAltNameMatcher.URI,
}


def upstream_context(tls: ir.UpstreamTLS, alpn: tuple[str, ...] = ()) -> tls_pb2.UpstreamTlsContext:
    """TLS origination to a backend (BackendTLSPolicy, a Backend's ``tls``).

    The server certificate must chain to ``ca_pem`` (or the system store when empty)
    and carry one of the subject alt names; with none given, the SNI hostname itself
    must be a DNS SAN, as BackendTLSPolicy requires. Without an SNI there is no SAN
    matcher here (an HTTP cluster checks the request's Host instead, see
    :func:`gateweave.xds.clusters.cluster`); ``insecure_skip_verify``: no check at all.
    """
    common = tls_pb2.CommonTlsContext(alpn_protocols=list(alpn))
    if not tls.insecure_skip_verify:
        sans = tls.subject_alt_names or (
            (ir.SANMatch(type="DNS", value=tls.sni),) if tls.sni else ()
        )
        matchers = []
        for san in sans:
            san_type = _SAN_TYPES.get(san.type)
            if san_type is None:
                raise ValueError(f"unsupported subject alt name type {san.type!r}")
            matchers.append(
                common_pb2.SubjectAltNameMatcher(
                    san_type=san_type, matcher=string_pb2.StringMatcher(exact=san.value)
                )
            )
        trusted_ca = (
            _inline(tls.ca_pem) if tls.ca_pem else base_pb2.DataSource(filename=system_ca_file())
        )
        common.validation_context.CopyFrom(
            common_pb2.CertificateValidationContext(
                trusted_ca=trusted_ca, match_typed_subject_alt_names=matchers
            )
        )
    if tls.client_cert_pem:
        common.tls_certificates.append(_certificate(tls.client_cert_pem, tls.client_key_pem))
    return tls_pb2.UpstreamTlsContext(sni=tls.sni, common_tls_context=common)


def upstream_socket(tls: ir.UpstreamTLS, alpn: tuple[str, ...] = ()) -> base_pb2.TransportSocket:
    return _socket(upstream_context(tls, alpn))
