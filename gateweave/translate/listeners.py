"""Listeners (of Gateways and ListenerSets): protocol, route kinds, TLS, client validation,
conflicts.

Each check records its finding on the ListenerCtx as the condition it means (``not_accepted``,
``refs_problem``, ``conflict``; tlsoverlap.py sets ``overlap``); :func:`listener_status` turns the
findings into the listener's conditions.
"""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import certs
from gateweave.translate import conditions as c
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx

G = m.GATEWAY_GROUP

# Protocol -> the route kinds it can carry (by default and at most).
ROUTE_KINDS_BY_PROTOCOL: dict[str, tuple[str, ...]] = {
    "HTTP": ("HTTPRoute", "GRPCRoute"),
    "HTTPS": ("HTTPRoute", "GRPCRoute"),
    "TLS": ("TLSRoute",),
    "TCP": ("TCPRoute",),
    "UDP": ("UDPRoute",),
}

# Protocols that can share one port (one Envoy listener): HTTPS and TLS share via SNI.
FAMILY = {"HTTP": "HTTP", "HTTPS": "TLS", "TLS": "TLS", "TCP": "TCP", "UDP": "UDP"}


def check_listener(ctx: Ctx, lc: ListenerCtx) -> None:
    """Protocol, allowed route kinds, certificates and client validation of one listener."""
    listener = lc.listener
    if listener.protocol not in ROUTE_KINDS_BY_PROTOCOL:
        lc.not_accepted = c.listener_unsupported_protocol(
            f"protocol {listener.protocol!r} is not supported (HTTP, HTTPS, TLS, TCP, UDP are)"
        )
        return
    _check_kinds(lc)
    if listener.protocol in ("HTTPS", "TLS"):
        _check_tls(ctx, lc)


def _check_kinds(lc: ListenerCtx) -> None:
    allowed = ROUTE_KINDS_BY_PROTOCOL[lc.listener.protocol]
    kinds = lc.listener.allowed_routes.kinds
    if kinds is None:
        lc.supported_kinds = [(G, k) for k in allowed]
        return
    invalid: list[str] = []
    for rk in kinds:
        if rk.group == G and rk.kind in allowed:
            if (G, rk.kind) not in lc.supported_kinds:
                lc.supported_kinds.append((G, rk.kind))
        else:
            invalid.append(f"{rk.group}/{rk.kind}" if rk.group else rk.kind)
    if invalid:
        _refs_problem(
            lc,
            c.listener_invalid_route_kinds(
                f"route kinds {', '.join(invalid)} are not supported on a {lc.listener.protocol} "
                "listener"
            ),
        )


def _refs_problem(lc: ListenerCtx, problem: c.Condition) -> None:
    """Record a ResolvedRefs problem; the first one found decides
    the reason, messages accumulate.
    """
    lc.refs_problem = (
        problem if lc.refs_problem is None else c.extended(lc.refs_problem, problem.message)
    )


def _owner(lc: ListenerCtx) -> tuple[str, str]:
    """(kind, namespace) of the object the listener is defined in, for ReferenceGrant checks."""
    if lc.listener_set is not None:
        return "ListenerSet", lc.listener_set.metadata.namespace
    return "Gateway", lc.gateway.gateway.metadata.namespace


def _check_tls(ctx: Ctx, lc: ListenerCtx) -> None:
    tls = lc.listener.tls
    mode = tls.mode if tls is not None else "Terminate"
    if lc.listener.protocol == "TLS" and mode == "Passthrough":
        return
    if lc.listener.protocol == "HTTPS" and mode != "Terminate":
        # The CRD rejects this; never reached from validated input.
        lc.not_accepted = c.listener_unsupported_protocol("HTTPS listeners terminate TLS")
        return
    owner_kind, owner_ns = _owner(lc)
    found: list[ir.Certificate] = []
    refs = tls.certificate_refs if tls is not None else ()
    if not refs:
        _refs_problem(
            lc,
            c.listener_invalid_certificate_ref("TLS termination needs at least one certificateRef"),
        )
    for ref in refs:
        ns = ref.namespace or owner_ns
        where = f"{ref.kind} {ns}/{ref.name}"
        if ref.group != "" or ref.kind != "Secret":
            _refs_problem(
                lc,
                c.listener_invalid_certificate_ref(
                    f"certificateRef {ref.group}/{ref.kind} {ref.name}: only core Secrets are "
                    "supported"
                ),
            )
            continue
        if not ctx.reference_allowed(G, owner_kind, owner_ns, "", "Secret", ns, ref.name):
            _refs_problem(
                lc,
                c.listener_ref_not_permitted(
                    f"{where} is in another namespace and no ReferenceGrant allows it"
                ),
            )
            continue
        secret = ctx.snapshot.secrets.get((ns, ref.name))
        if secret is None:
            _refs_problem(lc, c.listener_invalid_certificate_ref(f"{where} does not exist"))
            continue
        pair = certs.tls_keypair(secret)
        if isinstance(pair, str):
            _refs_problem(lc, c.listener_invalid_certificate_ref(f"{where}: {pair}"))
            continue
        found.append(ir.Certificate(name=f"{ns}/{ref.name}", cert_pem=pair[0], key_pem=pair[1]))
    if found:
        alpn = ("h2", "http/1.1") if lc.listener.protocol == "HTTPS" else ()
        lc.tls = ir.TLSTermination(certificates=tuple(found), alpn=alpn)


