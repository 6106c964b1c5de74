"""A ClientTrafficPolicy's client certificate validation, key exchange groups, signature
algorithms and session resumption live: ``serve`` with a real Envoy terminating HTTPS.

Client validation: before the policy a client without a certificate is served; once a policy
validates clients against a CA (a ConfigMap's ``ca.crt``), that client and one with a
certificate of another CA are refused, one with a certificate the CA signed (made by the test) is
served; with ``optional`` the client without a certificate is served again, the foreign one still
refused.

Groups, algorithms, resumption: under ``ecdhCurves: [P-384]`` a client offering only P-256
fails its handshake, one offering P-384 is served; ``signatureAlgorithms`` with an ECDSA one
serves, with only an RSA one Envoy's ECDSA key cannot sign the handshake (refused). A TLS 1.2
session resumes with a ticket and with a session ID without a policy; ``resumption:
{stateless: {}}`` resumes with tickets only, ``resumption: {}`` with neither.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.tlsgen import TLSSpec, generate
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until
from tests.support.policies import client_traffic_policy
from tests.support.specletter_objects import certificate

pytestmark = pytest.mark.timeout(90)

IP = "127.40.21.4"
HOST = "secure.test"


def client(
    directory: Path | None = None,
    issued: Any = None,
    *,
    tls12: bool = False,
    curve: str = "",
    tickets: bool = True,
) -> ssl.SSLContext:
    """A client context trusting any server (the test is about the client's side), with the
    certificate ``issued`` (written under ``directory``) if given."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if curve:
        context.set_ecdh_curve(curve)
    if not tickets:
        context.options |= ssl.OP_NO_TICKET
    if issued is not None and directory is not None:
        cert, key = directory / "client.crt", directory / "client.key"
        cert.write_bytes(issued.cert_pem)
        key.write_bytes(issued.key_pem)
        context.load_cert_chain(cert, key)
    return context


async def served(port: int, context: ssl.SSLContext) -> bool:
    """Whether a request over ``context`` gets 200 (a refused handshake or client certificate
    gets no answer at all)."""
    reply = await h.fetch(IP, port, "/", HOST, tls=context, timeout=2.0)
    return reply is not None and reply.status == 200


def resumed_sync(port: int, context: ssl.SSLContext) -> bool:
    """Whether a second connection resumes the first one's TLS session."""
    session, reused = None, False
    for _ in range(2):
        with (
            socket.create_connection((IP, port), timeout=2.0) as raw,
            context.wrap_socket(raw, server_hostname=HOST, session=session) as sock,
        ):
            request = f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
            sock.sendall(request.encode())
            while sock.recv(65536):
                pass
            reused, session = sock.session_reused is True, sock.session
    return reused


async def resumed(port: int, context: ssl.SSLContext) -> bool:
    return await asyncio.to_thread(resumed_sync, port, context)


def write_base(directory: Path, port: int, backends: dict[str, Any]) -> None:
    cert, key = certificate((HOST,))  # an ECDSA P-256 key
    https = h.listener(
        "https",
        "HTTPS",
        port,
        hostname=HOST,
        tls={"mode": "Terminate", "certificateRefs": [{"name": "tls-cert"}]},
    )
    h.write_manifests(
        directory / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [https]),
            *h.service("svc-a", 80, backends["A"].port),
            h.tls_secret("tls-cert", cert.encode(), key.encode()),
            h.http_route(
                "secure", "gw", [HOST], [h.rule("/", [h.backend_ref("svc-a", 80)])], section="https"
            ),
        ],
    )


def write_policy(directory: Path, tls: dict[str, Any]) -> None:
    h.write_manifests(directory / "policy.yaml", [client_traffic_policy("tls", "gw", {"tls": tls})])


async def test_client_certificates_validated(tmp_path: Path, backends: dict[str, Any]) -> None:
    port = free_port(IP)
    write_base(tmp_path, port, backends)
    material = generate(
        [
            TLSSpec("ConfigMap", "default", "client-ca"),
            TLSSpec("Secret", "default", "client", signed_by="default/client-ca"),
            TLSSpec("ConfigMap", "default", "other-ca"),
            TLSSpec("Secret", "default", "foreign", signed_by="default/other-ca"),
        ]
    )
    h.write_manifests(
        tmp_path / "ca.yaml", [material.get("ConfigMap", "default/client-ca").manifest()]
    )
    (tmp_path / "own").mkdir()
    (tmp_path / "other").mkdir()
    anonymous = client()
    own = client(tmp_path / "own", material.get("Secret", "default/client"))
    foreign = client(tmp_path / "other", material.get("Secret", "default/foreign"))
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await until(lambda: served(port, anonymous), 20, "Envoy serving HTTPS")
        assert await served(port, foreign)

        refs = [{"kind": "ConfigMap", "name": "client-ca"}]
        write_policy(tmp_path, {"clientValidation": {"caCertificateRefs": refs}})

        async def anonymous_refused() -> bool:
            return not await served(port, anonymous)

        await until(anonymous_refused, 20, "a client without a certificate refused")
        assert await served(port, own)
        assert not await served(port, foreign)

        write_policy(tmp_path, {"clientValidation": {"caCertificateRefs": refs, "optional": True}})
        await until(lambda: served(port, anonymous), 20, "a client without a certificate served")
        assert await served(port, own)
        assert not await served(port, foreign)


async def test_groups_signature_algorithms_and_session_resumption(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, port, backends)
    p256, p384 = client(curve="prime256v1"), client(curve="secp384r1")
    tickets, session_ids = client(tls12=True), client(tls12=True, tickets=False)
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await until(lambda: served(port, p256), 20, "Envoy serving HTTPS")
        assert await resumed(port, tickets)
        assert await resumed(port, session_ids)

        write_policy(tmp_path, {"ecdhCurves": ["P-384"]})

        async def p256_refused() -> bool:
            return not await served(port, p256)

        await until(p256_refused, 20, "a client offering only P-256 refused")
        assert await served(port, p384)

        write_policy(tmp_path, {"signatureAlgorithms": ["ecdsa_secp256r1_sha256"]})
        await until(lambda: served(port, p256), 20, "P-256 served again, signed with ECDSA")

        write_policy(tmp_path, {"signatureAlgorithms": ["rsa_pss_rsae_sha256"]})

        async def unsigned() -> bool:
            return not await served(port, client())

        # the certificate's key is ECDSA: Envoy cannot sign the handshake with an RSA algorithm
        await until(unsigned, 20, "no signature algorithm for the server's key")

        write_policy(tmp_path, {"session": {"resumption": {"stateless": {}}}})
        # the signature algorithms go with the same update
        await until(lambda: served(port, client()), 20, "the ECDSA key signing again")
        assert not await resumed(port, session_ids)
        assert await resumed(port, tickets)

        write_policy(tmp_path, {"session": {"resumption": {}}})

        async def tickets_off() -> bool:
            return not await resumed(port, tickets)

        await until(tickets_off, 20, "sessions no longer resumed by ticket")
        assert not await resumed(port, session_ids)
