"""Condition types and reasons of the Gateway API (v1.6), and the one builder of condition dicts.

Every condition translate emits is built by :func:`condition`, so its shape (type, status,
reason, message, observedGeneration; no lastTransitionTime - the status sink stamps it) is
decided here.
"""

from __future__ import annotations

from typing import Any

# Condition types
ACCEPTED = "Accepted"
PROGRAMMED = "Programmed"
RESOLVED_REFS = "ResolvedRefs"
CONFLICTED = "Conflicted"
PARTIALLY_INVALID = "PartiallyInvalid"
SUPPORTED_VERSION = "SupportedVersion"
INSECURE_FRONTEND_VALIDATION = "InsecureFrontendValidationMode"
# Listeners: negative polarity, present only when True (gateway_types.go: "MUST NOT be set when
# it is False").
OVERLAPPING_TLS_CONFIG = "OverlappingTLSConfig"

# GatewayClass reasons
R_ACCEPTED = "Accepted"
R_INVALID_PARAMETERS = "InvalidParameters"
R_UNSUPPORTED_VERSION = "UnsupportedVersion"

# Gateway / ListenerSet reasons
R_PROGRAMMED = "Programmed"
R_INVALID = "Invalid"
R_NO_RESOURCES = "NoResources"
R_ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"
R_ADDRESS_NOT_USABLE = "AddressNotUsable"
R_UNSUPPORTED_ADDRESS = "UnsupportedAddress"
R_LISTENERS_NOT_VALID = "ListenersNotValid"
R_PENDING = "Pending"
R_INVALID_PARAMETERS_REF = "InvalidParameters"
R_NOT_ALLOWED = "NotAllowed"
R_PARENT_NOT_ACCEPTED = "ParentNotAccepted"

# Listener reasons
R_PORT_UNAVAILABLE = "PortUnavailable"
R_UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
R_HOSTNAME_CONFLICT = "HostnameConflict"
R_PROTOCOL_CONFLICT = "ProtocolConflict"
R_NO_CONFLICTS = "NoConflicts"
R_RESOLVED_REFS = "ResolvedRefs"
R_INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
R_INVALID_ROUTE_KINDS = "InvalidRouteKinds"
R_REF_NOT_PERMITTED = "RefNotPermitted"
R_INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
R_INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
R_INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"
R_CONFIGURATION_CHANGED = "ConfigurationChanged"
R_LISTENER_CONFLICT = "ListenerConflict"  # unused by spec for listeners; kept for ListenerSets
R_OVERLAPPING_HOSTNAMES = "OverlappingHostnames"  # OverlappingTLSConfig reasons
R_OVERLAPPING_CERTIFICATES = "OverlappingCertificates"

# Route reasons
R_NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
R_NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
R_NO_MATCHING_PARENT = "NoMatchingParent"
R_UNSUPPORTED_VALUE = "UnsupportedValue"
R_BACKEND_NOT_FOUND = "BackendNotFound"
R_INVALID_KIND = "InvalidKind"
R_UNSUPPORTED_PROTOCOL_ROUTE = "UnsupportedProtocol"
R_UNSUPPORTED_VALUE_ROUTE = "UnsupportedValue"
R_INCOMPATIBLE_FILTERS = "IncompatibleFilters"
# ResolvedRefs=False of a route whose backend's BackendTLSPolicy cannot be met. The spec names
# no reason for it (httproute_types.go, HTTPBackendRef: "with a Reason and Message that
# indicate what is the cause of the error"), and none of its route reasons says it; Envoy
# Gateway's name for the same case.
R_INVALID_BACKEND_TLS = "InvalidBackendTLS"

# Policy (BackendTLSPolicy) reasons
R_CONFLICTED = "Conflicted"
R_TARGET_NOT_FOUND = "TargetNotFound"
R_NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"

# Envoy Gateway Backend (gateway.envoyproxy.io) Accepted reasons, as Envoy Gateway writes them
R_BACKEND_ACCEPTED = "Accepted"
R_BACKEND_INVALID = "Invalid"


def condition(type_: str, status: bool | str, reason: str, message: str, generation: int) -> dict[str, Any]:
    """A Gateway API condition as a JSON-ready dict (no lastTransitionTime)."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }
