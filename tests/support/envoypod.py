"""An in-test ADS client standing in for one Envoy pod of a Gateway (node id = the Gateway's
"ns/name", as the pod's bootstrap says), with the pod's credentials (its Gateway's xDS Secret's
files, tests/support/xdsclient.py) or none: subscribes to Clusters and Listeners (wildcard) and
ACKs every response, or NACKs them all (``reject``), or holds its answers until ``answer()``
(``hold``: a pod still loading its configuration); reconnects, to the next of ``ports`` in
turn, when its stream ends (as Envoy does through the controller's Service). A node id
``ns/name/pod`` is one named pod of the Gateway, as the pods gateweave generates say."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from gateweave.xds.snapshot_cache import CLUSTER, LISTENER
from tests.support.xdsclient import pod_credentials

SERVER_NAME = "gateweave.gateweave-system.svc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pod:
    listeners: list[listener_pb2.Listener] = field(default_factory=list)
    port: int = 0  # the replica it is connected to (last)
    streams: int = 0  # streams opened so far
    answering: asyncio.Event = field(default_factory=asyncio.Event)  # cleared: answers held

    def answer(self) -> None:
        """Stop holding: answer what came and what comes."""
        self.answering.set()


async def _stream(
    pod: Pod, port: int, node: base_pb2.Node, reject: bool, files: dict[str, str] | None
) -> None:
    requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()
    for type_url in (CLUSTER, LISTENER):
        requests.put_nowait(discovery_pb2.DiscoveryRequest(node=node, type_url=type_url))

    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while True:
            yield await requests.get()

    target = f"127.0.0.1:{port}"
    channel = (
        grpc.aio.insecure_channel(target)
        if files is None
        else grpc.aio.secure_channel(
            target, pod_credentials(files), options=[("grpc.ssl_target_name_override", SERVER_NAME)]
        )
    )
    async with channel:
        call: Any = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
            outgoing()
        )
        pod.port, pod.streams = port, pod.streams + 1
        try:
            async for response in call:
                await pod.answering.wait()
                if response.type_url == LISTENER and not reject:
                    pod.listeners[:] = [
                        listener_pb2.Listener.FromString(r.value) for r in response.resources
                    ]
                detail = (
                    status_pb2.Status(code=3, message="rejected by the test") if reject else None
                )
                requests.put_nowait(
                    discovery_pb2.DiscoveryRequest(
                        node=node,
                        type_url=response.type_url,
                        response_nonce=response.nonce,
                        version_info="" if reject else response.version_info,
                        error_detail=detail,
                    )
                )
        finally:
            call.cancel()


@contextlib.asynccontextmanager
async def envoy_pod(
    ports: int | list[int],
    node_id: str,
    files: dict[str, str] | None = None,
    *,
    reject: bool = False,
    hold: bool = False,
) -> AsyncIterator[Pod]:
    order = [ports] if isinstance(ports, int) else list(ports)
    pod = Pod()
    if not hold:
        pod.answer()
    node = base_pb2.Node(id=node_id, cluster="gateweave")

    async def run() -> None:
        for attempt in range(10_000):
            with contextlib.suppress(grpc.aio.AioRpcError):
                await _stream(pod, order[attempt % len(order)], node, reject, files)
            await asyncio.sleep(0.05)

    task = asyncio.create_task(run())
    try:
        yield pod
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
