"""``gateweave explain``: why a route is or is not attached, why a Gateway's listeners are or are
not
programmed, what an Envoy Gateway Backend resolves to and which routes use it, and which Envoy
Gateway policies govern a route or Gateway (which scope, by which precedence rule) and which lost.

The explanation re-runs the translation on the same snapshot and reads the same decisions
(listener findings, parentRef verdicts) that produced the status, so it cannot disagree with it.
"""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.api.kinds import POLICY_KINDS, ROUTE_KINDS
from gateweave.snapshot import Snapshot
from gateweave.translate import egbackend
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx
from gateweave.translate.core import run_pipeline
from gateweave.translate.options import TranslateOptions
from gateweave.translate.parentrefs import OK, ParentIndex
from gateweave.translate.policies.attach import PolicyIndex, PolicyReport, Scope

EXPLAINABLE = ("Gateway", "ListenerSet", *ROUTE_KINDS, "Backend", *POLICY_KINDS)


def explain(
    snapshot: Snapshot, options: TranslateOptions, kind: str, namespace: str, name: str
) -> list[str]:
    """Lines of explanation for one object; the first line says what it is."""
    if kind not in EXPLAINABLE:
        return [f"explain supports {', '.join(EXPLAINABLE)}; not {kind}"]
    obj = snapshot.by_kind(kind).get((namespace, name))
    if obj is None:
        return [f"{kind} {namespace}/{name} not found"]
    result, ctx, gateways = run_pipeline(snapshot, options)
    status = result.statuses.get((kind, namespace, name))
    if kind in ROUTE_KINDS:
        return _explain_route(ctx, gateways, kind, obj, status) + _route_policies(
            ctx.policies, gateways, kind, obj
        )
    if kind in POLICY_KINDS:
        return _explain_policy(ctx.policies, kind, obj, status)
    if kind == "Backend":
        return _explain_backend(ctx, obj, status)
    if kind == "Gateway":
        gw = next((g for g in gateways if g.key == (namespace, name)), None)
        if gw is None:
            return [
                f"Gateway {namespace}/{name}: its GatewayClass {obj.spec.gateway_class_name!r} is "
                "not one of ours "
                f"(controllerName {options.controller_name}), so gateweave ignores it"
            ]
        return _explain_gateway(gw, status or {}) + _gateway_policies(ctx.policies, gw)
    return _explain_listener_set(ctx, gateways, obj, status)


def _conditions(conds: list[dict[str, Any]], indent: str) -> list[str]:
    return [f"{indent}{c['type']}={c['status']} ({c['reason']}): {c['message']}" for c in conds]


def _explain_route(
    ctx: Ctx, gateways: list[GatewayCtx], kind: str, route: Any, status: dict[str, Any] | None
) -> list[str]:
    ns, name = route.metadata.namespace, route.metadata.name
    lines = [f"{kind} {ns}/{name} (generation {route.metadata.generation})"]
    hostnames = getattr(route.spec, "hostnames", ())
    if hostnames:
        lines.append(f"  hostnames: {', '.join(hostnames)}")
    rejected = ctx.options.rejected.get((kind, ns, name))
    if rejected is not None:
        lines.append(
            f"  quarantined: left out of the Envoy configuration until it changes: {rejected}"
        )
    parents = ParentIndex(ctx, gateways, explain=True)
    entries = (status or {}).get("parents", [])
    if not route.spec.parent_refs:
        lines.append("  no parentRefs: the route attaches to nothing")
    for i, pref in enumerate(route.spec.parent_refs):
        target = f"{pref.kind} {pref.namespace or ns}/{pref.name}"
        if pref.section_name is not None:
            target += f" sectionName={pref.section_name}"
        if pref.port is not None:
            target += f" port={pref.port}"
        lines.append(f"  parentRef[{i}]: {target}")
        outcome = parents.resolve(kind, route, pref)
        if outcome is None:
            lines.append(
                f"    not a parent of {ctx.options.controller_name} (missing, or of another "
                "controller): not ours to judge"
            )
            continue
        if not outcome.verdicts:
            why = outcome.not_accepted
            lines.append(
                f"    rejected: {why.reason}: {why.message}" if why is not None else "    rejected"
            )
        for v in outcome.verdicts:
            lines.append(
                f"    listener {_listener_name(v.listener)}: "
                f"{'ATTACHED' if v.stage == OK else 'rejected by ' + v.stage}: {v.why}"
            )
        entry = next((e for e in entries if e.get("parentRef") == outcome.ref), None)
        if entry is not None:
            lines.extend(_conditions(entry["conditions"], "    "))
    return lines


def _listener_name(lc: ListenerCtx) -> str:
    where = (
        f"ListenerSet {lc.listener_set.metadata.namespace}/{lc.listener_set.metadata.name}/"
        if lc.listener_set
        else ""
    )
    return f"{where}{lc.name} ({lc.protocol} :{lc.port}{' ' + lc.hostname if lc.hostname else ''})"


