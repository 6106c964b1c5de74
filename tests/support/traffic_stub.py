"""A stand-in for the admin server's traffic endpoints until the telemetry work lands them.

``GET /api/traffic`` and ``GET /api/traffic/stream`` (server-sent events, one object every
quarter second) in the agreed shape - ``{"routes": {"<Kind>/<ns>/<name>": {"requests",
"errors", "rate", "error_rate"}}, "gateways": {"<ns>/<name>": {...}}, "window_s": W}`` -
with the counts a caller supplies (the tests count real requests where they arrive, at
their backends, behind a real Envoy). Used only where :func:`admin_serves_traffic` says the
admin server does not serve them itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import msgspec
from aiohttp import web

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.admin import AdminServer
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store
from gateweave.translate import translate

WINDOW_S = 10.0
# route id -> (requests, errors); gateway "ns/name" -> the route ids it serves
Counts = Callable[[], Mapping[str, tuple[int, int]]]


class _Rates:
    """Requests and errors per second over the last WINDOW_S, from samples of the totals."""

    def __init__(self, counts: Counts, gateways: Mapping[str, list[str]]) -> None:
        self.counts = counts
        self.gateways = gateways
        self.samples: list[tuple[float, dict[str, tuple[int, int]]]] = []

    def snapshot(self) -> dict[str, Any]:
        now = time.monotonic()
        totals = dict(self.counts())
        self.samples = [s for s in self.samples if now - s[0] <= WINDOW_S] + [(now, totals)]
        start, first = self.samples[0]
        span = max(now - start, 1e-3)

        def entry(requests: int, errors: int, before: tuple[int, int]) -> dict[str, Any]:
            return {"requests": requests, "errors": errors, "rate": (requests - before[0]) / span,
                    "error_rate": (errors - before[1]) / span}

        routes = {rid: entry(*totals[rid], first.get(rid, (0, 0))) for rid in sorted(totals)}
        gateways = {}
        for gw, rids in sorted(self.gateways.items()):
            req = sum(totals.get(r, (0, 0))[0] for r in rids)
            err = sum(totals.get(r, (0, 0))[1] for r in rids)
            before = (sum(first.get(r, (0, 0))[0] for r in rids), sum(first.get(r, (0, 0))[1] for r in rids))
            gateways[gw] = entry(req, err, before)
        return {"routes": routes, "gateways": gateways, "window_s": WINDOW_S}


def admin_serves_traffic() -> bool:
    """Whether the admin server serves ``/api/traffic`` itself (then no stand-in is needed)."""
    runtime = Runtime(Store(), translate_fn=translate, status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME))
    try:
        admin = AdminServer(runtime, address="127.0.0.1:0")
        return any(getattr(r.resource, "canonical", "") == "/api/traffic" for r in admin.app.router.routes())
    finally:
        runtime.close()


def start_with_traffic(
    counts: Counts, gateways: Mapping[str, list[str]]
) -> Callable[[AdminServer], Coroutine[Any, Any, tuple[str, int]]]:
    """An ``AdminServer.start`` that also serves the traffic endpoints from ``counts``; the tests
    set it with ``monkeypatch.setattr(AdminServer, "start", ...)``."""
    rates = _Rates(counts, gateways)

    async def traffic(request: web.Request) -> web.Response:
        return web.Response(body=msgspec.json.encode(rates.snapshot()), content_type="application/json")

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        for _ in range(2400):  # bounded: ten minutes at most
            try:
                await resp.write(b"data: " + msgspec.json.encode(rates.snapshot()) + b"\n\n")
            except ConnectionError:
                break
            await asyncio.sleep(0.25)
        return resp

    original = AdminServer.start

    async def start(self: AdminServer) -> tuple[str, int]:
        self.app.router.add_get("/api/traffic", traffic)
        self.app.router.add_get("/api/traffic/stream", stream)
        return await original(self)

    return start