def frontend_validation(gw: m.Gateway, port: int) -> m.FrontendTLSValidation | None:
    tls = gw.spec.tls
    if tls is None or tls.frontend is None:
        return None
    for pp in tls.frontend.per_port:
        if pp.port == port:
            return pp.tls.validation
    return tls.frontend.default.validation


def check_client_validation(ctx: Ctx, lc: ListenerCtx) -> None:
    """Gateway spec.tls.frontend: client certificate validation of an HTTPS listener."""
    if lc.listener.protocol != "HTTPS" or lc.not_accepted is not None:
        return
    validation = frontend_validation(lc.gateway.gateway, lc.port)
    if validation is None or not validation.ca_certificate_refs:
        return
    gw_ns = lc.gateway.gateway.metadata.namespace
    bundles: list[str] = []
    for ref in validation.ca_certificate_refs:
        ns = ref.namespace or gw_ns
        where = f"{ref.kind} {ns}/{ref.name}"
        if ref.group != "" or ref.kind not in ("ConfigMap", "Secret"):
            _refs_problem(
                lc,
                c.listener_invalid_ca_certificate_kind(
                    f"caCertificateRef {ref.group}/{ref.kind} {ref.name}: only ConfigMaps (and "
                    "Secrets) are supported"
                ),
            )
            continue
        if not ctx.reference_allowed(G, "Gateway", gw_ns, "", ref.kind, ns, ref.name):
            _refs_problem(
                lc,
                c.listener_ref_not_permitted(
                    f"{where} is in another namespace and no ReferenceGrant allows it"
                ),
            )
            continue
        obj: Any = (
            ctx.snapshot.config_maps if ref.kind == "ConfigMap" else ctx.snapshot.secrets
        ).get((ns, ref.name))
        if obj is None:
            _refs_problem(lc, c.listener_invalid_ca_certificate_ref(f"{where} does not exist"))
            continue
        pem = certs.ca_from_object(obj)
        if not pem:
            _refs_problem(
                lc,
                c.listener_invalid_ca_certificate_ref(
                    f"{where} has no valid PEM certificates under ca.crt"
                ),
            )
            continue
        bundles.append(pem)
    if not bundles:
        lc.not_accepted = c.listener_no_valid_ca_certificate(
            "none of the client CA certificate references could be used"
        )
        return
    if lc.tls is not None:
        joined = "".join(b if b.endswith("\n") else b + "\n" for b in bundles)
        lc.tls = ir.TLSTermination(
            certificates=lc.tls.certificates,
            client_validation=ir.ClientValidation(ca_pem=joined, mode=validation.mode),
            alpn=lc.tls.alpn,
        )


def _hostname_key(lc: ListenerCtx) -> str:
    if FAMILY[lc.protocol] in ("TCP", "UDP"):
        return ""
    return lc.hostname or ""


def resolve_conflicts(own: list[ListenerCtx], listener_sets: list[list[ListenerCtx]]) -> None:
    """Mark indistinct listeners Conflicted.

    Within one source - the Gateway's own listeners, or one ListenerSet's - no conflicting
    listener wins: "The implementation MUST NOT pick one conflicting Listener as the winner.
    ALL indistinct Listeners must not be accepted for processing" (gateway_types.go). Between
    sources, precedence decides (the Gateway, then ListenerSets in precedence order): a
    ListenerSet listener that conflicts with one a higher-precedence source already holds is
    Conflicted, and the earlier one keeps its port.
    """
    _mark_indistinct([lc for lc in own if lc.not_accepted is None])
    established: dict[tuple[int, bool], tuple[str, set[str]]] = {}
    for lc in own:
        if lc.not_accepted is None and lc.conflict is None:
            _establish(established, lc)
    for group in listener_sets:
        candidates: list[ListenerCtx] = []
        for lc in group:
            if lc.not_accepted is not None:
                continue
            is_udp = FAMILY[lc.protocol] == "UDP"
            slot = established.get((lc.port, is_udp))
            if slot is not None:
                family, hosts = slot
                if family != FAMILY[lc.protocol]:
                    _conflict(
                        lc,
                        c.listener_protocol_conflict(
                            f"port {lc.port} is already used by a {family} listener of higher "
                            "precedence"
                        ),
                    )
                    continue
                if _hostname_key(lc) in hosts:
                    _conflict(
                        lc,
                        c.listener_hostname_conflict(
                            f"port {lc.port} and hostname {lc.hostname or '(none)'} are already "
                            "used by a listener of higher precedence"
                        ),
                    )
                    continue
            candidates.append(lc)
        _mark_indistinct(candidates)
        for lc in candidates:
            if lc.conflict is None:
                _establish(established, lc)


