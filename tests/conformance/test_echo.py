"""The conformance echo backends against real sockets on 127.20.x.y (ECHO.md)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateweave_conformance import grpcecho_pb2 as pb
from gateweave_conformance import grpcecho_pb2_grpc as pb_grpc
from gateweave_conformance import traffic
from gateweave_conformance.echo import EchoSpec, RunningEcho, pod_name, start_echo
from gateweave_conformance.echo.godur import GoError, atoi, parse_duration
from gateweave_conformance.echo.probe import dns_query
from gateweave_conformance.echo.websocket import accept_key, encode_frame
from tests.support.stepenv import FixedEnv

HOST = "127.20.61.1"
SNI = "abc.example.com"

# ------------------------------------------------------------------ certificates


@dataclasses.dataclass
class Pki:
    ca_pem: str
    server_cert: str
    server_key: str
    client_cert: Path
    client_key: Path
    client_cert_pem: str
    rogue_cert: Path
    rogue_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    dns: list[str] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if issuer:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
            critical=False,
        )
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _cert("echo test CA", ca_key, None, ca=True)
    server_key = _key()
    server = _cert(SNI, server_key, (ca, ca_key), dns=[SNI, "other.example.com"])
    client_key = _key()
    client = _cert("client", client_key, (ca, ca_key))
    rogue_ca_key = _key()
    rogue_ca = _cert("rogue CA", rogue_ca_key, None, ca=True)
    rogue_key = _key()
    rogue = _cert("rogue", rogue_key, (rogue_ca, rogue_ca_key))
    files = {
        "client.crt": _pem(client),
        "client.key": _key_pem(client_key),
        "rogue.crt": _pem(rogue),
        "rogue.key": _key_pem(rogue_key),
        "server.crt": _pem(server),
        "server.key": _key_pem(server_key),
    }
    for name, text in files.items():
        (d / name).write_text(text)
    return Pki(
        ca_pem=_pem(ca),
        server_cert=str(d / "server.crt"),  # a path ...
        server_key=_key_pem(server_key),  # ... and inline PEM: both forms are accepted
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        client_cert_pem=_pem(client),
        rogue_cert=d / "rogue.crt",
        rogue_key=d / "rogue.key",
    )


def _client_ctx(
    pki: Pki, alpn: list[str] | None = None, cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=pki.ca_pem)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


# ------------------------------------------------------------------ helpers


@pytest.fixture
async def http_echo(pki: Pki) -> AsyncIterator[RunningEcho]:
    echo = await start_echo(
        EchoSpec(
            mode="http",
            host=HOST,
            http_port=0,
            h2c_port=0,
            https_port=0,
            pod="infra-backend-v1-abc12-x2k4p",
            namespace="gateway-conformance-infra",
            tls_cert=pki.server_cert,
            tls_key=pki.server_key,
            client_ca=pki.ca_pem,
        )
    )
    assert await echo.ready(5)
    yield echo
    await echo.stop()


async def raw_http(
    port: int, request: bytes, host: str = HOST
) -> tuple[str, dict[str, str], bytes]:
    """One request over a fresh connection; (status line, lowercased headers, body)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode().split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.lower()] = value.strip()
        body = await asyncio.wait_for(
            reader.readexactly(int(headers.get("content-length", "0"))), 5
        )
        return lines[0], headers, body
    finally:
        writer.close()