def _explain_listener(lc: ListenerCtx, entry: dict[str, Any] | None) -> list[str]:
    lines = [
        f"  listener {_listener_name(lc)}: "
        f"{'programmed' if lc.ready and lc.gateway.programmed else 'NOT programmed'}"
    ]
    findings = (
        ("not accepted", lc.not_accepted),
        ("conflicted", lc.conflict),
        ("references", lc.refs_problem),
        ("overlapping TLS configuration", lc.overlap),
    )
    for label, finding in findings:
        if finding is not None:
            lines.append(f"    {label}: {finding.reason}: {finding.message}")
    if (
        lc.not_accepted is None
        and lc.conflict is None
        and lc.refs_problem is None
        and not lc.gateway.programmed
    ):
        lines.append("    the Gateway itself is not programmed")
    kinds = ", ".join(k for _, k in lc.supported_kinds) or "none"
    ns = lc.listener.allowed_routes.namespaces
    lines.append(f"    takes {kinds} from namespaces: {ns.from_}")
    for att in lc.routes:
        meta = att.route.metadata
        hosts = ", ".join(att.hostnames) if att.hostnames else "(any host)"
        lines.append(f"    attached: {att.kind} {meta.namespace}/{meta.name} serving {hosts}")
    if entry is not None:
        lines.extend(_conditions(entry.get("conditions", []), "    "))
    return lines


def _explain_gateway(gw: GatewayCtx, status: dict[str, Any]) -> list[str]:
    lines = [
        f"Gateway {gw.name} (class {gw.gateway.spec.gateway_class_name}, generation "
        f"{gw.gateway.metadata.generation})"
    ]
    lines.append(f"  address: {gw.address or 'none assigned'}")
    lines.extend(_conditions(status.get("conditions", []), "  "))
    by_name = {e["name"]: e for e in status.get("listeners", [])}
    for lc in gw.listeners:
        lines.extend(_explain_listener(lc, by_name.get(lc.name)))
    for ls, lcs in gw.listener_sets:
        lines.append(f"  ListenerSet {ls.metadata.namespace}/{ls.metadata.name} is attached")
        for lc in lcs:
            lines.extend(_explain_listener(lc, None))
    return lines


def _explain_listener_set(
    ctx: Ctx, gateways: list[GatewayCtx], ls: Any, status: dict[str, Any] | None
) -> list[str]:
    lines = [
        f"ListenerSet {ls.metadata.namespace}/{ls.metadata.name} (generation "
        f"{ls.metadata.generation})"
    ]
    if status is None:
        ref = ls.spec.parent_ref
        lines.append(
            f"  parent {ref.kind} {ref.namespace or ls.metadata.namespace}/{ref.name} is not a "
            "Gateway of ours"
        )
        return lines
    lines.extend(_conditions(status.get("conditions", []), "  "))
    found = next((lf for lf in ctx.listener_set_results if lf.listener_set is ls), None)
    by_name = {e["name"]: e for e in status.get("listeners", [])}
    if found is not None:
        if not found.allowed:
            lines.append(f"  not allowed: {found.message}")
        for lc in found.listeners:
            lines.extend(_explain_listener(lc, by_name.get(lc.name)))
    return lines


def _explain_backend(ctx: Ctx, backend: m.Backend, status: dict[str, Any] | None) -> list[str]:
    ns, name = backend.metadata.namespace, backend.metadata.name
    lines = [f"Backend {ns}/{name} (generation {backend.metadata.generation})"]
    verdict = egbackend.judge(ctx, backend)
    if verdict.accepted:
        how = (
            "Envoy resolves its host names (getaddrinfo, as its TTL says)"
            if any(ep.type == ir.ENDPOINT_FQDN for ep in verdict.endpoints)
            else "addresses sent to Envoy over EDS"
        )
        lines.append(f"  endpoints ({how}):")
        for ep in verdict.endpoints:
            where = (
                f"unix:{ep.address}" if ep.type == ir.ENDPOINT_UNIX else f"{ep.address}:{ep.port}"
            )
            lines.append(
                f"    {ep.type} {where}" + (f" (hostname {ep.hostname})" if ep.hostname else "")
            )
        if backend.spec.app_protocols:
            lines.append(f"  appProtocols: {', '.join(backend.spec.app_protocols)}")
        if verdict.tls is not None:
            tls = verdict.tls
            check = (
                "not verified"
                if tls.insecure_skip_verify
                else (
                    "verified against "
                    + ("its caCertificateRefs" if tls.ca_pem else "the system CAs")
                )
            )
            sni = f"SNI {tls.sni}" if tls.sni else "SNI from each request's Host"
            client = ", with its client certificate" if tls.client_cert_pem else ""
            lines.append(f"  TLS: {sni}, server certificate {check}{client}")
    else:
        lines.append("  not usable:")
        lines.extend(f"    {problem}" for problem in verdict.problems)
    users = _backend_users(ctx.snapshot, ns, name)
    for kind, route in users:
        lines.append(f"  referred to by {kind} {route.metadata.namespace}/{route.metadata.name}")
    if status is None:
        lines.append(
            f"  no route with a parent of {ctx.options.controller_name} refers to it (with a "
            "ReferenceGrant "
            "where needed): gateweave reports nothing on it"
        )
    else:
        lines.extend(_conditions(status.get("conditions", []), "  "))
    return lines


