"""The ADS server with mutual TLS (real gRPC TLS on loopback): a client needs a certificate
from gateweave's CA, and gets (and reports on) only the node its certificate names."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2
from prometheus_client import CollectorRegistry

from gateweave.xds import pki
from gateweave.xds.auth import ServerTls, peer_node
from gateweave.xds.server import AdsServer, NodeStatus
from gateweave.xds.snapshot_cache import LISTENER

NOW = datetime.datetime.now(datetime.UTC)
A, B = "default/gw-a", "default/gw-b"


def listener_for(node: str) -> dict[str, dict[str, listener_pb2.Listener]]:
    name = node.replace("/", "-")
    return {LISTENER: {name: listener_pb2.Listener(name=name)}}


@contextlib.asynccontextmanager
async def mtls_server(ca: pki.Authority) -> AsyncIterator[AdsServer]:
    server_pair = pki.issue_server(ca.current, ["localhost", "127.0.0.1"], NOW)
    server = AdsServer(registry=CollectorRegistry(), tls=ServerTls(ca.bundle(NOW), server_pair))
    await server.start("127.0.0.1", 0)
    server.set_snapshot(A, listener_for(A))
    server.set_snapshot(B, listener_for(B))
    try:
        yield server
    finally:
        await server.stop(0)


def channel_credentials(ca: pki.Authority, client: pki.KeyPair | None) -> grpc.ChannelCredentials:
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=ca.bundle(NOW).encode())
    return grpc.ssl_channel_credentials(
        root_certificates=ca.bundle(NOW).encode(),
        private_key=client.key_pem.encode(),
        certificate_chain=client.cert_pem.encode(),
    )


async def ask(channel: grpc.aio.Channel, node: str, *, nack: bool = False) -> list[str]:
    """One LDS request as ``node`` (with ``nack``: a NACK first); the names of the listeners
    received, or the error."""
    first = discovery_pb2.DiscoveryRequest(node=base_pb2.Node(id=node), type_url=LISTENER)
    if nack:
        first.response_nonce = "1"
        first.error_detail.CopyFrom(status_pb2.Status(code=13, message="injected"))
    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
        iter([first])
    )
    try:
        async with asyncio.timeout(5):
            async for response in call:
                return [listener_pb2.Listener.FromString(r.value).name for r in response.resources]
    except grpc.aio.AioRpcError as exc:
        return [f"error: {exc.code().name}"]
    finally:
        call.cancel()
    return []


async def test_a_client_needs_a_certificate_from_the_ca_and_is_served_its_node() -> None:
    ca = pki.Authority.generate(NOW)
    other_ca = pki.Authority.generate(NOW)
    async with mtls_server(ca) as server:
        target = f"localhost:{server.port}"
        async with grpc.aio.insecure_channel(target) as plain:  # no TLS at all
            assert (await ask(plain, A))[0].startswith("error: ")
        async with grpc.aio.secure_channel(target, channel_credentials(ca, None)) as no_cert:
            assert (await ask(no_cert, A))[0].startswith("error: ")
        foreign = pki.issue_client(other_ca.current, A, NOW)  # the right name, another CA
        async with grpc.aio.secure_channel(target, channel_credentials(ca, foreign)) as other:
            assert (await ask(other, A))[0].startswith("error: ")
        server_pair = pki.issue_server(ca.current, ["localhost"], NOW)  # ours, but not for clients
        async with grpc.aio.secure_channel(
            target, channel_credentials(ca, server_pair)
        ) as not_client:
            assert (await ask(not_client, A))[0].startswith("error: ")
        nameless = pki.issue_client(ca.current, "no-gateway", NOW)  # a client's, naming no Gateway
        async with grpc.aio.secure_channel(target, channel_credentials(ca, nameless)) as chan:
            assert await ask(chan, A) == ["error: UNAUTHENTICATED"]
        assert not server.status(A).connected

        client_a = pki.issue_client(ca.current, A, NOW)
        async with grpc.aio.secure_channel(target, channel_credentials(ca, client_a)) as good:
            assert await ask(good, A) == ["default-gw-a"]
            # a pod of the Gateway (node id ns/name/pod, the Deployment's pods): its Gateway's
            assert await ask(good, f"{A}/envoy-7c9d-x2k4p") == ["default-gw-a"]


async def test_a_gateways_certificate_gets_nothing_of_another_and_cannot_report_for_it() -> None:
    ca = pki.Authority.generate(NOW)
    async with mtls_server(ca) as server:
        seen: list[tuple[str, NodeStatus]] = []
        server.on_status(lambda node, status: seen.append((node, status)))
        client_a = pki.issue_client(ca.current, A, NOW)
        async with grpc.aio.secure_channel(
            f"localhost:{server.port}", channel_credentials(ca, client_a)
        ) as chan:
            assert await ask(chan, B) == ["error: PERMISSION_DENIED"]
            assert await ask(chan, B, nack=True) == ["error: PERMISSION_DENIED"]
            assert await ask(chan, f"{B}/pod") == [
                "error: PERMISSION_DENIED"
            ]  # a pod of another Gateway
        status_b = server.status(B)
        assert not status_b.connected and status_b.last_nack is None and status_b.error is None
        assert [node for node, _ in seen] == []  # nothing about B (or A) was reported
        assert server._metrics.nacks.labels(LISTENER)._value.get() == 0


@pytest.mark.parametrize(
    ("sans", "node"),
    [
        ([b"spiffe://gateweave/ns/default/gateway/gw"], "default/gw"),
        ([b"localhost", b"spiffe://gateweave/ns/default/gateway/gw"], "default/gw"),
        (
            [
                b"spiffe://gateweave/ns/default/gateway/a",
                b"spiffe://gateweave/ns/default/gateway/b",
            ],
            None,
        ),
        ([b"spiffe://other/ns/default/gateway/gw"], None),
        ([b"spiffe://gateweave/ns/default/gateway/a/b"], None),
        ([], None),
    ],
)
def test_peer_node(sans: list[bytes], node: str | None) -> None:
    assert peer_node({"x509_subject_alternative_name": sans}) == node
