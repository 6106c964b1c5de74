"""Requests, errors and their rates per route and Gateway: what ``/api/traffic`` answers.

The Envoys are read when someone asks (``/metrics``, ``/api/traffic``, its event stream);
askers that come while a reading is under way share the next one (each sees the Envoys as
they were after it asked). A reading is kept for :data:`WINDOW_S`, so
a rate is the change between the oldest kept reading and the newest over the time between
them (0 before there are two). Nothing is read while nobody asks.

The ``/api/traffic`` object (the dashboard's contract, docs/observability.md)::

    {"routes": {"<Kind>/<ns>/<name>": {"requests": N, "errors": N, "rate": r, "error_rate": r,
                                        "rules": {"<i>": {"requests": ..., ...}}}},
     "gateways": {"<ns>/<name>": {"requests": N, "errors": N, "rate": r, "error_rate": r}},
     "window_s": W}

``requests`` and ``errors`` (5xx) count since each Envoy started: a route's, every response of
its rules, proxied or Envoy's own (summed over the Gateways it is attached to); a Gateway's, every
request its
listeners answered (a 404 without route included). Rates are per second over ``window_s``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from gateweave import ir
from gateweave.telemetry import Envoys
from gateweave.telemetry.stats import Traffic, name_stats, scrape

WINDOW_S = 10.0  # rates are measured over (at most) this long

_Counts = dict[
    tuple[str, ...], tuple[int, int]
]  # ("route", r) | ("rule", r, i) | ("gateway", g) -> (requests, errors)


def _counts(traffic: Traffic) -> _Counts:
    out: dict[tuple[str, ...], list[int]] = {}

    def add(key: tuple[str, ...], classes: Mapping[str, int]) -> None:
        entry = out.setdefault(key, [0, 0])
        entry[0] += sum(classes.values())
        entry[1] += classes.get("5xx", 0)

    for (_, _, route, rule), classes in traffic.routes.items():
        add(("route", route), classes)
        add(("rule", route, rule), classes)
    for (gateway, _), classes in traffic.listeners.items():
        add(("gateway", gateway), classes)
    return {key: (v[0], v[1]) for key, v in out.items()}


class TrafficMonitor:
    """Reads the Envoys on demand and keeps the readings that rates are measured over."""

    def __init__(
        self,
        envoys: Callable[[], Envoys | None],
        xds: Callable[[], Mapping[str, ir.XdsGateway]],
        *,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._envoys, self._xds = envoys, xds
        self.window_s = window_s
        self._clock = clock
        self._history: deque[tuple[float, _Counts]] = deque()
        self._last: tuple[float, Traffic] | None = None
        self._lock = asyncio.Lock()

    async def read(self) -> Traffic:
        """The data plane's traffic now: a reading begun after this call."""
        asked = self._clock()
        async with self._lock:
            if self._last is not None and self._last[0] > asked:
                return self._last[1]
            begun = self._clock()
            envoys = self._envoys()
            stats = await scrape(envoys.stats_addresses()) if envoys is not None else {}
            traffic = name_stats(stats, self._xds())
            now = self._clock()
            self._last = (begun, traffic)
            self._history.append((now, _counts(traffic)))
            while len(self._history) > 2 and self._history[1][0] <= now - self.window_s:
                self._history.popleft()
            return traffic

    async def summary(self) -> dict[str, Any]:
        """The ``/api/traffic`` object."""
        await self.read()
        then, base = self._history[0]
        now, current = self._history[-1]
        window = now - then

        def entry(key: tuple[str, ...]) -> dict[str, Any]:
            requests, errors = current[key]
            old_requests, old_errors = base.get(key, (0, 0))
            # An Envoy that restarted counts from 0 again: all it counted is new.
            d_requests = requests - old_requests if requests >= old_requests else requests
            d_errors = errors - old_errors if errors >= old_errors else errors
            return {
                "requests": requests,
                "errors": errors,
                "rate": round(d_requests / window, 3) if window > 0 else 0.0,
                "error_rate": round(d_errors / window, 3) if window > 0 else 0.0,
            }

        routes: dict[str, dict[str, Any]] = {}
        gateways: dict[str, dict[str, Any]] = {}
        for key in sorted(current):
            if key[0] == "route":
                routes[key[1]] = {**entry(key), "rules": {}}
            elif key[0] == "gateway":
                gateways[key[1]] = entry(key)
        for key in sorted(current):
            if key[0] == "rule":
                routes[key[1]]["rules"][key[2]] = entry(key)
        return {"routes": routes, "gateways": gateways, "window_s": round(window, 3)}
