"""gateweave's own ``GatewayParameters`` kind (deploy/crds): registered, decoded with its
schema's defaults, and refused with located errors where its schema or CEL rules say so."""

from __future__ import annotations

from gateweave.api import models as m
from gateweave.api.decode import decode, decode_sourced
from gateweave.api.kinds import KINDS, lookup
from gateweave.api.load import load_text

TEXT = """\
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata:
  name: fine
  namespace: infra
spec:
  envoy:
    concurrency: 3
    logLevel: info
    drainTimeout: 1m30s
    extraArgs: ["--component-log-level", "upstream:debug"]
  kubernetes:
    replicas: 2
    service: {type: NodePort}
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: 2}
---
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata:
  name: bad
spec:
  envoy:
    concurrency: 0
    extraArgs: ["--log-level=debug"]
    drainTimeout: soon
  kubernetes:
    service: {type: ExternalName}
    resources:
      requests: {cpu: lots}
    replica: 3
"""


def test_registered_with_its_group_and_version() -> None:
    info = lookup("gateweave.io/v1alpha1", "GatewayParameters")
    assert info is not None and info is KINDS["GatewayParameters"]
    assert info.custom and info.namespaced and info.model is m.GatewayParameters
    assert lookup("gateweave.io/v1", "GatewayParameters") is None


def test_decodes_with_every_field_and_an_empty_spec_sets_nothing() -> None:
    loaded = load_text(TEXT, "params.yaml")
    dec, errors = decode(loaded.objects[0].raw, loaded.objects[0].source)
    assert errors == [] and dec is not None
    spec = dec.model.spec
    assert spec.envoy == m.EnvoyParameters(
        concurrency=3,
        log_level="info",
        drain_timeout="1m30s",
        extra_args=("--component-log-level", "upstream:debug"),
    )
    assert spec.kubernetes.replicas == 2 and spec.kubernetes.service.type == "NodePort"
    assert spec.kubernetes.resources.requests == {"cpu": "100m", "memory": "128Mi"}
    assert spec.kubernetes.resources.limits == {"cpu": 2}
    empty, errors = decode(
        {
            "apiVersion": "gateweave.io/v1alpha1",
            "kind": "GatewayParameters",
            "metadata": {"name": "e"},
        }
    )
    assert errors == [] and empty is not None
    assert empty.raw["spec"] == {}  # the CRD's default
    assert empty.model.spec == m.GatewayParametersSpec()


def test_schema_and_cel_rejections_are_located() -> None:
    item = load_text(TEXT, "params.yaml").objects[1]
    dec, errors = decode_sourced(item)
    assert dec is None
    where = "params.yaml:{}: GatewayParameters default/bad: "
    number = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    quantity = rf"'^(\+|-)?{number}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{number}))?$'"
    assert sorted(str(e) for e in errors) == sorted(
        [
            where.format(32) + 'unknown field "spec.kubernetes.replica" (did you mean "replicas"?)',
            where.format(25)
            + "spec.envoy.concurrency: Invalid value: 0: spec.envoy.concurrency in body should be "
            "greater than or equal to 1",
            where.format(26)
            + 'spec.envoy.extraArgs: Invalid value: "array": extraArgs may not set -c, '
            "--config-path, "
            "--config-yaml, --concurrency, -l, --log-level, --log-path, --drain-time-s, "
            "--parent-shutdown-time-s, --disable-hot-restart, "
            "--base-id, --use-dynamic-base-id, --base-id-path, --restart-epoch, --mode or "
            "--service-node (gateweave sets them; use the fields for concurrency, logLevel and "
            "drainTimeout)",
            where.format(27)
            + 'spec.envoy.drainTimeout: Invalid value: "soon": spec.envoy.drainTimeout in body '
            "should "
            "match '^([0-9]{1,5}(h|m|s|ms)){1,4}$'",
            where.format(29)
            + 'spec.kubernetes.service.type: Unsupported value: "ExternalName": supported values: '
            '"ClusterIP", "NodePort", "LoadBalancer"',
            where.format(31) + 'spec.kubernetes.resources.requests[cpu]: Invalid value: "lots": '
            f"spec.kubernetes.resources.requests[cpu] in body should match {quantity}",
        ]
    )


FLEET = """\
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata: {name: both}
spec:
  envoy:
    extraArgs: ["--service-node=x"]
  kubernetes:
    podDisruptionBudget: {minAvailable: 1, maxUnavailable: "10%"}
    autoscaling: {minReplicas: 5, maxReplicas: 2}
---
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata: {name: malformed}
spec:
  kubernetes:
    podDisruptionBudget: {maxUnavailable: half}
    autoscaling: {maxReplicas: 2, cpuUtilization: 0}
---
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata: {name: fine}
spec:
  kubernetes:
    podDisruptionBudget: {maxUnavailable: "10%"}
    autoscaling: {maxReplicas: 4, memoryUtilization: 60}
"""


def test_fleet_sections_decode_and_their_rules_are_located() -> None:
    both, malformed, fine = load_text(FLEET, "fleet.yaml").objects
    dec, errors = decode_sourced(fine)
    assert errors == [] and dec is not None
    assert dec.model.spec.kubernetes.pod_disruption_budget == m.PodDisruptionBudgetParameters(
        max_unavailable="10%"
    )
    assert dec.model.spec.kubernetes.autoscaling == m.AutoscalingParameters(
        max_replicas=4, memory_utilization=60
    )
    dec, errors = decode_sourced(both)
    assert dec is None
    where = "fleet.yaml:{}: GatewayParameters default/{}: "
    assert sorted(str(e) for e in errors) == sorted(
        [
            where.format(6, "both")
            + 'spec.envoy.extraArgs: Invalid value: "array": extraArgs may not set -c, '
            "--config-path, --config-yaml, --concurrency, -l, --log-level, --log-path, "
            "--drain-time-s, --parent-shutdown-time-s, "
            "--disable-hot-restart, --base-id, --use-dynamic-base-id, --base-id-path, "
            "--restart-epoch, --mode or "
            "--service-node (gateweave sets them; use the fields for "
            "concurrency, logLevel and drainTimeout)",
            where.format(8, "both")
            + 'spec.kubernetes.podDisruptionBudget: Invalid value: "object": set exactly one '
            "of minAvailable and maxUnavailable",
            where.format(9, "both")
            + 'spec.kubernetes.autoscaling: Invalid value: "object": minReplicas may not '
            "exceed maxReplicas",
            where.format(9, "both")
            + 'spec.kubernetes.autoscaling: Invalid value: "object": set cpuUtilization or '
            "memoryUtilization (or both)",
        ]
    )
    dec, errors = decode_sourced(malformed)
    assert dec is None
    assert sorted(str(e) for e in errors) == sorted(
        [
            where.format(16, "malformed")
            + 'spec.kubernetes.podDisruptionBudget.maxUnavailable: Invalid value: "half": '
            "spec.kubernetes.podDisruptionBudget.maxUnavailable in body should match "
            "'^[0-9]{1,3}%$'",
            where.format(17, "malformed")
            + "spec.kubernetes.autoscaling.cpuUtilization: Invalid value: 0: "
            "spec.kubernetes.autoscaling.cpuUtilization in body should be greater than or equal to "
            "1",
        ]
    )


TELEMETRY = """\
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata: {name: telemetry}
spec:
  telemetry:
    accessLog:
      sink: "off"
      format: text
    tracing:
      endpoint: otel-collector.observability:4317
      samplingRate: 12.5
---
apiVersion: gateweave.io/v1alpha1
kind: GatewayParameters
metadata: {name: bad-telemetry}
spec:
  telemetry:
    accessLog:
      sink: syslog
    tracing:
      endpoint: collector
      samplingRate: 150
"""


def test_telemetry_decodes_and_bad_values_are_refused_at_their_field() -> None:
    good, bad = load_text(TELEMETRY, "t.yaml").objects
    dec, errors = decode_sourced(good)
    assert errors == [] and dec is not None
    assert dec.model.spec.telemetry == m.TelemetryParameters(
        access_log=m.AccessLogParameters(sink="off", format="text"),
        tracing=m.TracingParameters(
            endpoint="otel-collector.observability:4317", sampling_rate=12.5
        ),
    )
    for endpoint in ("[::1]:4317", "10.0.0.1:65535", "a:1"):
        raw = {**good.raw, "spec": {"telemetry": {"tracing": {"endpoint": endpoint}}}}
        assert decode(raw)[1] == [], endpoint
    for endpoint in ("c:0", "c:65536", "c:", ":4317", "-c:80", "c d:80"):
        raw = {**good.raw, "spec": {"telemetry": {"tracing": {"endpoint": endpoint}}}}
        assert [e for e in decode(raw)[1] if "spec.telemetry.tracing.endpoint" in str(e)], endpoint
    dec, errors = decode_sourced(bad)
    assert dec is None
    located = sorted(str(e).split(": ", 3)[0] + " " + str(e).split(": ")[2] for e in errors)
    assert located == [
        "t.yaml:19 spec.telemetry.accessLog.sink",
        "t.yaml:21 spec.telemetry.tracing.endpoint",
        "t.yaml:22 spec.telemetry.tracing.samplingRate",
    ]
