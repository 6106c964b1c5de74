"""The data plane's metric families on ``/metrics``, labelled with Gateway API names.

* ``gateweave_route_requests_total{gateway, listener, route, rule, response_class}``: every
  response of a route rule (proxied, or answered by Envoy itself: a redirect, a direct
  response), by response class (``2xx`` ... ``5xx``);
* ``gateweave_route_request_duration_seconds{gateway, listener, route, rule}``: the latency of
  those it sent upstream (histogram);
* ``gateweave_listener_requests_total{gateway, listener, response_class}`` and
  ``gateweave_listener_request_duration_seconds``: every request a Gateway's listener
  answered, with or without a route;
* ``gateweave_backend_requests_total{gateway, backend, response_class}``: requests per backend.

Histogram buckets and sums come from Envoy's own bins (each counted at its upper edge, summed
at its middle), so they are as exact as Envoy's histograms.

Besides, every statistic each Envoy has used (its ``/stats/prometheus?usedonly``) is passed
through with a ``gateway`` label (and a Kubernetes Envoy pod's with a ``pod`` label: these are
per Envoy, not summed), and Envoy's generated names relabelled: a cluster's
``envoy_cluster_name`` becomes ``backend`` (the IR's cluster name), an HTTP connection
manager's or TCP/UDP proxy's stat prefix becomes ``listener``. The per-route ``envoy_vhost_*``
and ``envoy_gateweave_route_rq`` families are left out: ``gateweave_route_*`` name them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gateweave import ir
from gateweave.telemetry import EnvoyId
from gateweave.telemetry.stats import Bins, Traffic, gateway_names
from gateweave.xds.telemetry import ROUTE_COUNTER_PREFIX

K = TypeVar("K", bound=tuple[str, ...])  # a family's label values
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


def _counter(name: str, doc: str, labels: list[str], data: Mapping[K, dict[str, int]]) -> Metric:
    """A counter family by response class: ``data`` maps label values to counts by class."""
    family = CounterMetricFamily(name, doc, labels=[*labels, "response_class"])
    for key, classes in sorted(data.items()):
        for cls, n in sorted(classes.items()):
            family.add_metric([*key, cls], n)
    return family


def _histogram(name: str, doc: str, labels: list[str], data: Mapping[K, list[Bins]]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, samples in sorted(data.items()):
        buckets, total = histogram(samples)
        family.add_metric(list(key), buckets, total)
    return family


class _Families(Collector):
    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def collect(self) -> Iterator[Metric]:
        t = self.traffic
        route = ["gateway", "listener", "route", "rule"]
        listener = ["gateway", "listener"]
        yield _counter(
            "gateweave_route_requests",
            "Responses of a route rule (proxied or Envoy's own), by response class.",
            route,
            t.routes,
        )
        yield _histogram(
            "gateweave_route_request_duration_seconds",
            "Response time of a route rule (request received to response sent).",
            route,
            t.route_times,
        )
        yield _counter(
            "gateweave_listener_requests",
            "Requests a Gateway's listener answered, by response class.",
            listener,
            t.listeners,
        )
        yield _histogram(
            "gateweave_listener_request_duration_seconds",
            "Request time on a Gateway's listener.",
            listener,
            t.listener_times,
        )
        yield _counter(
            "gateweave_backend_requests",
            "Requests sent to a backend, by response class.",
            ["gateway", "backend"],
            t.backends,
        )


# Envoy's labels that carry a name it generated from ours: label -> (our label, which names)
_RELABEL = {
    "envoy_cluster_name": "backend",
    "envoy_http_conn_manager_prefix": "listener",
    "envoy_tcp_prefix": "listener",
    "envoy_udp_prefix": "listener",
}


def relabel(texts: Mapping[EnvoyId, bytes], xds: Mapping[str, ir.XdsGateway]) -> list[Metric]:
    """Every Envoy's Prometheus text, merged into one set of families, each sample labelled
    with its Gateway (and pod, for a Kubernetes Envoy pod) and Envoy's generated names replaced
    by the IR's. CPU-bound: run it off the event loop."""
    families: dict[str, Metric] = {}
    for envoy in sorted(texts):
        gateway = envoy.gateway
        gw = xds.get(gateway)
        names = gateway_names(gw) if gw is not None else None
        try:
            parsed = list(text_string_to_metric_families(texts[envoy].decode(errors="replace")))
        except ValueError:
            continue  # not Prometheus text: this Envoy is left out
        for family in parsed:
            if family.name.startswith(("envoy_vhost_", f"envoy_{ROUTE_COUNTER_PREFIX}_")):
                continue
            out = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type)
            )
            if out.type != family.type:
                continue
            for sample in family.samples:
                labels = {"gateway": gateway, **({"pod": envoy.pod} if envoy.pod else {})}
                for key, value in sample.labels.items():
                    ours = _RELABEL.get(key)
                    named = None
                    if names is not None and ours == "backend":
                        named = names.backends.get(value)
                    elif names is not None and ours == "listener":
                        named = names.listeners.get(value)
                    if ours is not None and named is not None:
                        labels[ours] = named
                    else:
                        labels[key] = value
                out.add_sample(sample.name, labels, sample.value)
    return [families[name] for name in sorted(families)]


class _Passed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def render(traffic: Traffic, envoys: list[Metric] | None = None) -> bytes:
    """The data plane's families in Prometheus text format (then
    ``envoys``, from :func:`relabel`).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(traffic))
    if envoys:
        registry.register(_Passed(envoys))
    return generate_latest(registry)
