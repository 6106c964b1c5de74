"""Every running Envoy's statistics, named with Gateway API names.

Each Envoy's admin ``/stats?format=json&usedonly&histogram_buckets=detailed`` is read
concurrently, each within :data:`SCRAPE_TIMEOUT_S` (an Envoy that does not answer in time
is left out of that reading). The stat names the xDS builder made are mapped back through
the xDS IR of the last translation:

* ``gateweave.route_rq.listener.<listener>.route.<route>.code.<N>``: the responses of a route
  rule (``kind/ns/name``, rule index) on a listener, whoever answered (an upstream, or Envoy:
  redirects, direct responses, denials), from the listener's stats access logger
  (:mod:`gateweave.xds.telemetry`; the route is its IR name, stat-safe; the matches and virtual
  hosts of one rule add up);
* ``gateweave.route_rq_time.listener.<listener>.route.<route>``: the response times of a route
  rule on a listener, from the same logger (the whole request, as the client saw it);
* ``http.<listener>.downstream_rq_<N>xx`` and ``...downstream_rq_time``: a Gateway's
  listener, every request it answered (a 404 without route included);
* ``cluster.<backend>.upstream_rq_<N>xx``: a backend (the IR's cluster name, whose stat-safe
  form is the cluster's ``alt_stat_name``).

Envoy's latency histograms are kept as its bins (lower bound, width, count) in ms.

The Envoys read are an :class:`gateweave.telemetry.Envoys`' ``stats_addresses()``: one per
Gateway on this host, or a Gateway's Kubernetes pods (each pod's stats port); the figures of a
Gateway's Envoys are summed (:func:`merge`), so they are named and labelled the same either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

import aiohttp
import msgspec

from gateweave import ir
from gateweave.telemetry import EnvoyId
from gateweave.xds.resources import stat_name
from gateweave.xds.telemetry import ROUTE_COUNTER, ROUTE_COUNTER_PREFIX, ROUTE_TIMER, route_identity

SCRAPE_TIMEOUT_S = 1.0
STATS_PATH = "/stats?format=json&usedonly&histogram_buckets=detailed"
PROMETHEUS_PATH = "/stats/prometheus?usedonly"  # passed through on /metrics (prometheus.relabel)
# What is read from an Envoy (paths without query): all a pod's stats port lets through.
READ_PATHS = tuple(urlsplit(p).path for p in (STATS_PATH, PROMETHEUS_PATH))
RESPONSE_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")

K = TypeVar("K", bound=Hashable)
Bins = tuple[tuple[float, float, int], ...]  # (lower bound, width, count), ms


class _Bin(msgspec.Struct):
    lower_bound: float
    width: float
    count: int


class _Histogram(msgspec.Struct):
    name: str
    totals: list[_Bin] = []


class _Histograms(msgspec.Struct):
    details: list[_Histogram] = []


class _Stat(msgspec.Struct):
    name: str = ""
    value: int | float | str | None = None
    histograms: _Histograms | None = None


class _StatsDoc(msgspec.Struct):
    stats: list[_Stat] = []


_DECODER = msgspec.json.Decoder(_StatsDoc)


@dataclass(frozen=True)
class EnvoyStats:
    """One Envoy's counters and histograms, by Envoy's stat name."""

    counters: dict[str, int]
    histograms: dict[str, Bins]


def parse(body: bytes) -> EnvoyStats:
    """Envoy's ``/stats?format=json`` document (``ValueError`` if it is not one)."""
    try:
        doc = _DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not Envoy's JSON stats: {exc}") from None
    counters: dict[str, int] = {}
    histograms: dict[str, Bins] = {}
    for stat in doc.stats:
        if stat.histograms is not None:
            for h in stat.histograms.details:
                histograms[h.name] = tuple((b.lower_bound, b.width, b.count) for b in h.totals)
        elif isinstance(stat.value, int):
            counters[stat.name] = stat.value
    return EnvoyStats(counters, histograms)


