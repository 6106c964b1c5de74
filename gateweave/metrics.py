"""The runtime's Prometheus metrics, in a registry of their own (one per runtime, so
several runtimes - tests - never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = Counter(
            "gateweave_events",
            "Store changes seen by the processor, by kind.",
            ["kind"],
            registry=r,
        )
        self.translations = Counter("gateweave_translations", "Translations run.", registry=r)
        self.translation_failures = Counter(
            "gateweave_translation_failures",
            "Translations that raised (a bug: translate is total).",
            registry=r,
        )
        self.translation_seconds = Histogram(
            "gateweave_translation_seconds",
            "Time spent in one translation.",
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        self.publishes = Counter(
            "gateweave_publishes",
            "Changes handed to a sink, by sink (status, xds, infra).",
            ["sink"],
            registry=r,
        )
        self.status_writes = Counter(
            "gateweave_status_writes", "Object statuses written.", registry=r
        )
        self.config_errors = Gauge(
            "gateweave_config_errors",
            "Current configuration errors (malformed files, rejected objects).",
            registry=r,
        )
        self.quarantined = Gauge(
            "gateweave_quarantined_objects",
            "Route objects left out because a Gateway's Envoy rejects them (until they change).",
            registry=r,
        )
        self.ready = Gauge(
            "gateweave_ready", "1 once the first translation is published.", registry=r
        )
        self.envoys_orphaned = Gauge(
            "gateweave_envoys_orphaned",
            "Envoys a controller before this one left running (state directory) that are not "
            "adopted or stopped yet.",
            registry=r,
        )
        self.envoys_adopted = Counter(
            "gateweave_envoys_adopted",
            "Running Envoys taken over from a controller before this one.",
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when absent): ``value("gateweave_translations_total")``."""
        got = self.registry.get_sample_value(name, labels or {})
        return got if got is not None else 0.0
