"""GatewayClasses: which are ours, whether they are accepted, and their status."""

from __future__ import annotations

from gateweave.api import models as m
from gateweave.translate import conditions as c
from gateweave.translate.context import Ctx

# Features gateweave implements (GatewayClass status.supportedFeatures; the conformance runner reads it).
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


def resolve_classes(ctx: Ctx) -> dict[str, bool]:
    """Our GatewayClasses by name -> accepted; writes their status."""
    ours: dict[str, bool] = {}
    for (_, name), gc in sorted(ctx.snapshot.gateway_classes.items()):
        if gc.spec.controller_name != ctx.options.controller_name:
            continue
        accepted = _acceptance(gc)
        ours[name] = accepted.status
        gen = gc.metadata.generation
        ctx.statuses[("GatewayClass", "", name)] = {
            "conditions": [c.to_status(accepted, gen), c.to_status(c.gateway_class_supported_version(), gen)],
            "supportedFeatures": [{"name": f} for f in SUPPORTED_FEATURES],
        }
    return ours


def _acceptance(gc: m.GatewayClass) -> c.Condition:
    ref = gc.spec.parameters_ref
    if ref is not None:
        return c.gateway_class_invalid_parameters(
            f"parametersRef {ref.group}/{ref.kind} {ref.name}: gateweave takes no GatewayClass parameters"
        )
    return c.gateway_class_accepted()
