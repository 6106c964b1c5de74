"""Pieces of the live tests (``serve`` with real Envoys and real traffic): waiting for what
Envoy serves or a status shows, the name-answering and echo backends and the base manifests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from gateweave_bench import harness as h
from gateweave_conformance.echo import EchoSpec, RunningEcho, start_echo

T = TypeVar("T")
POLL = 0.01


async def until(
    probe: Callable[[], Awaitable[T | None]], timeout: float, what: str
) -> tuple[T, float]:
    """Poll ``probe`` until it returns something truthy: (that, seconds it took)."""
    start = time.monotonic()
    while True:
        got = await probe()
        elapsed = time.monotonic() - start
        if got:
            return got, elapsed
        if elapsed > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(POLL)


async def envoy_serving(
    ip: str, port: int, timeout: float = 20, host: str = "nothing.example", status: int = 404
) -> None:
    """Wait until Envoy serves the Gateway's listener on ``ip:port``: ``host`` answered with
    ``status`` (by default a host no route has: 404)."""

    async def up() -> bool:
        reply = await h.fetch(ip, port, "/", host, timeout=0.5)
        return reply is not None and reply.status == status

    await until(up, timeout, "Envoy serving the Gateway")


def programmed(
    served: h.Served, want: str, reason: str | None = None
) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """The Gateway's Programmed condition, once its status is ``want`` ("True"/"False")
    (and its reason ``reason``, if given)."""

    async def probe() -> dict[str, Any] | None:
        gw = await served.get("Gateway", "gw")
        cond = h.condition(gw, "Programmed") if gw else None
        if not cond or cond["status"] != want or (reason is not None and cond["reason"] != reason):
            return None
        return dict(cond)

    return probe


@contextlib.contextmanager
def name_servers(*names: str) -> Iterator[dict[str, h.NameServer]]:
    """Backends answering their own name, by name, closed on exit."""
    servers = {name: h.NameServer(name) for name in names}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.close()


@contextlib.asynccontextmanager
async def echo_backend(host: str) -> AsyncIterator[RunningEcho]:
    """The conformance echo backend (HTTP) on ``host``: it answers with what reached it, as
    JSON; stopped on exit."""
    running = await start_echo(
        EchoSpec(
            mode="http", host=host, http_port=0, h2c_port=0, pod="app-1-a", namespace="default"
        )
    )
    assert await running.ready(5)
    try:
        yield running
    finally:
        await running.stop()


def write_base(directory: Path, ip: str, port: int, backends: dict[str, h.NameServer]) -> None:
    """GatewayClass, Gateway ``gw`` (one HTTP listener on ip:port), Services svc-a and svc-b
    to the name servers A and B."""
    h.write_manifests(
        directory / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", ip, [h.listener("http", "HTTP", port)]),
            *h.service("svc-a", 80, backends["A"].port),
            *h.service("svc-b", 80, backends["B"].port),
        ],
    )


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples named ``name`` in Prometheus text, by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }
