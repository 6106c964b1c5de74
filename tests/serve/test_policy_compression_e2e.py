"""A BackendTrafficPolicy's compression, live: ``serve`` with a real Envoy.

A client accepting gzip (or brotli, or zstd) gets the backend's answer compressed with it
(``Content-Encoding``; of several, the one it weighs most), which decompresses to the
backend's very answer; a client accepting none, or a route the policy does not govern, gets it as
the backend sent it. An answer shorter than its route's ``minContentLength`` passes as it is, a
longer one is compressed; another route of the listener keeps its own minimum.
"""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path
from typing import Any

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


def _get(
    port: int, host: str, accept: str | None, path: str = PATH
) -> tuple[int, str | None, bytes]:
    """``GET path`` (with ``Accept-Encoding: accept``): the status,
    Content-Encoding and raw body.
    """
    conn = http.client.HTTPConnection(IP, port, timeout=5)
    try:
        conn.request(
            "GET", path, headers={"Host": host, **({"Accept-Encoding": accept} if accept else {})}
        )
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Encoding"), reply.read()
    finally:
        conn.close()


async def get(
    port: int, host: str, accept: str | None, path: str = PATH
) -> tuple[int, str | None, bytes]:
    return await asyncio.to_thread(_get, port, host, accept, path)


def write_config(
    tmp_path: Path, flaky: FlakyServer, policies: dict[str, dict[str, Any] | None]
) -> int:
    """A Gateway whose listener (its port returned) has one route per name of ``policies``
    (host ``<name>.example``, to the backend), each governed by a BackendTrafficPolicy of that
    name with that spec unless None."""
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
                for name in policies
            ),
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [btp(name, name, spec) for name, spec in policies.items() if spec is not None],
    )
    return port


async def test_compressed_answers(tmp_path: Path, flaky: FlakyServer) -> None:
    compressors = [{"type": "Brotli"}, {"type": "Gzip"}, {"type": "Zstd"}]
    port = write_config(tmp_path, flaky, {"compressed": {"compressor": compressors}, "plain": None})
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


async def test_min_content_length(tmp_path: Path, flaky: FlakyServer) -> None:
    least = [{"type": "Gzip", "minContentLength": 100}, {"type": "Brotli"}]
    default = [{"type": "Gzip"}, {"type": "Brotli"}]
    port = write_config(
        tmp_path, flaky, {"least": {"compressor": least}, "default": {"compressor": default}}
    )
    # The backend answers "200 <path>": 4 bytes more than the path.
    short, long = "/" + "s" * 91, "/" + "l" * 96  # 96 and 101 bytes answered
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="default.example", status=200)
        for path in (short, long):
            expected = f"200 {path}".encode()
            # Brotli on the same route has Envoy's default minimum (30 bytes): compressed.
            status, got, body = await get(port, "least.example", "br", path)
            assert (status, got) == (200, "br") and codings.decode("br", body) == expected
            # The other route's gzip has the default minimum too: compressed.
            status, got, body = await get(port, "default.example", "gzip", path)
            assert (status, got) == (200, "gzip") and codings.decode("gzip", body) == expected
        # Its own gzip: 96 bytes pass as they are, 101 are compressed.
        assert await get(port, "least.example", "gzip", short) == (
            200,
            None,
            f"200 {short}".encode(),
        )
        status, got, body = await get(port, "least.example", "gzip", long)
        assert (status, got) == (200, "gzip")
        assert body != f"200 {long}".encode()
        assert codings.decode("gzip", body) == f"200 {long}".encode()
