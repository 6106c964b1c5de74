"""BackendTLSPolicy: which Service ports are reached over TLS, how they are verified, and policy
status.

A policy targets Services (optionally one port, by ``sectionName``). When several policies
target the same Service port, the oldest (creationTimestamp, then namespace/name) wins and
the others are ``Accepted=False/Conflicted``; a policy with a ``sectionName`` is more specific
than one without, so they do not conflict. Status is written per ancestor: every one of our
Gateways that has an accepted route using a Service port the policy targets. (The Gateway's
``spec.tls.backend.clientCertificateRef``, resolved by the gateway side, is added to these
clusters per Gateway by the xDS IR assembly.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.attachment import ServicePortKey
from gateweave.translate.context import Ctx, GatewayCtx, sort_key

Target = tuple[str, str, str | None]  # (namespace, service, sectionName)


@dataclass
class PolicyResult:
    policy: m.BackendTLSPolicy
    tls: ir.UpstreamTLS | None  # None: the policy is invalid (no usable CA / bad settings)
    accepted: c.Condition  # before conflicts
    resolved: c.Condition
    conflicted: list[Target] = field(default_factory=list)


class BackendTLSIndex:
    """Every BackendTLSPolicy validated once; lookup by Service port."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.results: list[PolicyResult] = []
        self.by_target: dict[Target, PolicyResult] = {}
        for policy in sorted(ctx.snapshot.backend_tls_policies.values(), key=sort_key):
            res = _validate(ctx, policy)
            self.results.append(res)
            ns = policy.metadata.namespace
            for ref in policy.spec.target_refs:
                if ref.group not in ("", "core") or ref.kind != "Service":
                    continue
                target = (ns, ref.name, ref.section_name)
                if target in self.by_target:
                    res.conflicted.append(target)
                else:
                    self.by_target[target] = res

    def for_service_port(self, ns: str, name: str, port_name: str) -> PolicyResult | None:
        """The policy that governs a Service port: one naming the port wins over one for the whole
        Service.
        """
        if port_name:
            hit = self.by_target.get((ns, name, port_name))
            if hit is not None:
                return hit
        return self.by_target.get((ns, name, None))

    def write_statuses(self, gateways_using: dict[ServicePortKey, list[GatewayCtx]]) -> None:
        """Status of every BackendTLSPolicy: one ancestor entry per Gateway of ours that uses a
        target.
        """
        ctx = self.ctx
        for res in self.results:
            policy = res.policy
            ns = policy.metadata.namespace
            gen = policy.metadata.generation
            ancestors: dict[tuple[str, str], GatewayCtx] = {}
            for (sns, sname, sport), gws in gateways_using.items():
                if sns != ns:
                    continue
                for ref in policy.spec.target_refs:
                    if (
                        ref.group in ("", "core")
                        and ref.kind == "Service"
                        and ref.name == sname
                        and ref.section_name in (None, sport)
                    ):
                        for gw in gws:
                            ancestors[gw.key] = gw
            accepted = (
                c.policy_conflicted() if res.conflicted and res.accepted.status else res.accepted
            )
            conds = [c.to_status(accepted, gen), c.to_status(res.resolved, gen)]
            entries: list[dict[str, Any]] = [
                {
                    "ancestorRef": {
                        "group": m.GATEWAY_GROUP,
                        "kind": "Gateway",
                        "namespace": key[0],
                        "name": key[1],
                    },
                    "controllerName": ctx.options.controller_name,
                    "conditions": conds,
                }
                for key, _ in sorted(ancestors.items())
            ]
            ctx.statuses[("BackendTLSPolicy", ns, policy.metadata.name)] = {"ancestors": entries}


def _validate(ctx: Ctx, policy: m.BackendTLSPolicy) -> PolicyResult:
    v = policy.spec.validation
    ns = policy.metadata.namespace
    ok_acc = c.policy_accepted()
    ok_ref = c.policy_refs_resolved()
    sans = tuple(
        ir.SANMatch(type="DNS", value=s.hostname or "")
        if s.type == "Hostname"
        else ir.SANMatch(type="URI", value=s.uri or "")
        for s in v.subject_alt_names
    )
    if not v.hostname:
        return PolicyResult(
            policy, None, c.policy_invalid("validation.hostname is required"), ok_ref
        )
    if v.well_known_ca_certificates is not None:
        if v.ca_certificate_refs:
            msg = "caCertificateRefs and wellKnownCACertificates are mutually exclusive"
            return PolicyResult(policy, None, c.policy_invalid(msg), ok_ref)
        if v.well_known_ca_certificates != "System":
            msg = f"wellKnownCACertificates {v.well_known_ca_certificates} is not supported"
            return PolicyResult(policy, None, c.policy_invalid(msg), ok_ref)
        return PolicyResult(
            policy, ir.UpstreamTLS(sni=v.hostname, subject_alt_names=sans), ok_acc, ok_ref
        )
    pems: list[str] = []
    bad: c.Condition | None = None
    for ref in v.ca_certificate_refs:
        if ref.group not in ("", "core") or ref.kind != "ConfigMap":
            bad = bad or c.policy_invalid_kind(
                f"caCertificateRef {ref.group}/{ref.kind} {ref.name}: only ConfigMaps are supported"
            )
            continue
        cm = ctx.snapshot.config_maps.get((ns, ref.name))
        if cm is None:
            bad = bad or c.policy_invalid_ca_certificate_ref(f"ConfigMap {ns}/{ref.name} not found")
            continue
        pem = cm.data.get("ca.crt", "")
        if not _valid_pem(pem):
            bad = bad or c.policy_invalid_ca_certificate_ref(
                f"ConfigMap {ns}/{ref.name} has no valid PEM certificate in ca.crt"
            )
            continue
        pems.append(pem.strip() + "\n")
    if not pems:
        msg = "no valid CA certificate" if v.ca_certificate_refs else "no CA certificate given"
        return PolicyResult(
            policy,
            None,
            c.policy_no_valid_ca_certificate(msg),
            bad or c.policy_invalid_ca_certificate_ref(msg),
        )
    tls = ir.UpstreamTLS(sni=v.hostname, ca_pem="".join(pems), subject_alt_names=sans)
    return PolicyResult(policy, tls, ok_acc, bad or ok_ref)


def _valid_pem(pem: str) -> bool:
    if "-----BEGIN CERTIFICATE-----" not in pem:
        return False
    try:
        return bool(x509.load_pem_x509_certificates(pem.encode()))
    except ValueError:
        return False