def get(path: str, *headers: str, proto: str = "HTTP/1.1") -> bytes:
    lines = [f"GET {path} {proto}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# ------------------------------------------------------------------ naming


def test_pod_name_shape() -> None:
    names = [pod_name("infra-backend-v1", i) for i in range(5)]
    assert names == [pod_name("infra-backend-v1", i) for i in range(5)]  # deterministic
    assert len(set(names)) == 5
    for name in names:
        deployment, rs_hash, suffix = name.rsplit("-", 2)
        assert deployment == "infra-backend-v1"
        assert len(rs_hash) == 10 and rs_hash.isalnum() and rs_hash == rs_hash.lower()
        assert len(suffix) == 5 and suffix.isalnum() and suffix == suffix.lower()
    assert len({n.rsplit("-", 2)[1] for n in names}) == 1  # one ReplicaSet
    assert pod_name("infra-backend-v2", 0).rsplit("-", 2)[1] != names[0].rsplit("-", 2)[1]


def test_go_duration_and_atoi() -> None:
    assert parse_duration("300ms") == pytest.approx(0.3)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("-1.5us") == pytest.approx(-1.5e-6)
    assert parse_duration("0") == 0
    for bad, message in (
        ("abc", 'time: invalid duration "abc"'),
        ("1", 'time: missing unit in duration "1"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("", 'time: invalid duration ""'),
    ):
        with pytest.raises(GoError) as err:
            parse_duration(bad)
        assert str(err.value) == message
    assert atoi("+42") == 42
    for bad in ("", "4 2", "1_0", "0x10"):
        with pytest.raises(GoError):
            atoi(bad)


# ------------------------------------------------------------------ HTTP


async def test_echo_json_shape_and_key_order(http_echo: RunningEcho) -> None:
    port = http_echo.ports["http"]
    status, headers, body = await raw_http(
        port,
        get(
            "/a%2Fb//c?z=1&y=%20",
            "Host: foo.example.com:8080",
            "x-custom: one",
            "X-CUSTOM: two, three",
            "X-Echo-Set-Header: ",
        ),
    )
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-type"] == "application/json"
    assert headers["x-content-type-options"] == "nosniff"
    text = body.decode()
    assert text.startswith(
        '{\n "path": "/a%2Fb//c?z=1\\u0026y=%20",\n "host"'
    )  # Go's indent and escaping
    doc = json.loads(text)
    assert list(doc) == [
        "path", "host", "method", "proto", "headers", "httpPort",
        "namespace", "ingress", "service", "pod",
    ]  # fmt: skip
    assert doc["path"] == "/a%2Fb//c?z=1&y=%20"
    assert doc["host"] == "foo.example.com:8080"
    assert doc["method"] == "GET"
    assert doc["proto"] == "HTTP/1.1"
    assert doc["headers"] == {"X-Custom": ["one", "two, three"], "X-Echo-Set-Header": [""]}
    assert doc["httpPort"] == str(port)
    assert doc["namespace"] == "gateway-conformance-infra"
    assert doc["ingress"] == "" and doc["service"] == ""
    assert doc["pod"] == "infra-backend-v1-abc12-x2k4p"
    # HTTP/1.0 is reported as such.
    _, _, body10 = await raw_http(port, get("/ten", "Host: h", proto="HTTP/1.0"))
    assert json.loads(body10)["proto"] == "HTTP/1.0"


async def test_echo_set_header(http_echo: RunningEcho) -> None:
    async with httpx.AsyncClient() as client:
        r = await client.get(
            f"http://{HOST}:{http_echo.ports['http']}/",
            headers={"X-Echo-Set-Header": "X-Foo: one, X-Bar:two, X-Foo: three,:ignored"},
        )
    assert r.status_code == 200
    assert r.headers["x-foo"] == "one,three"
    assert r.headers["x-bar"] == "two"
    assert r.json()["headers"]["X-Echo-Set-Header"] == [
        "X-Foo: one, X-Bar:two, X-Foo: three,:ignored"
    ]


async def test_status_health_and_redirects(http_echo: RunningEcho) -> None:
    port = http_echo.ports["http"]
    status, _, body = await raw_http(port, get("/status/418", "Host: h"))
    assert status.startswith("HTTP/1.1 418") and body == b""
    assert (await raw_http(port, get("/status/418?x=1", "Host: h")))[0].startswith("HTTP/1.1 400")
    assert (await raw_http(port, get("/status/4180", "Host: h")))[0].startswith("HTTP/1.1 400")
    status, _, body = await raw_http(port, get("/health", "Host: h"))
    assert status == "HTTP/1.1 200 OK" and body == b"OK"
    status, headers, _ = await raw_http(port, get("/status?q=1", "Host: h"))
    assert status.startswith("HTTP/1.1 301") and headers["location"] == "/status/?q=1"
    status, headers, _ = await raw_http(port, get("/a/./b/../c", "Host: h"))
    assert status.startswith("HTTP/1.1 301") and headers["location"] == "/a/c"
    # The h2c port echoes every path, /status included.
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        r = await client.get(f"http://{HOST}:{http_echo.ports['h2c']}/status/418")
    assert r.status_code == 200 and r.json()["path"] == "/status/418"


async def test_delay_and_log_line(http_echo: RunningEcho) -> None:
    port = http_echo.ports["http"]
    before = len(http_echo.log)
    started = time.monotonic()
    task = asyncio.create_task(raw_http(port, get("/slow?delay=300ms", "Host: h")))
    await asyncio.sleep(0.15)
    # Logged before the delay, with the raw target and the client address.
    [line] = http_echo.log.since(before)
    assert line.startswith("Echoing back request made to /slow?delay=300ms to client (127.")
    status, _, _ = await task
    assert status == "HTTP/1.1 200 OK"
    assert time.monotonic() - started >= 0.3
    status, _, body = await raw_http(port, get("/?delay=abc", "Host: h"))
    assert status.startswith("HTTP/1.1 500")
    assert body == b'{"message":"time: invalid duration \\"abc\\""}'


async def test_h2c_prior_knowledge_and_http1_refusal(http_echo: RunningEcho) -> None:
    port = http_echo.ports["h2c"]
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        r = await client.get(f"http://{HOST}:{port}/h2c?x=y", headers={"X-Thing": "v"})
    assert r.http_version == "HTTP/2"
    doc = r.json()
    assert doc["proto"] == "HTTP/2.0"
    assert doc["path"] == "/h2c?x=y"
    assert doc["host"] == f"{HOST}:{port}"
    assert doc["headers"]["X-Thing"] == ["v"]
    assert "Host" not in doc["headers"] and not any(k.startswith(":") for k in doc["headers"])
    assert doc["httpPort"] == str(http_echo.ports["http"])
    status, _, body = await raw_http(port, get("/", "Host: h"))
    assert status.startswith("HTTP/1.1 400") and body == b"Expected h2c request"
    status, _, body = await raw_http(
        port, get("/up", "Host: h", "Upgrade: h2c", "Connection: Upgrade")
    )
    assert status == "HTTP/1.1 200 OK" and json.loads(body)["proto"] == "HTTP/1.1"
    assert any("made to /h2c?x=y" in line for line in http_echo.log_lines)


async def test_https_alpn_h2_and_tls_block(http_echo: RunningEcho, pki: Pki) -> None:
    url = f"https://{HOST}:{http_echo.ports['https']}/tls?q=1"
    ctx = _client_ctx(pki, cert=(pki.client_cert, pki.client_key))
    async with httpx.AsyncClient(http2=True, verify=ctx) as client:
        r = await client.get(url, extensions={"sni_hostname": SNI})
    assert r.http_version == "HTTP/2"
    doc = r.json()
    assert list(doc)[-1] == "tls"
    assert doc["proto"] == "HTTP/2.0"
    tls = doc["tls"]
    assert list(tls) == [
        "version",
        "peerCertificates",
        "serverName",
        "negotiatedProtocol",
        "cipherSuite",
    ]
    assert tls["version"] == "TLSv1.3"
    assert tls["serverName"] == SNI
    assert tls["negotiatedProtocol"] == "h2"
    assert tls["cipherSuite"].startswith("TLS_")
    assert tls["peerCertificates"] == [pki.client_cert_pem]
    # Without a client certificate (allowed) and over HTTP/1.1, TLS 1.2.
    ctx12 = _client_ctx(pki)
    ctx12.maximum_version = ssl.TLSVersion.TLSv1_2
    async with httpx.AsyncClient(verify=ctx12) as client:
        r = await client.get(url, extensions={"sni_hostname": "other.example.com"})
    tls = r.json()["tls"]
    assert r.http_version == "HTTP/1.1"
    assert list(tls) == ["version", "serverName", "negotiatedProtocol", "cipherSuite"]
    assert tls["version"] == "TLSv1.2"
    assert tls["serverName"] == "other.example.com"
    assert tls["negotiatedProtocol"] == "http/1.1"
    assert tls["cipherSuite"] == "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"


async def test_https_rejects_untrusted_client_cert(http_echo: RunningEcho, pki: Pki) -> None:
    ctx = _client_ctx(pki, cert=(pki.rogue_cert, pki.rogue_key))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # the failure then surfaces in the handshake
    with pytest.raises((ssl.SSLError, ConnectionError)):
        reader, writer = await asyncio.open_connection(
            HOST, http_echo.ports["https"], ssl=ctx, server_hostname=SNI
        )
        writer.write(get("/", "Host: h"))
        await writer.drain()
        await reader.read(100)


async def test_https_without_client_ca_never_asks(pki: Pki) -> None:
    echo = await start_echo(
        EchoSpec(mode="http", host="127.20.61.2", http_port=0, h2c_port=0, https_port=0,
                 tls_cert=pki.server_cert, tls_key=pki.server_key)
    )  # fmt: skip
    try:
        ctx = _client_ctx(pki, cert=(pki.client_cert, pki.client_key))
        async with httpx.AsyncClient(verify=ctx) as client:
            r = await client.get(
                f"https://127.20.61.2:{echo.ports['https']}/", extensions={"sni_hostname": SNI}
            )
        assert "peerCertificates" not in r.json()["tls"]
    finally:
        await echo.stop()


async def test_retry_simulation(http_echo: RunningEcho) -> None:
    port = http_echo.ports["http"]
    status, _, body = await raw_http(port, get("/retry/?succeedAfter=1", "Host: h"))
    assert status.startswith("HTTP/1.1 400") and body == b"uuid is required"
    status, _, body = await raw_http(port, get("/retry/?uuid=u0", "Host: h"))
    assert status.startswith("HTTP/1.1 400") and body == b"succeedAfter is required"
    path = "/retry/?uuid=u1&succeedAfter=2&responseCode=503"
    assert (await raw_http(port, get(path, "Host: h")))[0].startswith("HTTP/1.1 503")
    assert (await raw_http(port, get(path, "Host: h")))[0].startswith("HTTP/1.1 503")
    status, _, body = await raw_http(port, get(path, "Host: h"))
    assert status == "HTTP/1.1 200 OK" and json.loads(body)["path"] == path
    # Without responseCode the connection is reset.
    path = "/retry/?uuid=u2&succeedAfter=1"
    with pytest.raises(ConnectionResetError):
        await raw_http(port, get(path, "Host: h"))
    assert (await raw_http(port, get(path, "Host: h")))[0] == "HTTP/1.1 200 OK"


async def test_http_step_sends_a_fresh_uuid_on_every_try(http_echo: RunningEcho) -> None:
    """FORMAT.md's {UUID}: each of the 3 consecutive tries starts the retry simulation afresh, so
    each fails once as asked; with one uuid for all tries the second would be echoed (200)."""
    env = FixedEnv(HOST, http_echo.ports["http"])
    step = {
        "gateway": "ns/gw",
        "request": {"path": "/retry/x?responseCode=503&succeedAfter=1&uuid={UUID}"},
        "response": {"status": 503},
        "timeout_s": 2,
    }
    assert await traffic.http_step(env, step) is None
    # The backend sees the path as sent (a fresh UUID), which an answer of 200 must echo.
    step = {
        **step,
        "request": {"path": "/retry/x?succeedAfter=0&uuid={UUID}"},
        "response": {"status": 200},
    }
    assert await traffic.http_step(env, step) is None
    fixed = {
        **step,
        "request": {"path": "/retry/x?responseCode=503&succeedAfter=1&uuid=one"},
        "response": {"status": 503},
    }
    assert "expected status 503, got 200" in str(await traffic.http_step(env, fixed))
    paths = {traffic.fresh_path("/a?uuid={UUID}") for _ in range(3)}
    assert len(paths) == 3 and all(len(p) == len("/a?uuid=") + 36 for p in paths)
    assert traffic.fresh_path("/a?uuid=x") == "/a?uuid=x"


async def test_websocket_echo(http_echo: RunningEcho) -> None:
    port = http_echo.ports["http"]
    key = base64.b64encode(os.urandom(16)).decode()
    handshake = get(
        "/ws", "Host: h", "Upgrade: websocket", "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
    )  # fmt: skip
    status, _, _ = await raw_http(port, handshake)
    assert status.startswith("HTTP/1.1 403")  # no Origin
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(handshake[:-2] + b"Origin: ws://gateway/WebSocket\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 ")
        assert f"Sec-WebSocket-Accept: {accept_key(key)}".lower().encode() in head.lower()
        for opcode, payload in ((0x1, b"Websocket Support!"), (0x2, bytes(range(1, 8)))):
            writer.write(encode_frame(opcode, payload, mask=os.urandom(4)))
            b0, b1 = await asyncio.wait_for(reader.readexactly(2), 5)
            assert b0 == 0x81 and not b1 & 0x80  # final, text (as upstream), unmasked
            assert await reader.readexactly(b1 & 0x7F) == payload
        writer.write(encode_frame(0x8, struct.pack("!H", 1000), mask=os.urandom(4)))
        assert (await asyncio.wait_for(reader.readexactly(2), 5))[0] == 0x88
    finally:
        writer.close()


# ------------------------------------------------------------------ gRPC


async def test_grpc_echo(pki: Pki) -> None:
    echo = await start_echo(
        EchoSpec(mode="grpc", host="127.20.61.3", http_port=0, https_port=0,
                 pod="grpc-infra-backend-v1-x-y", namespace="ns1", service="svc",
                 tls_cert=pki.server_cert, tls_key=pki.server_key)
    )  # fmt: skip
    try:
        assert await echo.ready(5)
        async with grpc.aio.insecure_channel(f"127.20.61.3:{echo.ports['grpc']}") as channel:
            stub = pb_grpc.GrpcEchoStub(channel)
            resp = await stub.Echo(
                pb.EchoRequest(), metadata=(("x-custom", "a"), ("x-custom", "b")), timeout=5
            )
            a = resp.assertions
            assert (
                a.fully_qualified_method
                == "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"
            )
            assert a.authority == f"127.20.61.3:{echo.ports['grpc']}"
            headers = [(h.key, h.value) for h in a.headers]
            assert (":authority", a.authority) in headers
            assert ("content-type", "application/grpc") in headers
            assert any(k == "user-agent" for k, _ in headers)
            assert ("x-custom", "a") in headers and ("x-custom", "b") in headers
            assert not any(k in (":path", ":method", "te") for k, _ in headers)
            assert (a.context.namespace, a.context.service_name, a.context.pod) == (
                "ns1", "svc", "grpc-infra-backend-v1-x-y",
            )  # fmt: skip
            assert not a.HasField("tls_assertions") and not resp.HasField("request")
            two = await stub.EchoTwo(pb.EchoRequest(), timeout=5)
            assert two.assertions.fully_qualified_method.endswith("/EchoTwo")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.EchoThree(pb.EchoRequest(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
            unknown = channel.unary_unary("/other.Service/Echo")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await unknown(b"", timeout=5)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca_pem.encode())
        target = f"127.20.61.3:{echo.ports['grpcs']}"
        options = (("grpc.ssl_target_name_override", SNI), ("grpc.default_authority", SNI))
        async with grpc.aio.secure_channel(target, creds, options=options) as channel:
            resp = await pb_grpc.GrpcEchoStub(channel).Echo(pb.EchoRequest(), timeout=5)
        tls = resp.assertions.tls_assertions
        assert resp.assertions.authority == SNI
        assert (tls.version, tls.server_name, tls.negotiated_protocol) == ("TLSv1.3", SNI, "h2")
        assert tls.cipher_suite.startswith("TLS_")
    finally:
        await echo.stop()


# ------------------------------------------------------------------ TCP, UDP, DNS


async def test_tcp_echo_protocol(pki: Pki) -> None:
    echo = await start_echo(
        EchoSpec(mode="tcp", host="127.20.61.4", tcp_port=0, tls_port=0, pod="tcp-backend-abc-def",
                 namespace="ns2", service="tcp-backend",
                 tls_cert=pki.server_cert, tls_key=pki.server_key)
    )  # fmt: skip
    try:
        assert await echo.ready(5)
        reader, writer = await asyncio.open_connection("127.20.61.4", echo.ports["tcp"])
        assert await reader.readline() == b"Gateway API Test TCP Server\n"
        for command, answer in ((b"PING\r\n", b"PONG\n"), (b"IS_TLS\n", b"false\n")):
            writer.write(command)
            assert await asyncio.wait_for(reader.readline(), 5) == answer
        writer.write(b"nothing\nTEST\n")  # an unknown line gets no answer
        line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        assert line == (
            b'{"namespace":"ns2","ingress":"","service":"tcp-backend","pod":"tcp-backend-abc-def",'
            + f'"tcpport":"{echo.ports["tcp"]}","tlsport":"{echo.ports["tls"]}",'.encode()
            + b'"isTLS":false}\n'
        )
        ctx = _client_ctx(pki)
        reader, writer = await asyncio.open_connection(
            "127.20.61.4", echo.ports["tls"], ssl=ctx, server_hostname=SNI
        )
        assert await reader.readline() == b"Gateway API Test TCP Server\n"
        writer.write(b"IS_TLS\n")
        assert await asyncio.wait_for(reader.readline(), 5) == b"true\n"
        writer.write(b"TEST\n")
        doc = json.loads(await asyncio.wait_for(reader.readline(), 5))
        writer.close()
        assert doc["isTLS"] is True
        assert list(doc["tls"]) == ["version", "serverName", "cipherSuite"]
        assert doc["tls"]["version"] == "TLS 1.3" and doc["tls"]["serverName"] == SNI
    finally:
        await echo.stop()


class _Collect(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.got: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.got.put_nowait(data)


async def _exchange(host: str, port: int, payload: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    proto = _Collect()
    transport, _ = await loop.create_datagram_endpoint(lambda: proto, remote_addr=(host, port))
    try:
        transport.sendto(payload)
        return await asyncio.wait_for(proto.got.get(), 5)
    finally:
        transport.close()


async def test_udp_echo(tmp_path: Path) -> None:
    log_file = tmp_path / "udp.log"
    echo = await start_echo(
        EchoSpec(
            mode="udp",
            host="127.20.61.5",
            udp_port=0,
            pod="udp-x-y-z",
            namespace="ns3",
            service="udp-svc",
            log_path=str(log_file),
        )
    )
    try:
        assert await echo.ready(5)
        reply = await _exchange(
            "127.20.61.5", echo.ports["udp"], b"gateway-api-conformance-udp-weight\n<&>"
        )
        assert reply == (
            b'{"request":"gateway-api-conformance-udp-weight\\n\\u003c\\u0026\\u003e","namespace":"ns3",'
            b'"ingress":"","service":"udp-svc","pod":"udp-x-y-z"}'
        )
        assert log_file.read_text() == "".join(line + "\n" for line in echo.log_lines)
        assert any(
            line.startswith("Received UDP gateway-api-conformance-udp-weight")
            for line in echo.log_lines
        )
    finally:
        await echo.stop()


async def test_dns_stand_in() -> None:
    echo = await start_echo(EchoSpec(mode="dns", host="127.20.61.6", dns_port=0))
    try:
        assert await echo.ready(5)
        query = dns_query(0xBEEF)
        reply = await _exchange("127.20.61.6", echo.ports["dns"], query)
        qid, flags, qd, an = struct.unpack("!HHHH", reply[:8])
        assert qid == 0xBEEF
        assert flags & 0x8000  # QR
        assert flags & 0x0100  # RD copied
        assert flags & 0x000F == 0  # NOERROR
        assert (qd, an) == (1, 0)
        assert reply[12 : len(query)] == query[12:]  # the question, echoed
    finally:
        await echo.stop()


# ------------------------------------------------------------------ defaults and the CLI


async def test_default_ports_and_port_conflict() -> None:
    host = "127.20.61.7"
    echo = await start_echo(EchoSpec(mode="http", host=host, pod="p"))
    try:
        assert echo.ports == {"http": 3000, "h2c": 3001}
        assert await echo.ready(5)
        with pytest.raises(OSError):
            await start_echo(EchoSpec(mode="http", host=host, http_port=0, h2c_port=3001))
    finally:
        await echo.stop()
    # Everything was released: the same ports bind again.
    again = await start_echo(EchoSpec(mode="http", host=host))
    await again.stop()


def test_cli_runs_one_replica() -> None:
    host = "127.20.61.8"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateweave_conformance.echo", "--mode", "tcp", "--host", host,
         "--pod", "tcp-backend-abcde12345-x2k4p", "--namespace", "ns"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((host, 3000), timeout=1) as sock:
                    f = sock.makefile("rwb")
                    assert f.readline() == b"Gateway API Test TCP Server\n"
                    f.write(b"TEST\n")
                    f.flush()
                    assert json.loads(f.readline())["pod"] == "tcp-backend-abcde12345-x2k4p"
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "echo CLI did not start listening"
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert "port=3000" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
