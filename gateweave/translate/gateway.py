"""Gateways and ListenerSets: acceptance, addresses, listeners,
status, and the infrastructure IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import (
    addresses,
    binds,
    certs,
    gatewayclass,
    listeners,
    merging,
    parameters,
    tlsoverlap,
)
from gateweave.translate import conditions as c
from gateweave.translate.context import (
    Ctx,
    GatewayCtx,
    ListenerCtx,
    label_selector_matches,
    sort_key,
)

G = m.GATEWAY_GROUP


@dataclass
class _GatewayFindings:
    not_accepted: c.Condition | None = None
    not_programmed: c.Condition | None = None
    # Kubernetes mode: the Service has no (requested) address yet. Programmed=False, but the
    # configuration and infrastructure are generated (the Service must exist to get one).
    address_pending: c.Condition | None = None
    refs_problem: c.Condition | None = None  # spec.tls.backend.clientCertificateRef problem


@dataclass
class _ListenerSetFindings:
    listener_set: m.ListenerSet
    gateway: GatewayCtx
    allowed: bool
    message: str
    listeners: list[ListenerCtx]


def resolve_gateways(ctx: Ctx) -> list[GatewayCtx]:
    """Every Gateway of one of our GatewayClasses, with its listeners checked; writes GatewayClass
    status.
    """
    classes = gatewayclass.resolve_classes(ctx)
    ours = [
        gw
        for gw in sorted(ctx.snapshot.gateways.values(), key=sort_key)
        if gw.spec.gateway_class_name in classes
    ]
    kube = ctx.options.address_mode == "kubernetes"
    merged_classes = {name for name, cls in classes.items() if merging.merges(cls.parameters)}
    if kube:
        assigned = addresses.assign_kubernetes(ours, ctx.snapshot.services, merged_classes)
    else:
        assigned = addresses.assign(ours, ctx.options)
    result: list[GatewayCtx] = []
    for gw in ours:
        gc = ctx.snapshot.gateway_classes[("", gw.spec.gateway_class_name)]
        gctx = GatewayCtx(gateway=gw, gateway_class=gc)
        f = _GatewayFindings()
        addr = assigned[(gw.metadata.namespace, gw.metadata.name)]
        gctx.address = addr.address
        gctx.requested_addresses = addr.requested
        gctx.service_addresses = addr.found
        cls = classes[gw.spec.gateway_class_name]
        merged = gw.spec.gateway_class_name in merged_classes
        gctx.node = merging.node_of(gc.metadata.name) if merged else gctx.name
        params = _parameters(ctx, gctx, cls.parameters, merged)
        if not cls.accepted:
            f.not_accepted = c.gateway_class_pending(gc.metadata.name)
        elif params is not None:
            f.not_accepted = params
        elif addr.not_accepted is not None:
            f.not_accepted = addr.not_accepted
        if kube:
            f.address_pending = addr.not_programmed
        else:
            f.not_programmed = addr.not_programmed
        _resolve_backend_client_cert(ctx, gctx, f)
        gctx.listeners = [listeners.new_listener(gctx, lst) for lst in gw.spec.listeners]
        for lc in gctx.listeners:
            listeners.check_listener(ctx, lc)
            listeners.check_client_validation(ctx, lc)
        gctx.findings = f
        result.append(gctx)

    by_key = {g.key: g for g in result}
    ls_findings = _resolve_listener_sets(ctx, by_key)
    host_ports = None if kube else binds.PortBook(ctx.options)
    # Kubernetes mode: only the Gateways of a merged class share binds (their one Deployment)
    class_ports: dict[str, binds.PortBook] = {}
    for gctx in result:
        sets = [lf for lf in ls_findings if lf.gateway is gctx and lf.allowed]
        listeners.resolve_conflicts(gctx.listeners, [lf.listeners for lf in sets])
        f = gctx.findings
        ports = host_ports
        if kube and gctx.node != gctx.name:
            ports = class_ports.setdefault(gctx.node, binds.PortBook(ctx.options, host=False))
        if (
            ports is not None
            and f.not_accepted is None
            and f.not_programmed is None
            and gctx.address
        ):
            ports.claim(gctx, [*gctx.listeners, *(lc for lf in sets for lc in lf.listeners)])
        if (
            f.not_accepted is None
            and gctx.listeners
            and not any(_valid(lc) for lc in gctx.listeners)
        ):
            f.not_accepted = c.gateway_no_valid_listener()
            port_problem = binds.first_port_problem(gctx.listeners)
            if port_problem is not None:
                f.not_accepted = c.extended(f.not_accepted, port_problem.message)
        gctx.accepted = f.not_accepted is None
        # Serving: its configuration is generated. Programmed: and the data plane took it.
        gctx.serving = gctx.accepted and bool(gctx.address) and f.not_programmed is None
        if gctx.serving and f.address_pending is not None:
            f.not_programmed = f.address_pending
            gctx.programmed = False
        else:
            gctx.programmed = gctx.serving and _dataplane_ok(ctx, gctx, f)
        for lc in gctx.listeners:
            listeners.finish(lc)
        for lf in sets:
            for lc in lf.listeners:
                listeners.finish(lc)
            if any(lc.accepted and lc.refs_problem is None for lc in lf.listeners):
                gctx.listener_sets.append((lf.listener_set, lf.listeners))
        tlsoverlap.mark_overlapping([*gctx.listeners, *(lc for lf in sets for lc in lf.listeners)])
    ctx.listener_set_results = ls_findings
    return result


def _parameters(
    ctx: Ctx, gctx: GatewayCtx, defaults: m.GatewayParametersSpec | None, merged: bool
) -> c.Condition | None:
    """Resolves the Gateway's Envoy, Kubernetes and telemetry settings (its parameters over its
    class's;
    in a merged class the one Envoy runs with the class's); the InvalidParameters condition
    when its own reference cannot be used."""
    infra = gctx.gateway.spec.infrastructure
    ref = infra.parameters_ref if infra is not None else None
    own = None
    if ref is not None:
        found = parameters.lookup(
            ctx, ref.group, ref.kind, gctx.gateway.metadata.namespace, ref.name
        )
        if isinstance(found, str):
            return c.gateway_invalid_parameters(f"infrastructure.{found}")
        if found.merge_gateways is not None:
            return c.gateway_invalid_parameters(
                f"infrastructure.parametersRef {ref.name}: mergeGateways is a GatewayClass setting"
                " (its parametersRef's); a Gateway's own parameters cannot set it"
            )
        own = found
    spec = parameters.merge(defaults, own)
    # A merged class's one Envoy runs with the class's settings, whatever a Gateway's own say.
    shared = defaults if merged and defaults is not None else spec
    gctx.envoy = parameters.envoy_settings(shared, ctx.options.default_concurrency)
    gctx.kubernetes = parameters.kubernetes_settings(spec)
    gctx.telemetry = parameters.telemetry_settings(shared, ctx.options)
    return None


def _valid(lc: ListenerCtx) -> bool:
    return lc.not_accepted is None and lc.conflict is None


def _dataplane_ok(ctx: Ctx, gctx: GatewayCtx, f: _GatewayFindings) -> bool:
    if ctx.options.dataplane is None:
        return True
    state = ctx.options.dataplane.get(gctx.node)
    if state is not None and state.error:
        f.not_programmed = c.gateway_envoy_rejected(state.error, state.rejected_by)
        return False
    if state is not None and (state.running or state.waiting):  # Envoy pods: every one of them
        scaling = gctx.kubernetes.autoscaling
        expected = max(
            scaling.min_replicas if scaling is not None else gctx.kubernetes.replicas,
            len(state.running) + len(state.waiting),
        )
        if state.acked and not state.waiting and len(state.running) >= expected:
            return True
        f.not_programmed = c.gateway_pods_waiting(len(state.running), expected, state.waiting)
        return False
    if state is None or not state.acked:
        f.not_programmed = c.gateway_waiting_for_envoy()
        return False
    return True


def _resolve_backend_client_cert(ctx: Ctx, gctx: GatewayCtx, f: _GatewayFindings) -> None:
    tls = gctx.gateway.spec.tls
    ref = (
        tls.backend.client_certificate_ref if tls is not None and tls.backend is not None else None
    )
    if ref is None:
        return
    gw_ns = gctx.gateway.metadata.namespace
    ns = ref.namespace or gw_ns
    where = f"clientCertificateRef {ref.kind} {ns}/{ref.name}"
    if ref.group != "" or ref.kind != "Secret":
        f.refs_problem = c.gateway_invalid_client_certificate_ref(
            f"{where}: only core Secrets are supported"
        )
        return
    if not ctx.reference_allowed(G, "Gateway", gw_ns, "", "Secret", ns, ref.name):
        f.refs_problem = c.gateway_client_certificate_ref_not_permitted(
            f"{where} is in another namespace and no ReferenceGrant allows it"
        )
        return
    secret = ctx.snapshot.secrets.get((ns, ref.name))
    if secret is None:
        f.refs_problem = c.gateway_invalid_client_certificate_ref(f"{where} does not exist")
        return
    pair = certs.tls_keypair(secret)
    if isinstance(pair, str):
        f.refs_problem = c.gateway_invalid_client_certificate_ref(f"{where}: {pair}")
        return
    gctx.backend_client_cert = ir.Certificate(
        name=f"{ns}/{ref.name}", cert_pem=pair[0], key_pem=pair[1]
    )


# ---------------------------------------------------------------- ListenerSets


def _resolve_listener_sets(
    ctx: Ctx, gateways: dict[tuple[str, str], GatewayCtx]
) -> list[_ListenerSetFindings]:
    out: list[_ListenerSetFindings] = []
    for ls in sorted(ctx.snapshot.listener_sets.values(), key=sort_key):
        ref = ls.spec.parent_ref
        if ref.group != G or ref.kind != "Gateway":
            continue
        gctx = gateways.get((ref.namespace or ls.metadata.namespace, ref.name))
        if gctx is None:
            continue  # not a Gateway of ours (or none at all): not ours to report on
        allowed, message = _listener_set_allowed(ctx, gctx.gateway, ls)
        lcs = [listeners.new_listener(gctx, lst, ls) for lst in ls.spec.listeners]
        if allowed:
            for lc in lcs:
                listeners.check_listener(ctx, lc)
                listeners.check_client_validation(ctx, lc)
        out.append(_ListenerSetFindings(ls, gctx, allowed, message, lcs))
    return out


def _listener_set_allowed(ctx: Ctx, gw: m.Gateway, ls: m.ListenerSet) -> tuple[bool, str]:
    allowed = gw.spec.allowed_listeners
    frm = allowed.namespaces.from_ if allowed is not None else "None"
    ns = ls.metadata.namespace
    if frm == "All":
        return True, ""
    if frm == "Same":
        if ns == gw.metadata.namespace:
            return True, ""
        return (
            False,
            f"Gateway {gw.metadata.namespace}/{gw.metadata.name} allows ListenerSets only from its "
            "own namespace",
        )
    if frm == "Selector":
        selector = allowed.namespaces.selector if allowed is not None else None
        if label_selector_matches(selector, ctx.labels_of_namespace(ns)):
            return True, ""
        return False, f"namespace {ns} does not match the Gateway's allowedListeners selector"
    return False, f"Gateway {gw.metadata.namespace}/{gw.metadata.name} does not allow ListenerSets"


# ---------------------------------------------------------------- status


def write_gateway_statuses(ctx: Ctx, gateways: list[GatewayCtx]) -> None:
    for gctx in gateways:
        f = gctx.findings if isinstance(gctx.findings, _GatewayFindings) else _GatewayFindings()
        ctx.statuses[("Gateway", *gctx.key)] = _gateway_status(
            gctx, f, ctx.options.address_mode == "kubernetes"
        )
    for lf in ctx.listener_set_results:
        ls = lf.listener_set
        ctx.statuses[("ListenerSet", ls.metadata.namespace, ls.metadata.name)] = (
            _listener_set_status(lf)
        )


def _gateway_status(gctx: GatewayCtx, f: _GatewayFindings, kube: bool) -> dict[str, Any]:
    gw = gctx.gateway
    gen = gw.metadata.generation
    invalid = [lc.name for lc in gctx.listeners if not _valid(lc) or lc.refs_problem is not None]
    if f.not_accepted is not None:
        accepted = f.not_accepted
    elif invalid:
        accepted = c.gateway_listeners_not_valid(invalid)
    else:
        accepted = c.gateway_accepted()
    if gctx.programmed:
        programmed = c.gateway_programmed()
    elif f.not_accepted is not None:
        programmed = c.gateway_not_accepted_invalid(f.not_accepted)
    else:
        programmed = f.not_programmed or c.gateway_not_programmed()
    conds = [accepted, programmed]
    if (
        gw.spec.tls is not None
        and gw.spec.tls.backend is not None
        and gw.spec.tls.backend.client_certificate_ref is not None
    ):
        conds.append(f.refs_problem or c.gateway_refs_resolved())
    if any(
        lc.tls is not None
        and lc.tls.client_validation is not None
        and lc.tls.client_validation.mode == "AllowInsecureFallback"
        for lc in gctx.all_listeners()
    ):
        conds.append(c.gateway_insecure_frontend_validation())
    # The listeners' Programmed=False when the Gateway's doing.
    parent = (
        c.listener_pending()
        if gctx.programmed
        else c.listener_gateway_not_programmed(f.not_programmed)
    )
    status: dict[str, Any] = {}
    if kube:  # the Service's addresses, whenever it has some
        if gctx.accepted and gctx.service_addresses:
            status["addresses"] = [{"type": t, "value": v} for t, v in gctx.service_addresses]
    elif gctx.address and gctx.accepted and f.not_programmed is None:
        status["addresses"] = [{"type": "IPAddress", "value": gctx.address}]
    status["conditions"] = [c.to_status(cond, gen) for cond in conds]
    status["listeners"] = [listeners.listener_status(lc, gen, parent) for lc in gctx.listeners]
    if gw.spec.allowed_listeners is not None or gctx.listener_sets:
        status["attachedListenerSets"] = len(gctx.listener_sets)
    return status


def _listener_set_status(lf: _ListenerSetFindings) -> dict[str, Any]:
    ls = lf.listener_set
    gen = ls.metadata.generation
    if not lf.allowed:
        not_allowed = c.listener_set_not_allowed(lf.message)
        return {
            "conditions": [
                c.to_status(not_allowed, gen),
                c.to_status(c.restated(not_allowed, c.PROGRAMMED, False), gen),
            ],
            "listeners": [],
        }
    gctx = lf.gateway
    good = [lc for lc in lf.listeners if lc.accepted and lc.refs_problem is None]
    conds: list[c.Condition] = []
    if not gctx.accepted or not good:
        not_accepted = (
            c.listener_set_parent_not_accepted(gctx.name)
            if not gctx.accepted
            else c.listener_set_no_valid_listener()
        )
        conds += [not_accepted, c.restated(not_accepted, c.PROGRAMMED, False)]
    else:
        bad = [lc.name for lc in lf.listeners if lc not in good]
        conds.append(c.listener_set_listeners_not_valid(bad) if bad else c.listener_set_accepted())
        if gctx.programmed:
            conds.append(c.listener_set_programmed())
        else:
            conds.append(c.listener_set_parent_not_programmed(gctx.name))
    pending = c.listener_pending()
    return {
        "conditions": [c.to_status(cond, gen) for cond in conds],
        "listeners": [listeners.listener_status(lc, gen, pending) for lc in lf.listeners],
    }


# ---------------------------------------------------------------- infrastructure IR


def build_infra(ctx: Ctx, gateways: list[GatewayCtx]) -> dict[str, ir.InfraGateway]:
    out: dict[str, ir.InfraGateway] = {}
    for gctx in gateways:
        if not gctx.serving:
            continue
        ports: dict[tuple[int, str], list[str]] = {}
        for lc in gctx.all_listeners():
            if lc.ready:
                proto = "UDP" if lc.protocol == "UDP" else "TCP"
                ports.setdefault((lc.port, proto), []).append(lc.name)
        infra = gctx.gateway.spec.infrastructure
        out[gctx.name] = ir.InfraGateway(
            name=gctx.name,
            namespace=gctx.gateway.metadata.namespace,
            gateway_name=gctx.gateway.metadata.name,
            gateway_class=gctx.gateway.spec.gateway_class_name,
            uid=gctx.gateway.metadata.uid,
            address=gctx.address,
            ports=tuple(
                ir.InfraPort(name=",".join(names), port=p, protocol=proto)
                for (p, proto), names in sorted(ports.items())
            ),
            labels=dict(infra.labels) if infra is not None else {},
            annotations=dict(infra.annotations) if infra is not None else {},
            requested_addresses=gctx.requested_addresses,
            envoy=gctx.envoy,
            kubernetes=gctx.kubernetes,
        )
    return out