def merge(stats: Iterable[EnvoyStats]) -> EnvoyStats:
    """The stats of several Envoys of one Gateway as one: counters summed, histogram bins
    of the same bounds added."""
    counters: dict[str, int] = {}
    bins: dict[str, dict[tuple[float, float], int]] = {}
    for one in stats:
        for name, value in one.counters.items():
            counters[name] = counters.get(name, 0) + value
        for name, histogram in one.histograms.items():
            into = bins.setdefault(name, {})
            for lower, width, count in histogram:
                into[(lower, width)] = into.get((lower, width), 0) + count
    histograms = {
        name: tuple((lower, width, count) for (lower, width), count in sorted(by.items()))
        for name, by in bins.items()
    }
    return EnvoyStats(counters, histograms)


async def fetch(
    addresses: Mapping[K, str], path: str, timeout: float = SCRAPE_TIMEOUT_S
) -> dict[K, bytes]:
    """``GET path`` from each Envoy (by any key: its ``host:port`` where stats are read): the
    bodies of those that answered 200 within ``timeout``."""
    if not addresses:
        return {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:

        async def one(address: str) -> bytes | None:
            try:
                async with session.get(f"http://{address}{path}") as resp:
                    return await resp.read() if resp.status == 200 else None
            except (aiohttp.ClientError, TimeoutError):
                return None

        envoys = list(addresses)
        got = await asyncio.gather(*(one(addresses[e]) for e in envoys))
    return {envoy: body for envoy, body in zip(envoys, got, strict=True) if body is not None}


async def scrape(
    addresses: Mapping[EnvoyId, str], timeout: float = SCRAPE_TIMEOUT_S
) -> dict[str, EnvoyStats]:
    """The stats of each Gateway: the sum of its Envoys that answered within ``timeout``."""
    by_gateway: dict[str, list[EnvoyStats]] = {}
    for envoy, body in (await fetch(addresses, STATS_PATH, timeout)).items():
        try:
            by_gateway.setdefault(envoy.gateway, []).append(parse(body))
        except ValueError:
            continue
    return {gateway: merge(stats) for gateway, stats in by_gateway.items()}


# ---------------------------------------------------------------- Gateway API names


@dataclass
class GatewayNames:
    """Stat prefixes -> Gateway API names, for one Gateway's Envoy."""

    routes: dict[str, tuple[str, str]] = field(default_factory=dict)  # stat prefix -> (route, rule)
    listeners: dict[str, str] = field(
        default_factory=dict
    )  # HCM / TCP proxy stat prefix -> listener
    backends: dict[str, str] = field(default_factory=dict)  # cluster alt_stat_name -> cluster name


def gateway_names(gw: ir.XdsGateway) -> GatewayNames:
    out = GatewayNames()

    def http(listener: str, config: ir.RouteConfig) -> None:
        out.listeners[stat_name(listener)] = listener
        for vh in config.virtual_hosts:
            for route in vh.routes:
                identity = route_identity(route.name)
                if identity is not None:
                    out.routes[stat_name(route.name)] = identity
                    # a route split by its backendRefs' filters: each part has its own prefix
                    for k in range(len(route.backends)):
                        out.routes[stat_name(f"{route.name}/backends/{k}")] = identity

    for port in gw.ports:
        if port.http is not None:
            http(port.name, port.http)
        for chain in port.filter_chains:
            if chain.http is not None:
                http(chain.name, chain.http)
            if chain.tcp is not None:
                out.listeners[stat_name(chain.tcp.name)] = chain.name
        for proxy in (port.tcp, port.udp):
            if proxy is not None:
                out.listeners[stat_name(proxy.name)] = port.name
    for cluster in gw.clusters:
        out.backends[stat_name(cluster.name)] = cluster.name
    return out


def _response_class(metric: str, prefix: str) -> str | None:
    """``"5xx"`` of ``upstream_rq_5xx`` (with ``prefix="upstream_rq_"``)."""
    if metric.startswith(prefix):
        rest = metric[len(prefix) :]
        if rest in RESPONSE_CLASSES:
            return rest
    return None


RouteKey = tuple[str, str, str, str]  # (gateway, listener, route, rule)
ListenerKey = tuple[str, str]  # (gateway, listener)
BackendKey = tuple[str, str]  # (gateway, backend)


@dataclass
class Traffic:
    """The data plane's requests, named: counts by response class and latency bins."""

    routes: dict[RouteKey, dict[str, int]] = field(default_factory=dict)
    route_times: dict[RouteKey, list[Bins]] = field(default_factory=dict)
    listeners: dict[ListenerKey, dict[str, int]] = field(default_factory=dict)
    listener_times: dict[ListenerKey, list[Bins]] = field(default_factory=dict)
    backends: dict[BackendKey, dict[str, int]] = field(default_factory=dict)


def _add(into: dict[str, int], cls: str, value: int) -> None:
    into[cls] = into.get(cls, 0) + value


def name_stats(stats: Mapping[str, EnvoyStats], xds: Mapping[str, ir.XdsGateway]) -> Traffic:
    """``stats`` (by Gateway) with Gateway API names; stats of what the IR does not name are
    left out."""
    out = Traffic()
    for gateway in sorted(stats):
        gw = xds.get(gateway)
        if gw is None:
            continue
        names = gateway_names(gw)
        envoy = stats[gateway]
        for name, value in envoy.counters.items():
            kind, _, rest = name.partition(".")
            if kind == ROUTE_COUNTER_PREFIX:
                counted = _route_count(gateway, names, rest)
                if counted is not None:
                    _add(out.routes.setdefault(counted[0], {}), counted[1], value)
            elif kind == "http":
                prefix, _, metric = rest.partition(".")
                cls = _response_class(metric, "downstream_rq_")
                listener = names.listeners.get(prefix)
                if listener is not None and cls:
                    _add(out.listeners.setdefault((gateway, listener), {}), cls, value)
            elif kind == "cluster":
                prefix, _, metric = rest.partition(".")
                cls = _response_class(metric, "upstream_rq_")
                backend = names.backends.get(prefix)
                if backend is not None and cls:
                    _add(out.backends.setdefault((gateway, backend), {}), cls, value)
        for name, bins in envoy.histograms.items():
            kind, _, rest = name.partition(".")
            if kind == ROUTE_COUNTER_PREFIX:
                timed = _route_timed(gateway, names, rest)
                if timed is not None:
                    out.route_times.setdefault(timed, []).append(bins)
            elif kind == "http":
                prefix, _, metric = rest.partition(".")
                listener = names.listeners.get(prefix)
                if listener is not None and metric == "downstream_rq_time":
                    out.listener_times.setdefault((gateway, listener), []).append(bins)
    return out


def _route_count(gateway: str, names: GatewayNames, rest: str) -> tuple[RouteKey, str] | None:
    """``route_rq.listener.<listener>.route.<route>.code.<N>`` -> ((gateway, listener, route,
    rule), response class); ``None`` for a response without route (the listener counts it) or
    without a code. Every part is stat-safe: no dots."""
    parts = rest.split(".")
    if (
        len(parts) != 7
        or parts[0] != ROUTE_COUNTER
        or parts[1:6:2] != ["listener", "route", "code"]
    ):
        return None
    listener, identity, code = names.listeners.get(parts[2]), names.routes.get(parts[4]), parts[6]
    cls = f"{code[:1]}xx"
    if listener is None or identity is None or len(code) != 3 or cls not in RESPONSE_CLASSES:
        return None
    return (gateway, listener, identity[0], identity[1]), cls


def _route_timed(gateway: str, names: GatewayNames, rest: str) -> RouteKey | None:
    """``route_rq_time.listener.<listener>.route.<route>`` -> (gateway, listener, route, rule);
    ``None`` for requests without route. Every part is stat-safe: no dots."""
    parts = rest.split(".")
    if len(parts) != 5 or parts[0] != ROUTE_TIMER or parts[1:4:2] != ["listener", "route"]:
        return None
    listener, identity = names.listeners.get(parts[2]), names.routes.get(parts[4])
    if listener is None or identity is None:
        return None
    return gateway, listener, identity[0], identity[1]
