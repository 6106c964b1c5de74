"""TLS listeners: server contexts, SNI capture and the TLS facts the echo reports."""

from __future__ import annotations

import base64
import dataclasses
import os
import ssl
import tempfile
import weakref
from typing import Any

from gateweave_conformance.echo.spec import read_pem

# OpenSSL cipher names -> IANA names (what Go's tls.CipherSuiteName returns). TLS 1.3
# suites already carry their IANA names in OpenSSL.
_IANA = {
    "ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-SHA": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "ECDHE-RSA-AES128-SHA": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "ECDHE-ECDSA-AES256-SHA": "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "ECDHE-RSA-AES256-SHA": "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "ECDHE-ECDSA-AES128-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "ECDHE-RSA-AES128-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "AES128-GCM-SHA256": "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "AES256-GCM-SHA384": "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "AES128-SHA": "TLS_RSA_WITH_AES_128_CBC_SHA",
    "AES256-SHA": "TLS_RSA_WITH_AES_256_CBC_SHA",
}
# Go's TLS 1.2 server suites (ECDHE only; RSA key exchange left out as Go's default does).
_TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:ECDHE+AES"


@dataclasses.dataclass(frozen=True)
class TLSState:
    """What Go's ``tls.ConnectionState`` tells the echo handlers."""

    version: str  # "TLSv1.3" / "TLSv1.2" (OpenSSL's names equal the HTTP echo's)
    server_name: str
    negotiated_protocol: str
    cipher_suite: str  # IANA name
    peer_certificates: tuple[str, ...]  # PEM, leaf only (Python's ssl exposes no chain)

    @property
    def go_version_name(self) -> str:
        """``tls.VersionName``: ``TLS 1.3`` (the TCP echo's spelling)."""
        return self.version.replace("TLSv", "TLS ")

    def http_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        if self.peer_certificates:
            out["peerCertificates"] = list(self.peer_certificates)
        out["serverName"] = self.server_name
        if self.negotiated_protocol:
            out["negotiatedProtocol"] = self.negotiated_protocol
        out["cipherSuite"] = self.cipher_suite
        return out


def pem_certificate(der: bytes) -> str:
    """Go's ``pem.Encode`` of a CERTIFICATE block: 64-character lines, trailing newline."""
    b64 = base64.b64encode(der).decode()
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


class ServerTLS:
    """A server SSLContext that remembers the SNI each connection sent."""

    def __init__(
        self,
        cert: str,
        key: str,
        *,
        alpn: list[str] | None = None,
        client_ca: str | None = None,
    ) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(_TLS12_CIPHERS)
        _load_chain(ctx, read_pem(cert), read_pem(key))
        if alpn:
            ctx.set_alpn_protocols(alpn)
        if client_ca:
            # Go's VerifyClientCertIfGiven: ask, verify what is sent, allow none.
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(cadata=read_pem(client_ca))
        self._sni: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        ctx.sni_callback = self._on_sni
        self.context = ctx

    def _on_sni(self, sslobj: Any, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        if server_name:
            self._sni[sslobj] = server_name

    def state(self, sslobj: Any) -> TLSState:
        """The TLS facts of an established connection (``ssl_object`` extra info)."""
        cipher = sslobj.cipher()
        cipher_name = cipher[0] if cipher else ""
        peer = sslobj.getpeercert(binary_form=True)
        return TLSState(
            version=sslobj.version() or "",
            server_name=self._sni.get(sslobj, ""),
            negotiated_protocol=sslobj.selected_alpn_protocol() or "",
            cipher_suite=_IANA.get(cipher_name, cipher_name),
            peer_certificates=(pem_certificate(peer),) if peer else (),
        )


def _load_chain(ctx: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    # ssl only loads certificates from files: write them to a private temp dir.
    with tempfile.TemporaryDirectory(prefix="echo-tls-") as tmp:
        cert_path = os.path.join(tmp, "crt")
        key_path = os.path.join(tmp, "key")
        with open(cert_path, "w") as f:
            f.write(cert_pem)
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(key_pem)
        ctx.load_cert_chain(cert_path, key_path)
