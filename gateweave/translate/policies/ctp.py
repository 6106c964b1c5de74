"""ClientTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and its part of the listener's
:class:`~gateweave.ir.ClientSettings` to :func:`listener_effect`; effects.py gives each listener
the effect of the policy that governs it
(:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_listener`).

Implemented: the client address from trusted X-Forwarded-For hops
(``clientIPDetection.xForwardedFor.numTrustedHops``); the PROXY protocol (``proxyProtocol``,
and the deprecated ``enableProxyProtocol``).
"""

from __future__ import annotations

from typing import Any

from gateweave import ir

IMPLEMENTED: frozenset[str] = frozenset({
    "clientIPDetection",
    "clientIPDetection.xForwardedFor",
    "clientIPDetection.xForwardedFor.numTrustedHops",
    "enableProxyProtocol",
    "proxyProtocol",
    "proxyProtocol.optional",
})

_HOPS_AT = "spec.clientIPDetection.xForwardedFor.numTrustedHops"


def _hops(spec: dict[str, Any]) -> Any:
    detection = spec.get("clientIPDetection")
    xff = detection.get("xForwardedFor") if isinstance(detection, dict) else None
    return xff.get("numTrustedHops") if isinstance(xff, dict) else None


def _proxy(spec: dict[str, Any]) -> tuple[Any, Any]:
    """(``proxyProtocol``, ``proxyProtocol.optional``), the deprecated ``enableProxyProtocol``
    standing for the first when the object is unset."""
    proxy = spec.get("proxyProtocol")
    if proxy is None:
        return spec.get("enableProxyProtocol"), None
    return proxy, proxy.get("optional") if isinstance(proxy, dict) else None


def problems(spec: dict[str, Any]) -> list[str]:
    """What in the implemented fields cannot be applied (beyond the CRD's own rules)."""
    out: list[str] = []
    hops = _hops(spec)
    if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int) or hops < 0):
        out.append(f"{_HOPS_AT}: {hops!r} is not a number of hops (an integer, 0 or more)")
    for at, value in (("spec.enableProxyProtocol", spec.get("enableProxyProtocol")),
                      ("spec.proxyProtocol.optional", _proxy(spec)[1])):
        if value is not None and not isinstance(value, bool):
            out.append(f"{at}: {value!r} is not true or false")
    proxy = spec.get("proxyProtocol")
    if proxy is not None and not isinstance(proxy, dict):
        out.append(f"spec.proxyProtocol: {proxy!r} is not an object")
    return out


def listener_effect(spec: dict[str, Any]) -> ir.ClientSettings | None:
    """The client settings a policy with ``spec`` (accepted, without problems) gives a listener;
    None when it changes nothing."""
    hops = _hops(spec)
    proxy, optional = _proxy(spec)
    settings = ir.ClientSettings(xff_trusted_hops=hops if isinstance(hops, int) else 0,
                                 proxy_protocol=proxy is not None and proxy is not False,
                                 proxy_protocol_optional=optional is True)
    return None if settings == ir.ClientSettings() else settings
