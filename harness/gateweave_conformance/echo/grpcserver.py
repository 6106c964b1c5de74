"""gRPC mode: the GrpcEcho service over h2c on 3000 and over TLS (ALPN h2) on 8443.

Served on the same HTTP/2 stack as the HTTP echo rather than grpcio's server, because
the echo must report what grpcio's servicer context hides: the ``:authority``, the
``content-type`` and every other header, and the TLS version, SNI and cipher.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import gzip
import struct
from urllib.parse import quote

from gateweave_conformance import grpcecho_pb2 as pb
from gateweave_conformance.echo import conn
from gateweave_conformance.echo.gojson import go_string
from gateweave_conformance.echo.handlers import Identity
from gateweave_conformance.echo.http2 import H2Server, H2Stream
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.logbook import EchoLog
from gateweave_conformance.echo.spec import EchoSpec
from gateweave_conformance.echo.tlsinfo import ServerTLS, TLSState

SERVICE = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"
OK, INTERNAL, UNIMPLEMENTED = 0, 13, 12
# Headers gRPC-Go keeps out of the incoming metadata.
_RESERVED = {
    "te",
    "grpc-encoding",
    "grpc-timeout",
    "grpc-message",
    "grpc-status",
    "grpc-message-type",
    "grpc-status-details-bin",
    "connection",
}


def _metadata(stream: H2Stream) -> list[pb.Header]:
    out: list[pb.Header] = []
    for raw_name, raw_value in stream.headers:
        name = go_string(raw_name)
        if (name.startswith(":") and name != ":authority") or name in _RESERVED:
            continue
        value = raw_value
        if name.endswith("-bin"):
            with contextlib.suppress(binascii.Error):
                value = base64.b64decode(raw_value + b"=" * (-len(raw_value) % 4))
        out.append(pb.Header(key=name, value=go_string(value)))
    return out


def _decode_messages(body: bytes, encoding: str) -> list[bytes]:
    messages = []
    while body:
        if len(body) < 5:
            raise ValueError("truncated gRPC message")
        flag, length = body[0], struct.unpack("!I", body[1:5])[0]
        payload, body = body[5 : 5 + length], body[5 + length :]
        if len(payload) != length:
            raise ValueError("truncated gRPC message")
        if flag & 1:
            if encoding != "gzip":
                raise ValueError(
                    f"grpc: Decompressor is not installed for grpc-encoding {encoding!r}"
                )
            payload = gzip.decompress(payload)
        messages.append(payload)
    return messages


class GrpcEcho:
    def __init__(self, identity: Identity, log: EchoLog) -> None:
        self.identity = identity
        self.log = log

    def context(self) -> pb.Context:
        i = self.identity
        return pb.Context(
            namespace=i.namespace, ingress=i.ingress, service_name=i.service, pod=i.pod
        )

    async def handle(self, stream: H2Stream, tls: TLSState | None) -> None:
        path = stream.value(b":path")
        if not stream.value(b"content-type").startswith("application/grpc"):
            await stream.send_headers(
                [(":status", "415"), ("content-type", "text/plain")], end_stream=True
            )
            return
        service, _, method = path.lstrip("/").rpartition("/")
        if service != SERVICE:
            await self._status(stream, UNIMPLEMENTED, f"unknown service {service}")
            return
        if method not in ("Echo", "EchoTwo", "EchoThree"):
            await self._status(
                stream, UNIMPLEMENTED, f"unknown method {method} for service {service}"
            )
            return
        try:
            messages = _decode_messages(bytes(stream.body), stream.value(b"grpc-encoding"))
            if len(messages) != 1:
                raise ValueError("grpc: expected exactly one request message")
            request = pb.EchoRequest.FromString(messages[0])
        except Exception as err:
            await self._status(stream, INTERNAL, f"grpc: error unmarshalling request: {err}")
            return
        if method == "EchoThree":
            await self._status(stream, UNIMPLEMENTED, "method EchoThree not implemented")
            return
        self.log.write(f"Received over {'TLS' if tls else 'plaintext'}: {request}")
        assertions = pb.Assertions(
            fully_qualified_method=f"/{SERVICE}/{method}",
            headers=_metadata(stream),
            authority=stream.value(b":authority"),
            context=self.context(),
        )
        if tls is not None:
            assertions.tls_assertions.CopyFrom(
                pb.TLSAssertions(
                    version=tls.version,
                    negotiated_protocol=tls.negotiated_protocol,
                    server_name=tls.server_name,
                    cipher_suite=tls.cipher_suite,
                    peer_certificates=list(tls.peer_certificates),
                )
            )
        payload = pb.EchoResponse(assertions=assertions).SerializeToString()
        await stream.send_headers([(":status", "200"), ("content-type", "application/grpc")])
        await stream.send_data(
            b"\x00" + struct.pack("!I", len(payload)) + payload, end_stream=False
        )
        await stream.send_headers([("grpc-status", "0"), ("grpc-message", "")], end_stream=True)

    @staticmethod
    async def _status(stream: H2Stream, code: int, message: str) -> None:
        """A trailers-only answer carrying a non-OK status."""
        await stream.send_headers(
            [
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", str(code)),
                ("grpc-message", quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")),
            ],
            end_stream=True,
        )


async def start_grpc(
    spec: EchoSpec, identity: Identity, log: EchoLog, listeners: Listeners
) -> dict[str, int]:
    echo = GrpcEcho(identity, log)

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def handle(stream: H2Stream) -> None:
            await echo.handle(stream, None)

        await H2Server(conn.Prefixed(b"", reader), writer, handle, wait_for_body=True).run()

    ports = {"grpc": await listeners.tcp(spec.host, spec.http_port, plain)}
    log.write(f"plaintext server listening at {spec.host}:{ports['grpc']}")
    if spec.has_tls:
        assert spec.tls_cert and spec.tls_key
        tls = ServerTLS(spec.tls_cert, spec.tls_key, alpn=["h2"])

        async def secure(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state = tls.state(writer.get_extra_info("ssl_object"))

            async def handle(stream: H2Stream) -> None:
                await echo.handle(stream, state)

            await H2Server(conn.Prefixed(b"", reader), writer, handle, wait_for_body=True).run()

        ports["grpcs"] = await listeners.tcp(spec.host, spec.https_port, secure, tls=tls.context)
        log.write(f"secure server listening at {spec.host}:{ports['grpcs']}")
    return ports
