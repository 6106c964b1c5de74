"""GatewayParameters through translate: a GatewayClass's parametersRef gives its Gateways'
defaults, a Gateway's infrastructure.parametersRef overrides them field by field, the result
travels in the infrastructure IR; a reference that cannot be used is InvalidParameters."""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.translate.options import DataplaneState, TranslateOptions
from tests.support.conformance_objects import decoded

GWAPI = "gateway.networking.k8s.io/v1"
OPTIONS = TranslateOptions(default_concurrency=6)


def gateway_class(ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": "gateweave.io/gateway-controller"}
    if ref is not None:
        spec["parametersRef"] = ref
    return {"apiVersion": GWAPI, "kind": "GatewayClass", "metadata": {"name": "gc"}, "spec": spec}


def gateway(name: str, ref: dict[str, Any] | None = None, port: int = 8080) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": "gc",
        "listeners": [{"name": "http", "protocol": "HTTP", "port": port}],
    }
    if ref is not None:
        spec["infrastructure"] = {"parametersRef": ref}
    return {
        "apiVersion": GWAPI,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": spec,
    }


def params(name: str, spec: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def ref(
    name: str,
    namespace: str | None = None,
    kind: str = "GatewayParameters",
    group: str = "gateweave.io",
) -> dict[str, Any]:
    out = {"group": group, "kind": kind, "name": name}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def snapshot(*raws: dict[str, Any]) -> Snapshot:
    return Snapshot.from_objects(decoded(raw).model for raw in raws)


def condition(status: dict[str, Any], type_: str) -> tuple[str, str, str]:
    cond = next(c for c in status["conditions"] if c["type"] == type_)
    return cond["status"], cond["reason"], cond["message"]


CLASS_PARAMS = params(
    "defaults",
    {
        "envoy": {
            "concurrency": 2,
            "logLevel": "debug",
            "drainTimeout": "1m30s",
            "extraArgs": ["--a"],
        },
        "kubernetes": {
            "replicas": 3,
            "service": {"type": "NodePort"},
            "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
        },
    },
    namespace="infra",
)


def test_without_parameters_concurrency_is_the_machines_cpus() -> None:
    result = translate(snapshot(gateway_class(), gateway("gw")), OPTIONS)
    assert result.infra["apps/gw"].envoy == ir.EnvoySettings(concurrency=6)
    assert result.infra["apps/gw"].kubernetes == ir.KubernetesSettings()


def test_class_defaults_and_one_gateways_override_merged_field_by_field() -> None:
    override = params(
        "mine",
        {
            "envoy": {"concurrency": 8, "extraArgs": ["--b", "--c"]},
            "kubernetes": {"resources": {"limits": {"cpu": 2}}},
        },
    )
    snap = snapshot(
        gateway_class(ref("defaults", "infra")),
        CLASS_PARAMS,
        override,
        gateway("plain"),
        gateway("tuned", ref("mine")),
    )
    result = translate(snap, OPTIONS)
    assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted")[:2] == (
        "True",
        "Accepted",
    )
    plain, tuned = result.infra["apps/plain"], result.infra["apps/tuned"]
    assert plain.envoy == ir.EnvoySettings(
        concurrency=2, log_level="debug", drain_time_s=90, extra_args=("--a",)
    )
    assert plain.kubernetes == ir.KubernetesSettings(
        replicas=3, service_type="NodePort", requests={"cpu": "100m"}, limits={"memory": "1Gi"}
    )
    # the override's fields replace the class's; the others stay the class's
    assert tuned.envoy == ir.EnvoySettings(
        concurrency=8, log_level="debug", drain_time_s=90, extra_args=("--b", "--c")
    )
    assert tuned.kubernetes == ir.KubernetesSettings(
        replicas=3, service_type="NodePort", requests={"cpu": "100m"}, limits={"cpu": "2"}
    )
    for name in ("plain", "tuned"):
        assert condition(result.statuses[("Gateway", "apps", name)], "Accepted")[:2] == (
            "True",
            "Accepted",
        )


def test_a_class_reference_that_cannot_be_used_is_invalid_parameters() -> None:
    cases = {
        "missing": (
            ref("nope", "infra"),
            "parametersRef gateweave.io/GatewayParameters infra/nope does not exist",
        ),
        "wrong kind": (
            ref("cfg", "infra", kind="ConfigMap", group=""),
            "parametersRef /ConfigMap infra/cfg: gateweave reads parameters of kind "
            "gateweave.io/GatewayParameters only",
        ),
        "no namespace": (
            ref("defaults"),
            "parametersRef gateweave.io/GatewayParameters defaults: "
            "GatewayParameters is namespaced, so the reference needs a namespace",
        ),
    }
    for what, (bad, message) in cases.items():
        result = translate(snapshot(gateway_class(bad), CLASS_PARAMS, gateway("gw")), OPTIONS)
        assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted") == (
            "False",
            "InvalidParameters",
            message,
        ), what
        gw = result.statuses[("Gateway", "apps", "gw")]
        assert condition(gw, "Accepted")[:2] == ("False", "Pending"), what
        assert result.infra == {}, what


