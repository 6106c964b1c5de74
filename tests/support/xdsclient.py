"""An ADS client standing in for a Gateway's Envoy pod, with the pod's credentials."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from gateweave.xds.snapshot_cache import CLUSTER, LISTENER


def secret_files(secret: dict[str, Any]) -> dict[str, str]:
    """A Secret's data, decoded (the files the kubelet mounts)."""
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def pod_credentials(files: dict[str, str]) -> grpc.ChannelCredentials:
    """The mutual TLS a pod mounting a Gateway's xDS Secret has."""
    return grpc.ssl_channel_credentials(
        root_certificates=files["ca.crt"].encode(),
        private_key=files["tls.key"].encode(),
        certificate_chain=files["tls.crt"].encode(),
    )


@contextlib.asynccontextmanager
async def envoy_pod(
    port: int,
    node_id: str,
    files: dict[str, str] | None = None,
    server_name: str = "gateweave.gateweave-system.svc",
) -> AsyncIterator[list[listener_pb2.Listener]]:
    """An ADS client standing in for a Gateway's Envoy pod: subscribes to Clusters and
    Listeners (wildcard), ACKs every response; yields the Listeners last received. With
    ``files`` (its Secret's) over mutual TLS, checking the server is ``server_name``."""
    listeners: list[listener_pb2.Listener] = []
    requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()
    node = base_pb2.Node(id=node_id, cluster="gateweave")
    for type_url in (CLUSTER, LISTENER):
        requests.put_nowait(discovery_pb2.DiscoveryRequest(node=node, type_url=type_url))

    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while True:
            yield await requests.get()

    async def incoming(call: Any) -> None:
        async for response in call:
            if response.type_url == LISTENER:
                listeners[:] = [
                    listener_pb2.Listener.FromString(r.value) for r in response.resources
                ]
            requests.put_nowait(
                discovery_pb2.DiscoveryRequest(
                    node=node,
                    type_url=response.type_url,
                    version_info=response.version_info,
                    response_nonce=response.nonce,
                )
            )

    target = f"127.0.0.1:{port}"
    channel = (
        grpc.aio.insecure_channel(target)
        if files is None
        else grpc.aio.secure_channel(
            target, pod_credentials(files), options=[("grpc.ssl_target_name_override", server_name)]
        )
    )
    async with channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
            outgoing()
        )
        task = asyncio.create_task(incoming(call))
        try:
            yield listeners
        finally:
            call.cancel()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await task
