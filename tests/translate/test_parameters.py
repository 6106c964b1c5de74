"""GatewayParameters through translate: a GatewayClass's parametersRef gives its Gateways'
defaults, a Gateway's infrastructure.parametersRef overrides them field by field, the result
travels in the infrastructure IR; a reference that cannot be used is InvalidParameters."""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from tests.support.conformance_objects import decoded

GWAPI = "gateway.networking.k8s.io/v1"
OPTIONS = TranslateOptions(default_concurrency=6)


def gateway_class(ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": "gateweave.io/gateway-controller"}
    if ref is not None:
        spec["parametersRef"] = ref
    return {"apiVersion": GWAPI, "kind": "GatewayClass", "metadata": {"name": "gc"}, "spec": spec}


def gateway(name: str, ref: dict[str, Any] | None = None, port: int = 8080) -> dict[str, Any]:
    spec: dict[str, Any] = {"gatewayClassName": "gc", "listeners": [{"name": "http", "protocol": "HTTP", "port": port}]}
    if ref is not None:
        spec["infrastructure"] = {"parametersRef": ref}
    return {"apiVersion": GWAPI, "kind": "Gateway", "metadata": {"name": name, "namespace": "apps"}, "spec": spec}


def params(name: str, spec: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {"apiVersion": "gateweave.io/v1alpha1", "kind": "GatewayParameters",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def ref(name: str, namespace: str | None = None, kind: str = "GatewayParameters",
        group: str = "gateweave.io") -> dict[str, Any]:
    out = {"group": group, "kind": kind, "name": name}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def snapshot(*raws: dict[str, Any]) -> Snapshot:
    return Snapshot.from_objects(decoded(raw).model for raw in raws)


def condition(status: dict[str, Any], type_: str) -> tuple[str, str, str]:
    cond = next(c for c in status["conditions"] if c["type"] == type_)
    return cond["status"], cond["reason"], cond["message"]


CLASS_PARAMS = params("defaults", {
    "envoy": {"concurrency": 2, "logLevel": "debug", "drainTimeout": "1m30s", "extraArgs": ["--a"]},
    "kubernetes": {"replicas": 3, "service": {"type": "NodePort"},
                   "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}},
}, namespace="infra")


def test_without_parameters_concurrency_is_the_machines_cpus() -> None:
    result = translate(snapshot(gateway_class(), gateway("gw")), OPTIONS)
    assert result.infra["apps/gw"].envoy == ir.EnvoySettings(concurrency=6)
    assert result.infra["apps/gw"].kubernetes == ir.KubernetesSettings()


def test_class_defaults_and_one_gateways_override_merged_field_by_field() -> None:
    override = params("mine", {"envoy": {"concurrency": 8, "extraArgs": ["--b", "--c"]},
                               "kubernetes": {"resources": {"limits": {"cpu": 2}}}})
    snap = snapshot(gateway_class(ref("defaults", "infra")), CLASS_PARAMS, override,
                    gateway("plain"), gateway("tuned", ref("mine")))
    result = translate(snap, OPTIONS)
    assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted")[:2] == ("True", "Accepted")
    plain, tuned = result.infra["apps/plain"], result.infra["apps/tuned"]
    assert plain.envoy == ir.EnvoySettings(concurrency=2, log_level="debug", drain_time_s=90, extra_args=("--a",))
    assert plain.kubernetes == ir.KubernetesSettings(
        replicas=3, service_type="NodePort", requests={"cpu": "100m"}, limits={"memory": "1Gi"})
    # the override's fields replace the class's; the others stay the class's
    assert tuned.envoy == ir.EnvoySettings(concurrency=8, log_level="debug", drain_time_s=90, extra_args=("--b", "--c"))
    assert tuned.kubernetes == ir.KubernetesSettings(
        replicas=3, service_type="NodePort", requests={"cpu": "100m"}, limits={"cpu": "2"})
    for name in ("plain", "tuned"):
        assert condition(result.statuses[("Gateway", "apps", name)], "Accepted")[:2] == ("True", "Accepted")


def test_a_class_reference_that_cannot_be_used_is_invalid_parameters() -> None:
    cases = {
        "missing": (ref("nope", "infra"), "parametersRef gateweave.io/GatewayParameters infra/nope does not exist"),
        "wrong kind": (ref("cfg", "infra", kind="ConfigMap", group=""),
                       "parametersRef /ConfigMap infra/cfg: gateweave reads parameters of kind "
                       "gateweave.io/GatewayParameters only"),
        "no namespace": (ref("defaults"), "parametersRef gateweave.io/GatewayParameters defaults: "
                         "GatewayParameters is namespaced, so the reference needs a namespace"),
    }
    for what, (bad, message) in cases.items():
        result = translate(snapshot(gateway_class(bad), CLASS_PARAMS, gateway("gw")), OPTIONS)
        assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted") == (
            "False", "InvalidParameters", message), what
        gw = result.statuses[("Gateway", "apps", "gw")]
        assert condition(gw, "Accepted")[:2] == ("False", "Pending"), what
        assert result.infra == {}, what


def test_a_gateway_reference_that_cannot_be_used_is_invalid_parameters_on_that_gateway_only() -> None:
    cases = {
        "missing": (ref("nope"), "infrastructure.parametersRef gateweave.io/GatewayParameters apps/nope does not exist"),
        "wrong kind": (ref("cfg", kind="ConfigMap", group=""),
                       "infrastructure.parametersRef /ConfigMap apps/cfg: gateweave reads parameters of kind "
                       "gateweave.io/GatewayParameters only"),
        "another namespace's": (ref("defaults"),
                                "infrastructure.parametersRef gateweave.io/GatewayParameters apps/defaults does not exist"),
    }
    for what, (bad, message) in cases.items():
        result = translate(snapshot(gateway_class(), CLASS_PARAMS, gateway("bad", bad), gateway("good")), OPTIONS)
        status = result.statuses[("Gateway", "apps", "bad")]
        assert condition(status, "Accepted") == ("False", "InvalidParameters", message), what
        assert condition(status, "Programmed")[:2] == ("False", "Invalid"), what
        assert "apps/bad" not in result.infra and "apps/good" in result.infra, what
        assert condition(result.statuses[("GatewayClass", "", "gc")], "Accepted")[:2] == ("True", "Accepted")
