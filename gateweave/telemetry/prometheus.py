"""The data plane's metric families on ``/metrics``, labelled with Gateway API names.

* ``gateweave_route_requests_total{gateway, listener, route, rule, response_class}``: requests a
  route rule sent upstream, by response class (``2xx`` ... ``5xx``);
* ``gateweave_route_request_duration_seconds{gateway, listener, route, rule}``: their latency
  (histogram);
* ``gateweave_listener_requests_total{gateway, listener, response_class}`` and
  ``gateweave_listener_request_duration_seconds``: every request a Gateway's listener
  answered, with or without a route;
* ``gateweave_backend_requests_total{gateway, backend, response_class}``: requests per backend.

Histogram buckets and sums come from Envoy's own bins (each counted at its upper edge, summed
at its middle), so they are as exact as Envoy's histograms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from gateweave.telemetry.stats import Bins, Traffic

BUCKETS_MS = (0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


def histogram(samples: Iterable[Bins]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus buckets (seconds, cumulative, ``+Inf`` last) and sum of Envoy's bins."""
    edges = [0] * len(BUCKETS_MS)
    total = 0
    sum_ms = 0.0
    for bins in samples:
        for lower, width, count in bins:
            upper = lower + width
            total += count
            sum_ms += (lower + width / 2) * count
            for i, bound in enumerate(BUCKETS_MS):
                if upper <= bound:
                    edges[i] += count
    buckets = [(_le(bound / 1000), float(n)) for bound, n in zip(BUCKETS_MS, edges, strict=True)]
    buckets.append(("+Inf", float(total)))
    return buckets, sum_ms / 1000


def _le(seconds: float) -> str:
    return repr(float(seconds))


class _Families(Collector):
    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def collect(self) -> Iterator[Metric]:
        t = self.traffic
        routes = CounterMetricFamily(
            "gateweave_route_requests", "Requests a route rule sent upstream, by response class.",
            labels=["gateway", "listener", "route", "rule", "response_class"],
        )
        for key, classes in sorted(t.routes.items()):
            for cls, n in sorted(classes.items()):
                routes.add_metric([*key, cls], n)
        yield routes
        route_times = HistogramMetricFamily(
            "gateweave_route_request_duration_seconds", "Upstream request time of a route rule.",
            labels=["gateway", "listener", "route", "rule"],
        )
        for key, samples in sorted(t.route_times.items()):
            buckets, total = histogram(samples)
            route_times.add_metric(list(key), buckets, total)
        yield route_times
        listeners = CounterMetricFamily(
            "gateweave_listener_requests", "Requests a Gateway's listener answered, by response class.",
            labels=["gateway", "listener", "response_class"],
        )
        for lkey, classes in sorted(t.listeners.items()):
            for cls, n in sorted(classes.items()):
                listeners.add_metric([*lkey, cls], n)
        yield listeners
        listener_times = HistogramMetricFamily(
            "gateweave_listener_request_duration_seconds", "Request time on a Gateway's listener.",
            labels=["gateway", "listener"],
        )
        for lkey, samples in sorted(t.listener_times.items()):
            buckets, total = histogram(samples)
            listener_times.add_metric(list(lkey), buckets, total)
        yield listener_times
        backends = CounterMetricFamily(
            "gateweave_backend_requests", "Requests sent to a backend, by response class.",
            labels=["gateway", "backend", "response_class"],
        )
        for bkey, classes in sorted(t.backends.items()):
            for cls, n in sorted(classes.items()):
                backends.add_metric([*bkey, cls], n)
        yield backends


def render(traffic: Traffic) -> bytes:
    """The data plane's families in Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(traffic))
    return generate_latest(registry)
