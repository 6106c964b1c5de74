"""A ClientTrafficPolicy's TLS settings live: ``serve`` with a real Envoy terminating HTTPS.

Without a policy a client limited to TLS 1.2 is served and a client offering h2 gets it by ALPN.
Once a policy on the Gateway asks for TLS 1.3 at least and ALPN ``http/1.1`` only, the TLS 1.2
client's handshake fails, while a TLS 1.3 client is served and gets ``http/1.1``. A policy
allowing TLS 1.2 with one cipher suite refuses a TLS 1.2 client offering only another one and
serves one offering it.
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
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until
from tests.support.policies import client_traffic_policy
from tests.support.specletter_objects import certificate

pytestmark = pytest.mark.timeout(60)

IP = "127.40.17.5"
HOST = "secure.test"


def client(
    highest: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED,
    alpn: tuple[str, ...] = (),
    ciphers: str = "",
) -> ssl.SSLContext:
    """A client context trusting nothing in particular (the test is about the handshake's
    parameters, not the certificate), using TLS ``highest`` at most."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.maximum_version = highest
    if alpn:
        context.set_alpn_protocols(list(alpn))
    if ciphers:
        context.set_ciphers(ciphers)
    return context


def handshake_sync(port: int, context: ssl.SSLContext) -> tuple[str, str] | None:
    """(the TLS version, the ALPN protocol or "") a handshake with Envoy settles on; None when
    it fails."""
    try:
        with (
            socket.create_connection((IP, port), timeout=2.0) as raw,
            context.wrap_socket(raw, server_hostname=HOST) as sock,
        ):
            return sock.version() or "", sock.selected_alpn_protocol() or ""
    except OSError:  # ssl.SSLError too
        return None


async def handshake(port: int, context: ssl.SSLContext) -> tuple[str, str] | None:
    return await asyncio.to_thread(handshake_sync, port, context)


def write_policy(directory: Path, spec: dict[str, Any]) -> None:
    h.write_manifests(directory / "policy.yaml", [client_traffic_policy("tls", "gw", spec)])


async def test_tls_versions_alpn_and_ciphers(tmp_path: Path, backends: dict[str, Any]) -> None:
    port = free_port(IP)
    cert, key = certificate((HOST,))  # an ECDSA key
    https = h.listener(
        "https",
        "HTTPS",
        port,
        hostname=HOST,
        tls={"mode": "Terminate", "certificateRefs": [{"name": "tls-cert"}]},
    )
    h.write_manifests(
        tmp_path / "base.yaml",
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
    tls12 = client(ssl.TLSVersion.TLSv1_2)
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):

        async def up() -> bool:
            reply = await h.fetch(IP, port, "/", HOST, tls=tls12, timeout=0.5)
            return reply is not None and reply.status == 200

        await until(up, 20, "Envoy serving HTTPS")
        # without a policy: TLS 1.2 is served, h2 chosen by ALPN
        assert await handshake(port, tls12) == ("TLSv1.2", "")
        assert await handshake(port, client(alpn=("h2", "http/1.1"))) == ("TLSv1.3", "h2")

        write_policy(tmp_path, {"tls": {"minVersion": "1.3", "alpnProtocols": ["http/1.1"]}})

        async def tls12_refused() -> bool:
            return await handshake(port, tls12) is None

        await until(tls12_refused, 20, "the TLS 1.2 client refused")
        assert await handshake(port, client(alpn=("h2", "http/1.1"))) == ("TLSv1.3", "http/1.1")
        reply = await h.fetch(IP, port, "/", HOST, tls=client())
        assert reply is not None and reply.status == 200

        write_policy(
            tmp_path, {"tls": {"maxVersion": "1.2", "ciphers": ["ECDHE-ECDSA-AES256-GCM-SHA384"]}}
        )
        chosen = client(ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384")

        async def tls12_served() -> bool:
            return await handshake(port, chosen) is not None

        await until(tls12_served, 20, "TLS 1.2 served again")
        other = client(ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
        assert await handshake(port, other) is None
        # the highest version is 1.2 now: a client that could use 1.3 gets 1.2
        got = await handshake(port, client())
        assert got is not None and got[0] == "TLSv1.2"
