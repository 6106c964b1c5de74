"""JSON Web Tokens the tests make themselves: a fresh RSA (RS256) or EC P-256 (ES256) key, its
public half as a JWKS, and tokens signed with it (RFC 7515 compact form); a JWKS server on
loopback publishing such keys over HTTP."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from tests.support.threads import ServingThread


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int, size: int) -> str:
    return b64url(value.to_bytes(size, "big"))


@dataclass
class SigningKey:
    kid: str
    alg: str  # RS256 | ES256
    private: Any

    def jwk(self) -> dict[str, str]:
        if self.alg == "RS256":
            numbers = self.private.public_key().public_numbers()
            return {
                "kty": "RSA",
                "kid": self.kid,
                "alg": "RS256",
                "use": "sig",
                "n": _int(numbers.n, (numbers.n.bit_length() + 7) // 8),
                "e": _int(numbers.e, 3),
            }
        point = self.private.public_key().public_numbers()
        return {
            "kty": "EC",
            "kid": self.kid,
            "alg": "ES256",
            "use": "sig",
            "crv": "P-256",
            "x": _int(point.x, 32),
            "y": _int(point.y, 32),
        }

    def jwks(self) -> str:
        return json.dumps({"keys": [self.jwk()]})

    def sign(self, claims: dict[str, Any]) -> str:
        header = b64url(json.dumps({"alg": self.alg, "typ": "JWT", "kid": self.kid}).encode())
        payload = b64url(json.dumps(claims).encode())
        signing_input = f"{header}.{payload}".encode()
        if self.alg == "RS256":
            signature = self.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = decode_dss_signature(self.private.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{header}.{payload}.{b64url(signature)}"


def rsa_key(kid: str = "rsa-1") -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str = "ec-1") -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def tampered(token: str, claims: dict[str, Any]) -> str:
    """``token`` with its payload replaced by ``claims``, its signature kept (no longer valid)."""
    header, _, signature = token.split(".")
    return f"{header}.{b64url(json.dumps(claims).encode())}.{signature}"


class _JwksHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _JwksHTTPServer

    def do_GET(self) -> None:
        self.server.fetches.append(self.path)
        if len(self.server.fetches) <= self.server.failures:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.server.document.encode()
        found = self.path == self.server.jwks_path
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if found else 0))
        self.end_headers()
        if found:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _JwksHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], path: str, document: str, failures: int) -> None:
        super().__init__(address, _JwksHandler)
        self.jwks_path, self.document, self.failures = path, document, failures
        self.fetches: list[str] = []


class JwksServer:
    """An HTTP server on ``host`` (a free port) answering ``GET path`` with the JWKS of ``keys``
    (anything else: 404), but the first ``failures`` requests with 503; ``fetches`` lists the
    paths it was asked for."""

    def __init__(
        self, host: str, keys: list[SigningKey], path: str = "/jwks.json", failures: int = 0
    ) -> None:
        document = json.dumps({"keys": [k.jwk() for k in keys]})
        server = _JwksHTTPServer((host, 0), path, document, failures)
        self.host, self.port = host, int(server.server_address[1])
        self.fetches = server.fetches
        self.uri = f"http://{host}:{self.port}{path}"
        self._serving = ServingThread(server)

    def close(self) -> None:
        self._serving.close()