def _backend_users(snapshot: Snapshot, ns: str, name: str) -> list[tuple[str, Any]]:
    """The routes with a backendRef (or a mirror's) naming Backend ``ns/name``, in kind then name
    order.
    """
    out: list[tuple[str, Any]] = []
    for kind in ROUTE_KINDS:
        for key in sorted(snapshot.by_kind(kind)):
            route = snapshot.by_kind(kind)[key]
            refs: list[Any] = []
            for rule in route.spec.rules:
                refs.extend(rule.backend_refs)
                for f in getattr(rule, "filters", ()):
                    if f.request_mirror is not None:
                        refs.append(f.request_mirror.backend_ref)
            if any(
                r.group == m.ENVOY_GATEWAY_GROUP
                and r.kind == "Backend"
                and r.name == name
                and (r.namespace or route.metadata.namespace) == ns
                for r in refs
            ):
                out.append((kind, route))
    return out


# ---------------------------------------------------------------- Envoy Gateway policies


def _who(rep: PolicyReport) -> str:
    meta = rep.policy.metadata
    return f"{rep.kind} {meta.namespace}/{meta.name}"


def _governs(hit: tuple[Scope, PolicyReport] | None) -> str:
    if hit is None:
        return "none"
    scope, rep = hit
    how = f"{_who(rep)}, holding the {scope.describe()} (the most specific scope held)"
    return how if rep.applied else f"{how}, NOT applied: {rep.refusal}"


def _lost_at(index: PolicyIndex, want: Any) -> list[str]:
    """Policies that targeted a scope ``want`` accepts and did not take it, and why."""
    return [
        f"    {_who(rep)} lost the {scope.describe()}: {why}"
        for rep in index.reports
        for scope, why in rep.lost
        if want(scope)
    ]


def _route_policies(
    index: PolicyIndex | None, gateways: list[GatewayCtx], kind: str, route: Any
) -> list[str]:
    if index is None or not index.reports:
        return []
    lines = ["  policies:"]
    rules = list(
        dict.fromkeys(getattr(rule, "name", None) for rule in getattr(route.spec, "rules", ()))
    ) or [None]
    for gw in gateways:
        for lc in gw.all_listeners():
            if not any(att.route is route for att in lc.routes):
                continue
            for pk in index.holders:
                for rule in rules:
                    where = f"listener {_listener_name(lc)}" + (f", rule {rule}" if rule else "")
                    lines.append(
                        f"    {pk} on {where}: "
                        f"{_governs(index.held_for_route(pk, kind, route, rule, lc))}"
                    )
    meta = route.metadata
    lines += _lost_at(
        index, lambda s: (s.kind, s.namespace, s.name) == (kind, meta.namespace, meta.name)
    )
    return lines if len(lines) > 1 else []


def _gateway_policies(index: PolicyIndex | None, gw: GatewayCtx) -> list[str]:
    if index is None or not index.reports:
        return []
    lines = ["  policies:"]
    for lc in gw.all_listeners():
        for pk in index.holders:
            lines.append(
                f"    {pk} on listener {_listener_name(lc)}: "
                f"{_governs(index.held_for_listener(pk, lc))}"
            )
    lines += _lost_at(index, lambda s: s.kind == "Gateway" and (s.namespace, s.name) == gw.key)
    return lines if len(lines) > 1 else []


def _explain_policy(
    index: PolicyIndex | None, kind: str, policy: Any, status: dict[str, Any] | None
) -> list[str]:
    meta = policy.metadata
    lines = [f"{kind} {meta.namespace}/{meta.name} (generation {meta.generation})"]
    rep = next(
        (r for r in (index.reports if index is not None else []) if r.policy is policy), None
    )
    if rep is None:
        return lines
    if not rep.applied:
        lines.append(f"  NOT applied: {rep.refusal}")
    lines += [f"  holds the {scope.describe()}" for scope in rep.held]
    lines += [f"  lost the {scope.describe()}: {why}" for scope, why in rep.lost]
    lines += [f"  target {what}: not applied there" for what in rep.missing]
    if not (rep.held or rep.lost or rep.missing):
        lines.append("  its targetSelectors select nothing of ours")
    lines += [
        f"  overridden for the {scope.describe()} (held by another {kind})"
        for scope in rep.overridden_by
    ]
    for entry in (status or {}).get("ancestors", []):
        ref = entry["ancestorRef"]
        section = f" sectionName={ref['sectionName']}" if ref.get("sectionName") else ""
        lines.append(f"  ancestor {ref['kind']} {ref['namespace']}/{ref['name']}{section}:")
        lines.extend(_conditions(entry["conditions"], "    "))
    return lines
