"""gateweave's parameters kind (``gateweave.io/v1alpha1`` GatewayParameters): the references
to it resolved, and each Gateway's settings merged.

A GatewayClass's ``spec.parametersRef`` gives the defaults of its Gateways; a Gateway's
``spec.infrastructure.parametersRef`` (same namespace) its own settings. Merging is field by
field: every field the Gateway's parameters set replaces the class's (a list or map, such as
``extraArgs`` or ``resources.requests``, as a whole, and so are the sections whose fields
only make sense together, ``podDisruptionBudget`` and ``autoscaling``); a field neither sets takes
gateweave's
default (concurrency: the machine's CPUs, ``TranslateOptions.default_concurrency``; access
log and tracing: serve's options, ``TranslateOptions.telemetry``).

A reference that names another kind, or a GatewayParameters that does not exist (or was
never accepted: an object failing its schema is refused with a located error and never
enters the snapshot), is the spec's ``InvalidParameters``: Accepted=False on the
GatewayClass (its Gateways are then Pending) or on the Gateway.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.context import Ctx
from gateweave.translate.filters import RuleError, parse_duration
from gateweave.translate.options import TranslateOptions

KIND = "GatewayParameters"
Spec = m.GatewayParametersSpec


def lookup(ctx: Ctx, group: str, kind: str, namespace: str | None, name: str) -> Spec | str:
    """The spec of the GatewayParameters a reference names, or why it cannot be used."""
    where = f"parametersRef {group}/{kind} {f'{namespace}/' if namespace else ''}{name}"
    if group != m.GATEWEAVE_GROUP or kind != KIND:
        return f"{where}: gateweave reads parameters of kind {m.GATEWEAVE_GROUP}/{KIND} only"
    if not namespace:
        return f"{where}: {KIND} is namespaced, so the reference needs a namespace"
    obj = ctx.snapshot.gateway_parameters.get((namespace, name))
    if obj is None:
        return f"{where} does not exist"
    return obj.spec


def merge(base: Spec | None, override: Spec | None) -> Spec:
    """``override``'s set fields over ``base``'s, section by section, field by field."""
    if base is None:
        return override or Spec()
    if override is None:
        return base
    return _merge(base, override)


def _merge(base: Any, over: Any) -> Any:
    changes: dict[str, Any] = {}
    for name in base.__struct_fields__:
        b, o = getattr(base, name), getattr(over, name)
        if (
            isinstance(o, msgspec.Struct)
            and isinstance(b, msgspec.Struct)
            and not getattr(o, "MERGED_WHOLE", False)
        ):
            changes[name] = _merge(b, o)
        elif o is not None:
            changes[name] = o
    return msgspec.structs.replace(base, **changes)


def envoy_settings(spec: Spec, default_concurrency: int) -> ir.EnvoySettings:
    envoy = spec.envoy
    return ir.EnvoySettings(
        concurrency=envoy.concurrency or max(0, default_concurrency),
        log_level=envoy.log_level or "",
        drain_time_s=_seconds(envoy.drain_timeout),
        extra_args=envoy.extra_args or (),
    )


def kubernetes_settings(spec: Spec) -> ir.KubernetesSettings:
    kube = spec.kubernetes
    pdb, hpa = kube.pod_disruption_budget, kube.autoscaling
    return ir.KubernetesSettings(
        replicas=1 if kube.replicas is None else kube.replicas,
        disruption_budget=None
        if pdb is None
        else ir.DisruptionBudget(
            min_available=_int_or_percent(pdb.min_available),
            max_unavailable=_int_or_percent(pdb.max_unavailable),
        ),
        autoscaling=None
        if hpa is None
        else ir.Autoscaling(
            min_replicas=hpa.min_replicas or 1,
            max_replicas=max(hpa.max_replicas, hpa.min_replicas or 1),
            cpu_utilization=hpa.cpu_utilization,
            memory_utilization=hpa.memory_utilization,
        ),
        service_type=kube.service.type or "",
        requests={k: str(v) for k, v in sorted((kube.resources.requests or {}).items())},
        limits={k: str(v) for k, v in sorted((kube.resources.limits or {}).items())},
    )


def telemetry_settings(spec: Spec, options: TranslateOptions) -> ir.Telemetry:
    """The Gateway's access log and tracing: its parameters' fields, serve's options
    (``options.telemetry``) for those unset. In the Kubernetes data plane an access log to a
    file is the Envoy pod's standard output (its log)."""
    default = options.telemetry
    log, trace = spec.telemetry.access_log, spec.telemetry.tracing
    sink = log.sink or default.access_log
    if sink == ir.ACCESS_LOG_FILE and options.address_mode == "kubernetes":
        sink = ir.ACCESS_LOG_STDOUT
    tracing = default.tracing
    if trace.endpoint is not None:
        host, _, port = trace.endpoint.rpartition(":")  # the schema's pattern: host:port
        tracing = ir.Tracing(
            collector_host=host.strip("[]"),
            collector_port=int(port),
            sampling_percent=tracing.sampling_percent if tracing is not None else 100.0,
        )
    if tracing is not None and trace.sampling_rate is not None:
        tracing = msgspec.structs.replace(tracing, sampling_percent=float(trace.sampling_rate))
    return ir.Telemetry(
        access_log=sink, access_log_format=log.format or default.access_log_format, tracing=tracing
    )


def _seconds(duration: str | None) -> int | None:
    if duration is None:
        return None
    try:
        return math.ceil(parse_duration(duration))
    except RuleError:  # the schema's pattern refuses it first; never raise on input
        return None


def _int_or_percent(value: int | str | None) -> int | str | None:
    """A PodDisruptionBudget count: an integer, or a percentage kept as its string."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value
