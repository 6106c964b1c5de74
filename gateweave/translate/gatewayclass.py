"""GatewayClasses: which are ours, whether they are accepted, and their status."""

from __future__ import annotations

from dataclasses import dataclass

from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate import parameters
from gateweave.translate.context import Ctx

# Features gateweave implements (GatewayClass status.supportedFeatures; the conformance runner reads
# it).
SUPPORTED_FEATURES: tuple[str, ...] = tuple(
    sorted(
        {
            "Gateway",
            "GatewayPort8080",
            "GatewayStaticAddresses",
            "GatewayAddressEmpty",
            "GatewayHTTPListenerIsolation",
            "GatewayHTTPSListenerDetectMisdirectedRequests",
            "GatewayFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            "GatewayBackendClientCertificate",
            "GatewayInfrastructurePropagation",
            "ListenerSet",
            "ReferenceGrant",
            "HTTPRoute",
            "HTTPRouteHostRewrite",
            "HTTPRouteMethodMatching",
            "HTTPRouteQueryParamMatching",
            "HTTPRouteResponseHeaderModification",
            "HTTPRouteBackendRequestHeaderModification",
            "HTTPRouteBackendRequestRedirect",
            "HTTPRouteBackendURLRewrite",
            "HTTPRoutePathRewrite",
            "HTTPRoutePathRedirect",
            "HTTPRoutePortRedirect",
            "HTTPRouteSchemeRedirect",
            "HTTPRouteRequestMirror",
            "HTTPRouteRequestMultipleMirrors",
            "HTTPRouteRequestPercentageMirror",
            "HTTPRouteRequestTimeout",
            "HTTPRouteBackendTimeout",
            "HTTPRouteRetry",
            "HTTPRouteRetryBackendTimeout",
            "HTTPRouteRetryConnectionError",
            "HTTPRouteParentRefPort",
            "HTTPRouteDestinationPortMatching",
            "HTTPRouteNamedRouteRule",
            "HTTPRouteBackendProtocolH2C",
            "HTTPRouteBackendProtocolWebSocket",
            "HTTPRouteCORS",
            "HTTPRoute303RedirectStatusCode",
            "HTTPRoute307RedirectStatusCode",
            "HTTPRoute308RedirectStatusCode",
            "GRPCRoute",
            "GRPCRouteNamedRouteRule",
            "GRPCRouteRequestHeaderModifier",
            "TLSRoute",
            "TLSRouteModeTerminate",
            "TLSRouteModeMixed",
            "TCPRoute",
            "UDPRoute",
            "BackendTLSPolicy",
            "BackendTLSPolicySANValidation",
        }
    )
)


@dataclass(frozen=True)
class ClassResult:
    accepted: bool
    parameters: m.GatewayParametersSpec | None = (
        None  # its parametersRef's, the defaults of its Gateways
    )


def resolve_classes(ctx: Ctx) -> dict[str, ClassResult]:
    """Our GatewayClasses by name, accepted or not; writes their status."""
    ours: dict[str, ClassResult] = {}
    for (_, name), gc in sorted(ctx.snapshot.gateway_classes.items()):
        if gc.spec.controller_name != ctx.options.controller_name:
            continue
        params = _parameters(ctx, gc)
        accepted = params if isinstance(params, c.Condition) else c.gateway_class_accepted()
        ours[name] = ClassResult(
            accepted.status, None if isinstance(params, c.Condition) else params
        )
        gen = gc.metadata.generation
        ctx.statuses[("GatewayClass", "", name)] = {
            "conditions": [
                c.to_status(accepted, gen),
                c.to_status(c.gateway_class_supported_version(), gen),
            ],
            "supportedFeatures": [{"name": f} for f in SUPPORTED_FEATURES],
        }
    return ours


def _parameters(ctx: Ctx, gc: m.GatewayClass) -> m.GatewayParametersSpec | c.Condition | None:
    ref = gc.spec.parameters_ref
    if ref is None:
        return None
    spec = parameters.lookup(ctx, ref.group, ref.kind, ref.namespace, ref.name)
    return c.gateway_class_invalid_parameters(spec) if isinstance(spec, str) else spec
