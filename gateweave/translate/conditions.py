"""Every condition translate emits, made in one way: by a named constructor here.

A constructor makes one (type, status, reason) of one kind of object, with its message;
the reason constants are used by these constructors only, so ``grep`` finds a reason's
constructor here, and the constructor's name finds every place that sets it. A module that
finds a problem keeps the :class:`Condition` it means (never a loose reason and message);
the status it goes into turns it into the Gateway API's dict with :func:`to_status`, which
adds observedGeneration (no lastTransitionTime: the status sink stamps it).

A few conditions repeat another's reason and message under another type (a conflicted
listener is also not Accepted and not Programmed, for the same reason): :func:`restated`
makes those, so they still carry the reason their constructor set.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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

# Reasons (Gateway API v1.6), each once; set only by the constructors below.
R_ACCEPTED = "Accepted"
R_PROGRAMMED = "Programmed"
R_RESOLVED_REFS = "ResolvedRefs"
R_SUPPORTED_VERSION = "SupportedVersion"
R_INVALID = "Invalid"
R_PENDING = "Pending"
R_INVALID_PARAMETERS = "InvalidParameters"
R_UNSUPPORTED_ADDRESS = "UnsupportedAddress"
R_ADDRESS_NOT_USABLE = "AddressNotUsable"
R_ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"
R_LISTENERS_NOT_VALID = "ListenersNotValid"
R_NOT_ALLOWED = "NotAllowed"
R_PARENT_NOT_ACCEPTED = "ParentNotAccepted"
R_CONFIGURATION_CHANGED = "ConfigurationChanged"
R_UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
R_PORT_UNAVAILABLE = "PortUnavailable"
R_PROTOCOL_CONFLICT = "ProtocolConflict"
R_HOSTNAME_CONFLICT = "HostnameConflict"
R_NO_CONFLICTS = "NoConflicts"
R_OVERLAPPING_HOSTNAMES = "OverlappingHostnames"
R_OVERLAPPING_CERTIFICATES = "OverlappingCertificates"
R_INVALID_ROUTE_KINDS = "InvalidRouteKinds"
R_INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
R_REF_NOT_PERMITTED = "RefNotPermitted"
R_INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
R_INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
R_INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"
R_NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
R_NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
R_NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
R_NO_MATCHING_PARENT = "NoMatchingParent"
R_UNSUPPORTED_VALUE = "UnsupportedValue"
R_INCOMPATIBLE_FILTERS = "IncompatibleFilters"
R_BACKEND_NOT_FOUND = "BackendNotFound"
R_INVALID_KIND = "InvalidKind"
# ResolvedRefs=False of a route whose backend's BackendTLSPolicy cannot be met. The spec names
# no reason for it (httproute_types.go, HTTPBackendRef: "with a Reason and Message that
# indicate what is the cause of the error"), and none of its route reasons says it; Envoy
# Gateway's name for the same case.
R_INVALID_BACKEND_TLS = "InvalidBackendTLS"
R_CONFLICTED = "Conflicted"


class Condition(NamedTuple):
    """A condition before it goes into a status (which adds its observedGeneration)."""

    type: str
    status: bool
    reason: str
    message: str


def to_status(cond: Condition, generation: int) -> dict[str, Any]:
    """The condition as a status shows it (a JSON-ready dict, no lastTransitionTime)."""
    return {
        "type": cond.type,
        "status": "True" if cond.status else "False",
        "reason": cond.reason,
        "message": cond.message,
        "observedGeneration": generation,
    }


def restated(cond: Condition, type_: str, status: bool) -> Condition:
    """``cond``'s reason and message under another type and status."""
    return Condition(type_, status, cond.reason, cond.message)


def extended(cond: Condition, message: str) -> Condition:
    """``cond`` with one more finding appended to its message."""
    return Condition(cond.type, cond.status, cond.reason, f"{cond.message}; {message}")


def prefixed(cond: Condition, prefix: str) -> Condition:
    """``cond`` with its message said of a part (``prefix``, e.g. ``"mirror: "``)."""
    return Condition(cond.type, cond.status, cond.reason, prefix + cond.message)


# ---------------------------------------------------------------- GatewayClass (gatewayclass.py)


def gateway_class_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "Accepted by gateweave")


def gateway_class_invalid_parameters(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_INVALID_PARAMETERS, message)


def gateway_class_supported_version() -> Condition:
    return Condition(
        SUPPORTED_VERSION, True, R_SUPPORTED_VERSION, "Gateway API v1.6 CRDs are supported"
    )


# ---------------------------------------------------------------- Gateway (gateway.py,
# addresses.py)


def gateway_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "Gateway is accepted")


def gateway_class_pending(class_name: str) -> Condition:
    return Condition(ACCEPTED, False, R_PENDING, f"GatewayClass {class_name} is not accepted")


def gateway_invalid_parameters(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_INVALID_PARAMETERS, message)


def gateway_unsupported_address(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_UNSUPPORTED_ADDRESS, message)


def gateway_no_valid_listener() -> Condition:
    return Condition(ACCEPTED, False, R_LISTENERS_NOT_VALID, "no listener is valid")


def gateway_listeners_not_valid(names: list[str]) -> Condition:
    """Accepted, though some listeners are not valid."""
    return Condition(
        ACCEPTED, True, R_LISTENERS_NOT_VALID, f"listeners not valid: {', '.join(names)}"
    )


def gateway_programmed() -> Condition:
    return Condition(PROGRAMMED, True, R_PROGRAMMED, "Gateway is programmed")


def gateway_not_programmed() -> Condition:
    """Not programmed for no reason more specific."""
    return Condition(PROGRAMMED, False, R_PENDING, "not programmed")


def gateway_not_accepted_invalid(not_accepted: Condition) -> Condition:
    """A Gateway that is not Accepted is not Programmed either, with its Accepted message."""
    return Condition(PROGRAMMED, False, R_INVALID, not_accepted.message)


def gateway_address_not_usable(message: str) -> Condition:
    return Condition(PROGRAMMED, False, R_ADDRESS_NOT_USABLE, message)


def gateway_address_not_assigned(message: str) -> Condition:
    return Condition(PROGRAMMED, False, R_ADDRESS_NOT_ASSIGNED, message)


def gateway_waiting_for_envoy() -> Condition:
    return Condition(
        PROGRAMMED, False, R_PENDING, "waiting for Envoy to acknowledge the configuration"
    )


def gateway_envoy_rejected(error: str, pod: str = "") -> Condition:
    who = f"Envoy pod {pod}" if pod else "Envoy"
    return Condition(PROGRAMMED, False, R_INVALID, f"{who} rejected the configuration: {error}")


def gateway_pods_waiting(running: int, expected: int, waiting: tuple[str, ...]) -> Condition:
    """Not every Envoy pod of the Gateway runs the current configuration (``expected``: the
    pods it should have, at least those connected); names the connected ones that do not."""
    missing = expected - running - len(waiting)
    names = [*waiting, *([f"{missing} more not connected"] if missing > 0 else [])] or [
        "their acknowledgements"
    ]
    return Condition(
        PROGRAMMED,
        False,
        R_PENDING,
        f"{running} of {expected} Envoy pods run the current configuration; waiting for "
        f"{', '.join(names)}",
    )


def gateway_refs_resolved() -> Condition:
    return Condition(RESOLVED_REFS, True, R_RESOLVED_REFS, "All references are resolved")


def gateway_invalid_client_certificate_ref(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_CLIENT_CERTIFICATE_REF, message)


def gateway_client_certificate_ref_not_permitted(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_REF_NOT_PERMITTED, message)


def gateway_insecure_frontend_validation() -> Condition:
    return Condition(
        INSECURE_FRONTEND_VALIDATION,
        True,
        R_CONFIGURATION_CHANGED,
        "client certificate validation is configured with AllowInsecureFallback",
    )


# ---------------------------------------------------------------- listeners (listeners.py,
# tlsoverlap.py)


def listener_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "Listener is valid")


def listener_unsupported_protocol(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_UNSUPPORTED_PROTOCOL, message)


def listener_port_unavailable(message: str) -> Condition:
    """The listener's port cannot be bound: another Gateway holds it, or it is privileged."""
    return Condition(ACCEPTED, False, R_PORT_UNAVAILABLE, message)


def listener_no_valid_ca_certificate(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_NO_VALID_CA_CERTIFICATE, message)


def listener_programmed() -> Condition:
    return Condition(PROGRAMMED, True, R_PROGRAMMED, "Listener is programmed")


def listener_invalid(message: str) -> Condition:
    return Condition(PROGRAMMED, False, R_INVALID, message)


def listener_gateway_not_programmed(cause: Condition | None) -> Condition:
    """Programmed=False of a valid listener of a Gateway that is not programmed, for the
    reason of the Gateway's Programmed=False finding (``cause``; Invalid when it has none)."""
    return Condition(
        PROGRAMMED,
        False,
        cause.reason if cause is not None else R_INVALID,
        "the Gateway is not programmed",
    )


def listener_pending() -> Condition:
    """Programmed=False of a valid listener waiting for its Gateway (or ListenerSet's Gateway)."""
    return Condition(PROGRAMMED, False, R_PENDING, "the Gateway is not programmed")


def listener_refs_resolved() -> Condition:
    return Condition(RESOLVED_REFS, True, R_RESOLVED_REFS, "All references are resolved")


def listener_invalid_route_kinds(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_ROUTE_KINDS, message)


def listener_invalid_certificate_ref(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_CERTIFICATE_REF, message)


def listener_ref_not_permitted(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_REF_NOT_PERMITTED, message)


def listener_invalid_ca_certificate_kind(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_CA_CERTIFICATE_KIND, message)


def listener_invalid_ca_certificate_ref(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_CA_CERTIFICATE_REF, message)


def listener_protocol_conflict(message: str) -> Condition:
    return Condition(CONFLICTED, True, R_PROTOCOL_CONFLICT, message)


def listener_hostname_conflict(message: str) -> Condition:
    return Condition(CONFLICTED, True, R_HOSTNAME_CONFLICT, message)


def listener_no_conflicts() -> Condition:
    return Condition(CONFLICTED, False, R_NO_CONFLICTS, "No conflicts")


def listener_overlapping_hostnames(message: str) -> Condition:
    return Condition(OVERLAPPING_TLS_CONFIG, True, R_OVERLAPPING_HOSTNAMES, message)


def listener_overlapping_certificates(message: str) -> Condition:
    return Condition(OVERLAPPING_TLS_CONFIG, True, R_OVERLAPPING_CERTIFICATES, message)


# ---------------------------------------------------------------- ListenerSets (gateway.py)


def listener_set_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "ListenerSet is accepted")


def listener_set_not_allowed(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_NOT_ALLOWED, message)


def listener_set_parent_not_accepted(gateway_name: str) -> Condition:
    return Condition(
        ACCEPTED, False, R_PARENT_NOT_ACCEPTED, f"parent Gateway {gateway_name} is not accepted"
    )


def listener_set_no_valid_listener() -> Condition:
    return Condition(ACCEPTED, False, R_LISTENERS_NOT_VALID, "no listener is valid")


def listener_set_listeners_not_valid(names: list[str]) -> Condition:
    """Accepted, though some listeners are not valid."""
    return Condition(
        ACCEPTED, True, R_LISTENERS_NOT_VALID, f"listeners not valid: {', '.join(names)}"
    )


def listener_set_programmed() -> Condition:
    return Condition(PROGRAMMED, True, R_PROGRAMMED, "ListenerSet is programmed")


def listener_set_parent_not_programmed(gateway_name: str) -> Condition:
    return Condition(
        PROGRAMMED, False, R_PENDING, f"parent Gateway {gateway_name} is not programmed"
    )


# ---------------------------------------------------------------- routes (routes.py, parentrefs.py,
# backends.py, filters.py, l4routes.py)

_ROUTE_ACCEPTED = Condition(ACCEPTED, True, R_ACCEPTED, "Accepted")
_ROUTE_REFS_RESOLVED = Condition(RESOLVED_REFS, True, R_RESOLVED_REFS, "All references resolved")


def route_accepted() -> Condition:
    return _ROUTE_ACCEPTED  # one value: every accepted parentRef of every route shares it


def route_no_valid_rule(message: str, incompatible_filters: bool) -> Condition:
    """Not Accepted: every rule was dropped (IncompatibleFilters when one was dropped for
    that, else UnsupportedValue)."""
    reason = R_INCOMPATIBLE_FILTERS if incompatible_filters else R_UNSUPPORTED_VALUE
    return Condition(ACCEPTED, False, reason, message)


def route_rejected_by_dataplane(message: str) -> Condition:
    """Not Accepted: left out whole because a Gateway's Envoy rejects it (``message``: whose and
    Envoy's words). Envoy does not support a value it holds: the spec's UnsupportedValue, as for
    a rule translate cannot implement (ResolvedRefs is about references)."""
    return Condition(ACCEPTED, False, R_UNSUPPORTED_VALUE, f"left out until it changes: {message}")


def route_partially_invalid(message: str) -> Condition:
    return Condition(PARTIALLY_INVALID, True, R_UNSUPPORTED_VALUE, message)


def route_no_matching_parent(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_NO_MATCHING_PARENT, message)


def route_no_matching_listener_hostname() -> Condition:
    return Condition(
        ACCEPTED,
        False,
        R_NO_MATCHING_LISTENER_HOSTNAME,
        "no listener hostname intersects the route's hostnames",
    )


def route_not_allowed_by_listeners(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_NOT_ALLOWED_BY_LISTENERS, message)


def route_refs_resolved() -> Condition:
    return _ROUTE_REFS_RESOLVED


def route_invalid_kind(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_KIND, message)


def route_ref_not_permitted(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_REF_NOT_PERMITTED, message)


def route_backend_not_found(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_BACKEND_NOT_FOUND, message)


def route_unsupported_protocol(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_UNSUPPORTED_PROTOCOL, message)


def route_invalid_backend_tls(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_BACKEND_TLS, message)


# ---------------------------------------------------------------- Envoy Gateway Backend
# (egbackend.py),
# as Envoy Gateway writes them


def backend_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "The Backend was accepted")


def backend_invalid(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_INVALID, message)


# ---------------------------------------------------------------- BackendTLSPolicy (backendtls.py)


def policy_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "Accepted")


def policy_invalid(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_INVALID, message)


def policy_no_valid_ca_certificate(message: str) -> Condition:
    return Condition(ACCEPTED, False, R_NO_VALID_CA_CERTIFICATE, message)


def policy_conflicted() -> Condition:
    return Condition(
        ACCEPTED, False, R_CONFLICTED, "an older BackendTLSPolicy targets the same Service port"
    )


def policy_refs_resolved() -> Condition:
    return Condition(RESOLVED_REFS, True, R_RESOLVED_REFS, "Resolved")


def policy_invalid_kind(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_KIND, message)


def policy_invalid_ca_certificate_ref(message: str) -> Condition:
    return Condition(RESOLVED_REFS, False, R_INVALID_CA_CERTIFICATE_REF, message)


# ---------------------------------------------------------------- Envoy Gateway policies
# (policies/),
# per ancestor, with Envoy Gateway's reasons and messages

OVERRIDDEN = "Overridden"
R_TARGET_NOT_FOUND = "TargetNotFound"
R_OVERRIDDEN = "Overridden"


def eg_policy_accepted() -> Condition:
    return Condition(ACCEPTED, True, R_ACCEPTED, "Policy has been accepted.")


def eg_policy_conflicted(message: str) -> Condition:
    """Another policy of the kind (older, or first by namespace/name) holds the same target."""
    return Condition(ACCEPTED, False, R_CONFLICTED, message)


def eg_policy_target_not_found(message: str) -> Condition:
    """A sectionName that names no listener or rule of the target."""
    return Condition(ACCEPTED, False, R_TARGET_NOT_FOUND, message)


def eg_policy_invalid(message: str) -> Condition:
    """The policy cannot be applied: a field gateweave does not implement, or a bad value."""
    return Condition(ACCEPTED, False, R_INVALID, message)


def eg_policy_overridden(message: str) -> Condition:
    return Condition(OVERRIDDEN, True, R_OVERRIDDEN, message)
