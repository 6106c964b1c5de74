"""A Gateway removed while a request is in flight: its Envoy drains, so the request completes,
and only then stops; new connections are refused afterwards (real serve, Envoy, backend)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave.infra.statedir import running
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until

SLOW_S = 1.5  # the backend answers after this long


class _SlowHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _SlowServer

    def do_GET(self) -> None:
        self.server.arrived.set()
        time.sleep(SLOW_S)
        self.send_response(200)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"slow")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _SlowServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SlowHandler)
        self.arrived = threading.Event()


def refused(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.timeout(120)
async def test_a_removed_gateway_finishes_its_request_in_flight_then_refuses(
    tmp_path: Path,
) -> None:
    backend = _SlowServer()
    threading.Thread(target=backend.serve_forever, args=(0.05,), daemon=True).start()
    ip = "127.40.14.1"
    port = free_port(ip)
    gateway = h.gateway("gw", ip, [h.listener("http", "HTTP", port)])
    # Stopping an Envoy lets its requests finish for the Gateway's drainTimeout (default 1 s).
    gateway["spec"]["infrastructure"] = {
        "parametersRef": {"group": "gateweave.io", "kind": "GatewayParameters", "name": "drain"}
    }
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            {
                "apiVersion": "gateweave.io/v1alpha1",
                "kind": "GatewayParameters",
                "metadata": h.meta("drain"),
                "spec": {"envoy": {"drainTimeout": "30s"}},
            },
            *h.service("slow", 80, backend.server_address[1]),
            h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("slow", 80)])]),
        ],
    )
    h.write_manifests(tmp_path / "gateway.yaml", [gateway])
    try:
        async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:

            async def answers() -> h.Reply | None:
                reply = await h.fetch(ip, port, "/", "app.test", timeout=10)
                return reply if reply is not None and reply.status == 200 else None

            await until(answers, 30, "the slow route answers")
            envoy = served.infra.process("default/gw")
            assert envoy is not None and envoy.pid is not None

            backend.arrived.clear()
            in_flight = asyncio.create_task(h.fetch(ip, port, "/", "app.test", timeout=20))
            assert await asyncio.to_thread(backend.arrived.wait, 10), (
                "the request reached the backend"
            )
            (
                tmp_path / "gateway.yaml"
            ).unlink()  # the Gateway is removed while the request is in flight

            reply = await in_flight
            assert reply is not None and (reply.status, reply.body) == (200, "slow")

            async def stopped() -> bool:
                return served.infra.process("default/gw") is None and not running(envoy.pid)  # type: ignore[arg-type]

            await until(stopped, 30, "the removed Gateway's Envoy is stopped")
            assert await asyncio.to_thread(refused, ip, port)
    finally:
        backend.shutdown()
        backend.server_close()
