"""A BackendTrafficPolicy's compression, live: ``serve`` with a real Envoy.

A client accepting gzip (or brotli, or zstd) gets the backend's answer compressed with it
(``Content-Encoding``; of several, the one it weighs most), which decompresses to the
backend's very answer; a client accepting none, or a route the policy does not govern, gets it as
the backend sent it.
"""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance import encoding as codings
from tests.support.flaky import FlakyServer
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving
from tests.support.policies import backend_traffic_policy as btp

pytestmark = pytest.mark.timeout(60)

IP = "127.40.19.1"
# Long enough for Envoy to compress it (30 bytes at least); the backend answers "200 <path>".
PATH = "/" + "compress-me/" * 8


def _get(port: int, host: str, accept: str | None) -> tuple[int, str | None, bytes]:
    """``GET PATH`` (with ``Accept-Encoding: accept``): the status,
    Content-Encoding and raw body.
    """
    conn = http.client.HTTPConnection(IP, port, timeout=5)
    try:
        conn.request(
            "GET", PATH, headers={"Host": host, **({"Accept-Encoding": accept} if accept else {})}
        )
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Encoding"), reply.read()
    finally:
        conn.close()


async def get(port: int, host: str, accept: str | None) -> tuple[int, str | None, bytes]:
    return await asyncio.to_thread(_get, port, host, accept)


async def test_compressed_answers(tmp_path: Path, flaky: FlakyServer) -> None:
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *h.service("backend", 80, flaky.port),
            *(
                h.http_route(
                    name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("backend", 80)])]
                )
                for name in ("compressed", "plain")
            ),
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            btp(
                "compress",
                "compressed",
                {"compressor": [{"type": "Brotli"}, {"type": "Gzip"}, {"type": "Zstd"}]},
            ),
        ],
    )
    expected = f"200 {PATH}".encode()
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="plain.example", status=200)

        for accept, encoding in (
            ("gzip", "gzip"),
            ("br", "br"),
            ("zstd", "zstd"),
            ("gzip;q=0.5, br", "br"),
            ("br;q=0.2, zstd;q=0.9, gzip;q=0.5", "zstd"),
        ):
            status, got, body = await get(port, "compressed.example", accept)
            assert (status, got) == (200, encoding), accept
            assert body != expected and codings.decode(got, body) == expected, accept
        assert await get(port, "compressed.example", None) == (200, None, expected)
        assert await get(port, "compressed.example", "deflate") == (200, None, expected)
        assert await get(port, "plain.example", "gzip") == (200, None, expected)