def test_a_gateway_reference_that_cannot_be_used_is_invalid_parameters_on_that_gateway_only() -> (
    None
):
    cases = {
        "missing": (
            ref("nope"),
            "infrastructure.parametersRef gateweave.io/GatewayParameters apps/nope does not exist",
        ),
        "wrong kind": (
            ref("cfg", kind="ConfigMap", group=""),
            "infrastructure.parametersRef /ConfigMap apps/cfg: gateweave reads parameters of kind "
            "gateweave.io/GatewayParameters only",
        ),
        "another namespace's": (
            ref("defaults"),
            "infrastructure.parametersRef gateweave.io/GatewayParameters apps/defaults does not "
            "exist",
        ),
    }
    for what, (bad, message) in cases.items():
        result = translate(
            snapshot(gateway_class(), CLASS_PARAMS, gateway("bad", bad), gateway("good")), OPTIONS
        )
        status = result.statuses[("Gateway", "apps", "bad")]
        assert condition(status, "Accepted") == ("False", "InvalidParameters", message), what
        assert condition(status, "Programmed")[:2] == ("False", "Invalid"), what
        assert "apps/bad" not in result.infra and "apps/good" in result.infra, what
        assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted")[:2] == (
            "True",
            "Accepted",
        )


def test_fleet_sections_are_merged_whole() -> None:
    fleet = params(
        "defaults",
        {
            "kubernetes": {
                "podDisruptionBudget": {"minAvailable": "50%"},
                "autoscaling": {
                    "minReplicas": 2,
                    "maxReplicas": 8,
                    "cpuUtilization": 70,
                    "memoryUtilization": 90,
                },
            }
        },
        namespace="infra",
    )
    mine = params(
        "mine",
        {
            "kubernetes": {
                "podDisruptionBudget": {"maxUnavailable": 1},
                "autoscaling": {"maxReplicas": 3, "cpuUtilization": 50},
            }
        },
    )
    snap = snapshot(
        gateway_class(ref("defaults", "infra")),
        fleet,
        mine,
        gateway("plain"),
        gateway("own", ref("mine")),
    )
    result = translate(snap, OPTIONS)
    plain, own = result.infra["apps/plain"].kubernetes, result.infra["apps/own"].kubernetes
    assert plain.disruption_budget == ir.DisruptionBudget(min_available="50%")
    assert plain.autoscaling == ir.Autoscaling(
        min_replicas=2, max_replicas=8, cpu_utilization=70, memory_utilization=90
    )
    # the Gateway's sections replace the class's whole: no budget with both fields, no class target
    # left over
    assert own.disruption_budget == ir.DisruptionBudget(max_unavailable=1)
    assert own.autoscaling == ir.Autoscaling(min_replicas=1, max_replicas=3, cpu_utilization=50)


def test_programmed_says_which_envoy_pods_run_the_configuration() -> None:
    snap = snapshot(
        gateway_class(),
        params("three", {"kubernetes": {"replicas": 3}}),
        gateway("gw", ref("three")),
    )

    def programmed(state: DataplaneState) -> tuple[str, str, str]:
        result = translate(snap, TranslateOptions(dataplane={"apps/gw": state}))
        return condition(result.statuses[("Gateway", "apps", "gw")], "Programmed")

    assert programmed(DataplaneState(acked=True, running=("a", "b"))) == (
        "False",
        "Pending",
        "2 of 3 Envoy pods run the current configuration; waiting for 1 more not connected",
    )
    assert programmed(DataplaneState(running=("a", "b"), waiting=("c",))) == (
        "False",
        "Pending",
        "2 of 3 Envoy pods run the current configuration; waiting for c",
    )
    assert programmed(DataplaneState(acked=True, running=("a", "b", "c")))[:2] == (
        "True",
        "Programmed",
    )
    assert programmed(
        DataplaneState(running=("a", "b"), waiting=("c", "d"))
    ) == (  # more than asked for: all count
        "False",
        "Pending",
        "2 of 4 Envoy pods run the current configuration; waiting for c, d",
    )
    assert programmed(
        DataplaneState(error="bad listener", running=("a", "b"), waiting=("c",), rejected_by="c")
    ) == ("False", "Invalid", "Envoy pod c rejected the configuration: bad listener")
    # one Envoy (no pods named): as before
    assert programmed(DataplaneState(acked=True))[:2] == ("True", "Programmed")
    assert programmed(DataplaneState(error="bad")) == (
        "False",
        "Invalid",
        "Envoy rejected the configuration: bad",
    )


def test_telemetry_per_gateway_class_defaults_overrides_and_serves_options_below() -> None:
    serve = ir.Telemetry(
        access_log=ir.ACCESS_LOG_FILE,
        tracing=ir.Tracing(collector_host="serve.test", collector_port=4317, sampling_percent=10),
    )
    options = TranslateOptions(default_concurrency=6, telemetry=serve)
    defaults = params(
        "defaults",
        {
            "telemetry": {
                "accessLog": {"format": "text"},
                "tracing": {"endpoint": "[::1]:4318", "samplingRate": 50},
            }
        },
        namespace="infra",
    )
    quiet = params(
        "quiet", {"telemetry": {"accessLog": {"sink": "off"}, "tracing": {"samplingRate": 0}}}
    )
    collector = params("collector", {"telemetry": {"tracing": {"endpoint": "otel.test:4317"}}})
    snap = snapshot(
        gateway_class(ref("defaults", "infra")),
        defaults,
        quiet,
        collector,
        gateway("plain"),
        gateway("quiet", ref("quiet")),
        gateway("collector", ref("collector")),
    )
    for result in (translate(snap, options), IncrementalTranslator()(snap, options)):
        xds = result.xds
        assert xds["apps/plain"].telemetry == ir.Telemetry(
            access_log=ir.ACCESS_LOG_FILE,
            access_log_format=ir.ACCESS_LOG_TEXT,
            tracing=ir.Tracing(collector_host="::1", collector_port=4318, sampling_percent=50),
        )
        assert xds["apps/quiet"].telemetry == ir.Telemetry(
            access_log=ir.ACCESS_LOG_OFF,
            access_log_format=ir.ACCESS_LOG_TEXT,
            tracing=ir.Tracing(collector_host="::1", collector_port=4318, sampling_percent=0),
        )
        # the Gateway's endpoint over the class's; the class's sampling rate kept
        assert xds["apps/collector"].telemetry.tracing == ir.Tracing(
            collector_host="otel.test", collector_port=4317, sampling_percent=50
        )
    # without parameters: serve's options; a sampling rate alone sets no tracing
    alone = params("alone", {"telemetry": {"tracing": {"samplingRate": 5}}})
    snap = snapshot(gateway_class(), alone, gateway("plain"), gateway("rate", ref("alone")))
    assert translate(snap, options).xds["apps/plain"].telemetry == serve
    assert translate(snap, options).xds["apps/rate"].telemetry.tracing == ir.Tracing(
        collector_host="serve.test", collector_port=4317, sampling_percent=5
    )
    assert translate(snap, OPTIONS).xds["apps/rate"].telemetry == ir.Telemetry()


def test_the_incremental_translation_follows_a_telemetry_change() -> None:
    base = [gateway_class(ref("defaults", "infra")), gateway("plain"), gateway("own", ref("own"))]
    before = snapshot(
        *base,
        params("defaults", {"telemetry": {"accessLog": {"format": "text"}}}, namespace="infra"),
        params("own", {}),
    )
    after = snapshot(
        *base,
        params("defaults", {"telemetry": {"accessLog": {"format": "json"}}}, namespace="infra"),
        params("own", {"telemetry": {"accessLog": {"sink": "off"}}}),
    )
    incremental = IncrementalTranslator()
    for snap in (before, after, before):
        assert incremental(snap, OPTIONS) == translate(snap, OPTIONS)
    assert incremental(after, OPTIONS).xds["apps/own"].telemetry.access_log == ir.ACCESS_LOG_OFF


def test_kubernetes_data_plane_logs_to_the_pods_stdout_instead_of_a_file() -> None:
    own = params("own", {"telemetry": {"accessLog": {"sink": "file", "format": "text"}}})
    snap = snapshot(gateway_class(), own, gateway("plain"), gateway("own", ref("own")))
    result = translate(snap, TranslateOptions(address_mode="kubernetes"))
    assert result.xds["apps/plain"].telemetry.access_log == ir.ACCESS_LOG_STDOUT
    assert result.xds["apps/own"].telemetry == ir.Telemetry(
        access_log=ir.ACCESS_LOG_STDOUT, access_log_format=ir.ACCESS_LOG_TEXT
    )