def _mark_indistinct(listeners: list[ListenerCtx]) -> None:
    """Conflicted: every listener of one source that shares its port with a listener of an
    incompatible protocol, or its port and hostname with another listener."""
    by_port: dict[int, list[ListenerCtx]] = {}
    for lc in listeners:
        by_port.setdefault(lc.port, []).append(lc)
    for port, group in by_port.items():
        stream = [lc for lc in group if FAMILY[lc.protocol] != "UDP"]
        families = {FAMILY[lc.protocol] for lc in stream}
        if len(families) > 1:
            for lc in stream:
                _conflict(
                    lc,
                    c.listener_protocol_conflict(
                        f"port {port} is used by listeners of incompatible protocols"
                    ),
                )
        for subset in (stream, [lc for lc in group if FAMILY[lc.protocol] == "UDP"]):
            seen: dict[str, list[ListenerCtx]] = {}
            for lc in subset:
                if lc.conflict is None:
                    seen.setdefault(_hostname_key(lc), []).append(lc)
            for host, same in seen.items():
                if len(same) > 1:
                    for lc in same:
                        _conflict(
                            lc,
                            c.listener_hostname_conflict(
                                f"listeners {', '.join(x.name for x in same)} share port {port} "
                                f"and hostname {host or '(none)'}"
                            ),
                        )


def _establish(established: dict[tuple[int, bool], tuple[str, set[str]]], lc: ListenerCtx) -> None:
    is_udp = FAMILY[lc.protocol] == "UDP"
    _, hosts = established.setdefault((lc.port, is_udp), (FAMILY[lc.protocol], set()))
    hosts.add(_hostname_key(lc))


def _conflict(lc: ListenerCtx, conflict: c.Condition) -> None:
    if lc.conflict is None:
        lc.conflict = conflict


def finish(lc: ListenerCtx) -> None:
    """Derive whether routes may attach (accepted) and whether
    config is generated for it (ready).
    """
    lc.accepted = lc.not_accepted is None and lc.conflict is None
    lc.ready = (
        lc.accepted
        and lc.refs_problem is None
        and (lc.tls is not None or not lc.terminates_tls)
        and lc.gateway.serving
    )


def listener_status(
    lc: ListenerCtx, generation: int, parent_not_programmed: c.Condition
) -> dict[str, Any]:
    """The status entry of one listener (Gateway status.listeners or ListenerSet status.listeners).

    ``parent_not_programmed``: its Programmed=False condition when nothing about the listener
    itself stops it (its Gateway's doing)."""
    if lc.not_accepted is not None:
        accepted = lc.not_accepted
    elif lc.conflict is not None:
        accepted = c.restated(lc.conflict, c.ACCEPTED, False)
    else:
        accepted = c.listener_accepted()
    if lc.ready and lc.gateway.programmed:
        programmed = c.listener_programmed()
    elif lc.conflict is not None:
        # Programmed=False reasons are Invalid and Pending (gateway_types.go); the conflict's
        # own reason is on Conflicted and Accepted. A ListenerSet entry keeps it here too: the
        # v1.6 conformance tests ListenerSetProtocolConflict and ListenerSetHostnameConflict
        # require it there (and listenerset_types.go allows reasons beyond Invalid and
        # PortUnavailable).
        if lc.listener_set is None:
            programmed = c.listener_invalid(lc.conflict.message)
        else:
            programmed = c.restated(lc.conflict, c.PROGRAMMED, False)
    elif lc.not_accepted is not None:
        programmed = c.listener_invalid(lc.not_accepted.message)
    elif lc.refs_problem is not None:
        programmed = c.listener_invalid(lc.refs_problem.message)
    else:
        programmed = parent_not_programmed
    conds = [
        c.to_status(accepted, generation),
        c.to_status(programmed, generation),
        c.to_status(
            lc.refs_problem if lc.refs_problem is not None else c.listener_refs_resolved(),
            generation,
        ),
        c.to_status(
            lc.conflict if lc.conflict is not None else c.listener_no_conflicts(), generation
        ),
    ]
    if lc.overlap is not None:
        conds.append(c.to_status(lc.overlap, generation))
    return {
        "name": lc.name,
        "supportedKinds": [{"group": g, "kind": k} for g, k in lc.supported_kinds],
        "attachedRoutes": lc.attached_routes,
        "conditions": conds,
    }


def new_listener(
    gw: GatewayCtx, listener: m.Listener, listener_set: m.ListenerSet | None = None
) -> ListenerCtx:
    return ListenerCtx(gateway=gw, listener=listener, listener_set=listener_set)
