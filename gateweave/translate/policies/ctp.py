"""ClientTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and its part of the listener's
:class:`~gateweave.ir.ClientSettings` to :func:`listener_effect`; effects.py gives each listener
the effect of the policy that governs it
(:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_listener`).

Implemented: the client address from trusted X-Forwarded-For hops
(``clientIPDetection.xForwardedFor.numTrustedHops``), from its entries past the trusted address
ranges (``.trustedCIDRs``; ``.disableXForwardedForAppend``: the peer not appended to the header),
the connection's peer (``clientIPDetection.directSourceIP``), or from a header of its own
(``clientIPDetection.customHeader`` ``name``, ``failClosed``); the PROXY protocol
(``proxyProtocol``, and the deprecated ``enableProxyProtocol``); the client-side timeouts
(``timeout.http`` ``requestReceivedTimeout`` and ``idleTimeout``, ``timeout.tcp.idleTimeout``);
connection limits (``connection.connectionLimit.value``, ``connection.bufferLimit``,
``connection.maxAcceptPerSocketEvent``, which the CRD defaults to 1); request headers with
underscores in their names (``headers.withUnderscoresAction``); request headers added, set or
removed before anything else sees the request (``headers.earlyRequestHeaders`` ``add``, ``set``,
``remove``); no x-ratelimit-* answer headers on the listeners' routes
(``headers.disableRateLimitHeaders``, :func:`rate_limit_headers_off`); TLS on the filter chains
terminating it (``tls.minVersion``, ``tls.maxVersion``, ``tls.ciphers``, ``tls.alpnProtocols``,
``tls.ecdhCurves``, ``tls.signatureAlgorithms``, ``tls.session.resumption``,
``tls.clientValidation`` (``caCertificateRefs``, ``optional``, ``mode``, the certificate checks;
what it references :func:`resolve` reads: clientvalidation.py); request path normalisation
(``path`` ``escapedSlashesAction``, ``disableMergeSlashes``); TCP keepalive on the clients'
connections (``tcpKeepalive``: keepalive.py).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import clienttls, clientvalidation, keepalive, specvalue

_TLS = clienttls.FIELDS | clientvalidation.FIELDS
IMPLEMENTED: frozenset[str] = (
    _TLS
    | keepalive.FIELDS
    | frozenset(
        {
            "clientIPDetection",
            "clientIPDetection.xForwardedFor",
            "clientIPDetection.xForwardedFor.numTrustedHops",
            "clientIPDetection.xForwardedFor.trustedCIDRs",
            "clientIPDetection.xForwardedFor.disableXForwardedForAppend",
            "clientIPDetection.directSourceIP",
            "clientIPDetection.customHeader",
            "clientIPDetection.customHeader.name",
            "clientIPDetection.customHeader.failClosed",
            "enableProxyProtocol",
            "proxyProtocol",
            "proxyProtocol.optional",
            "timeout",
            "timeout.http",
            "timeout.http.requestReceivedTimeout",
            "timeout.http.idleTimeout",
            "timeout.tcp",
            "timeout.tcp.idleTimeout",
            "connection",
            "connection.connectionLimit",
            "connection.connectionLimit.value",
            "connection.bufferLimit",
            "connection.maxAcceptPerSocketEvent",
            "headers",
            "headers.withUnderscoresAction",
            "headers.disableRateLimitHeaders",
            "headers.earlyRequestHeaders",
            "headers.earlyRequestHeaders.add",
            "headers.earlyRequestHeaders.add.name",
            "headers.earlyRequestHeaders.add.value",
            "headers.earlyRequestHeaders.set",
            "headers.earlyRequestHeaders.set.name",
            "headers.earlyRequestHeaders.set.value",
            "headers.earlyRequestHeaders.remove",
            "path",
            "path.escapedSlashesAction",
            "path.disableMergeSlashes",
        }
    )
)

_UNDERSCORES = ("Allow", "RejectRequest", "DropHeader")


def _underscores(spec: dict[str, Any], out: list[str]) -> str:
    """``headers.withUnderscoresAction`` ("" when unset); problems go to ``out``."""
    headers = spec.get("headers")
    action = headers.get("withUnderscoresAction") if isinstance(headers, dict) else None
    if headers is not None and not isinstance(headers, dict):
        out.append(f"spec.headers: {headers!r} is not an object")
    if action is None:
        return ""
    if action not in _UNDERSCORES:
        out.append(
            f"spec.headers.withUnderscoresAction: {action!r} is not one of "
            f"{', '.join(_UNDERSCORES)}"
        )
        return ""
    return str(action)


def rate_limit_headers_off(spec: dict[str, Any], out: list[str]) -> bool:
    """``headers.disableRateLimitHeaders``: the governed listeners' routes send no x-ratelimit-*
    headers (ratelimit.py, through effects.py); problems go to ``out``."""
    headers = spec.get("headers")
    value = headers.get("disableRateLimitHeaders") if isinstance(headers, dict) else None
    if value is not None and not isinstance(value, bool):
        out.append(f"spec.headers.disableRateLimitHeaders: {value!r} is not true or false")
    return value is True


class _Header(msgspec.Struct, frozen=True):
    name: str
    value: str


class _EarlyHeaders(msgspec.Struct, frozen=True):
    add: tuple[_Header, ...] = ()
    set: tuple[_Header, ...] = ()
    remove: tuple[str, ...] = ()


_EARLY_AT = "spec.headers.earlyRequestHeaders"


def _early_headers(spec: dict[str, Any], out: list[str]) -> ir.HeaderMods | None:
    """``headers.earlyRequestHeaders`` (None when unset or empty); problems go to ``out``."""
    headers = spec.get("headers")
    raw = headers.get("earlyRequestHeaders") if isinstance(headers, dict) else None
    if raw is None:
        return None
    try:
        early = msgspec.convert(raw, _EarlyHeaders, strict=False)
    except msgspec.ValidationError as exc:
        out.append(f"{_EARLY_AT}: {exc}")
        return None
    bad = len(out)
    for key, pairs in (("add", early.add), ("set", early.set)):
        for i, header in enumerate(pairs):
            if not specvalue.HEADER_NAME.fullmatch(header.name):
                out.append(f"{_EARLY_AT}.{key}[{i}].name: {header.name!r} is not a header name")
            if any(c in header.value for c in "\r\n\0"):
                out.append(
                    f"{_EARLY_AT}.{key}[{i}].value: {header.value!r} has a line break or NUL"
                )
    for i, name in enumerate(early.remove):
        if not specvalue.HEADER_NAME.fullmatch(name):
            out.append(f"{_EARLY_AT}.remove[{i}]: {name!r} is not a header name")
    if len(out) > bad or not (early.add or early.set or early.remove):
        return None
    return ir.HeaderMods(
        set=tuple((h.name, h.value) for h in early.set),
        add=tuple((h.name, h.value) for h in early.add),
        remove=early.remove,
    )


_ESCAPED_SLASHES = ("KeepUnchanged", "RejectRequest", "UnescapeAndForward", "UnescapeAndRedirect")


def _path(spec: dict[str, Any], out: list[str]) -> ir.PathSettings | None:
    """``path`` (None when unset), its unset fields as Envoy Gateway's defaults (slashes merged,
    escaped slashes unescaped with a redirect); problems go to ``out``."""
    path = spec.get("path")
    if path is None:
        return None
    if not isinstance(path, dict):
        out.append(f"spec.path: {path!r} is not an object")
        return None
    action = path.get("escapedSlashesAction", "UnescapeAndRedirect")
    keep = path.get("disableMergeSlashes", False)
    problems = len(out)
    if action not in _ESCAPED_SLASHES:
        choices = ", ".join(_ESCAPED_SLASHES)
        out.append(f"spec.path.escapedSlashesAction: {action!r} is not one of {choices}")
    if not isinstance(keep, bool):
        out.append(f"spec.path.disableMergeSlashes: {keep!r} is not true or false")
    if len(out) > problems:
        return None
    return ir.PathSettings(merge_slashes=not keep, escaped_slashes=str(action))


def resolve(ctx: Any, policy: Any) -> tuple[ir.ClientValidation | None, list[str]]:
    """What the policy's features that read other objects make of it (its client certificate
    validation), and their problems."""
    spec = policy.spec if isinstance(policy.spec, dict) else {}
    out: list[str] = []
    return clientvalidation.client_validation(ctx, policy.metadata.namespace, spec, out), out


_UINT32 = 2**32 - 1


def _count(value: Any, at: str, what: str, least: int, out: list[str]) -> int | None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not least <= value <= _UINT32
    ):
        out.append(f"{at}: {value!r} is not a number of {what} ({least} to {_UINT32})")
        return None
    return value


def _connection(spec: dict[str, Any], out: list[str]) -> tuple[int | None, int | None, int | None]:
    """(the most concurrent connections, the per-connection buffer limit in bytes, the most
    connections accepted per socket event (0: any number)), None when unset; problems go to
    ``out``."""
    connection = spec.get("connection")
    if connection is None:
        return None, None, None
    if not isinstance(connection, dict):
        out.append(f"spec.connection: {connection!r} is not an object")
        return None, None, None
    limit = connection.get("connectionLimit")
    value = limit.get("value") if isinstance(limit, dict) else None
    if limit is not None and not isinstance(limit, dict):
        out.append(f"spec.connection.connectionLimit: {limit!r} is not an object")
    value = _count(value, "spec.connection.connectionLimit.value", "connections", 1, out)
    buffer = specvalue.byte_count(
        connection.get("bufferLimit"), "spec.connection.bufferLimit", out, _UINT32
    )
    accept = _count(
        connection.get("maxAcceptPerSocketEvent"),
        "spec.connection.maxAcceptPerSocketEvent",
        "connections",
        0,
        out,
    )
    return value, buffer, accept


class _HTTPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    request_received_timeout: str | None = None
    idle_timeout: str | None = None


class _TCPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    idle_timeout: str | None = None


class _Timeout(msgspec.Struct, frozen=True):
    http: _HTTPTimeout | None = None
    tcp: _TCPTimeout | None = None


def _timeouts(
    spec: dict[str, Any], out: list[str]
) -> tuple[float | None, float | None, float | None]:
    """(the HTTP request received, HTTP idle, TCP idle timeouts) in seconds, None when unset;
    problems go to ``out``."""
    timeout = specvalue.field(spec, "timeout", _Timeout)
    if not isinstance(timeout, _Timeout):
        if timeout is not None:
            out.append(timeout)
        return None, None, None
    http, tcp = timeout.http or _HTTPTimeout(), timeout.tcp or _TCPTimeout()
    return (
        specvalue.seconds(
            http.request_received_timeout, "spec.timeout.http.requestReceivedTimeout", out
        ),
        specvalue.seconds(http.idle_timeout, "spec.timeout.http.idleTimeout", out),
        specvalue.seconds(tcp.idle_timeout, "spec.timeout.tcp.idleTimeout", out),
    )


_XFF_AT = "spec.clientIPDetection.xForwardedFor"


def _xff(spec: dict[str, Any], out: list[str]) -> tuple[int, tuple[str, ...]]:
    """(``clientIPDetection.xForwardedFor.numTrustedHops`` (0 when unset), ``.trustedCIDRs`` (as
    ``address/length`` of their networks; empty when unset)); problems go to ``out``."""
    detection = spec.get("clientIPDetection")
    xff = detection.get("xForwardedFor") if isinstance(detection, dict) else None
    if xff is None:
        return 0, ()
    if not isinstance(xff, dict):
        out.append(f"{_XFF_AT}: {xff!r} is not an object")
        return 0, ()
    hops, cidrs = xff.get("numTrustedHops"), xff.get("trustedCIDRs")
    problems = len(out)
    if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int) or hops < 0):
        out.append(
            f"{_XFF_AT}.numTrustedHops: {hops!r} is not a number of hops (an integer, 0 or more)"
        )
    ranges: list[str] = []
    if cidrs is not None and (not isinstance(cidrs, list) or not cidrs):
        out.append(f"{_XFF_AT}.trustedCIDRs: {cidrs!r} is not a list of address ranges")
    for i, cidr in enumerate(cidrs if isinstance(cidrs, list) else ()):
        network = _network(cidr)
        if network is None:
            out.append(f"{_XFF_AT}.trustedCIDRs[{i}]: {cidr!r} is not an address range (CIDR)")
        else:
            ranges.append(network)
    if hops is not None and cidrs is not None:
        out.append(f"{_XFF_AT}: numTrustedHops and trustedCIDRs are both set (one only)")
    if len(out) > problems:
        return 0, ()
    return hops or 0, tuple(ranges)


def _xff_no_append(spec: dict[str, Any], out: list[str]) -> bool:
    """``clientIPDetection.xForwardedFor.disableXForwardedForAppend`` (False when unset); problems
    go to ``out``."""
    detection = spec.get("clientIPDetection")
    xff = detection.get("xForwardedFor") if isinstance(detection, dict) else None
    value = xff.get("disableXForwardedForAppend") if isinstance(xff, dict) else None
    if value is not None and not isinstance(value, bool):
        out.append(f"{_XFF_AT}.disableXForwardedForAppend: {value!r} is not true or false")
        return False
    return value is True


def _network(cidr: Any) -> str | None:
    """``cidr`` (``address/length``) as its network's ``address/length``; None when it is not
    one."""
    if not isinstance(cidr, str) or "/" not in cidr:
        return None
    try:
        return str(ipaddress.ip_network(cidr, strict=False))
    except ValueError:
        return None


def _direct_source(spec: dict[str, Any], out: list[str]) -> None:
    """``clientIPDetection.directSourceIP`` (the client address is the connection's peer, as
    without the field): problems go to ``out``."""
    detection = spec.get("clientIPDetection")
    direct = detection.get("directSourceIP") if isinstance(detection, dict) else None
    if direct is None or not isinstance(detection, dict):
        return
    if not isinstance(direct, dict):
        out.append(f"spec.clientIPDetection.directSourceIP: {direct!r} is not an object")
    for other in ("xForwardedFor", "customHeader"):
        if detection.get(other) is not None:
            out.append(
                f"spec.clientIPDetection.directSourceIP: set with spec.clientIPDetection.{other}"
                " (one only)"
            )


_CUSTOM_AT = "spec.clientIPDetection.customHeader"
# The CRD's pattern for the header's name
_CUSTOM_NAME = re.compile(r"[A-Za-z0-9-]+")


def _custom_header(spec: dict[str, Any], out: list[str]) -> tuple[str, bool]:
    """(``clientIPDetection.customHeader.name`` ("" when unset), ``.failClosed``); problems go to
    ``out``."""
    detection = spec.get("clientIPDetection")
    custom = detection.get("customHeader") if isinstance(detection, dict) else None
    if custom is None:
        return "", False
    if not isinstance(custom, dict):
        out.append(f"{_CUSTOM_AT}: {custom!r} is not an object")
        return "", False
    name, closed = custom.get("name"), custom.get("failClosed")
    problems = len(out)
    if not isinstance(name, str) or not _CUSTOM_NAME.fullmatch(name):
        out.append(f"{_CUSTOM_AT}.name: {name!r} is not a header name (letters, digits, '-')")
    if closed is not None and not isinstance(closed, bool):
        out.append(f"{_CUSTOM_AT}.failClosed: {closed!r} is not true or false")
    if isinstance(detection, dict) and detection.get("xForwardedFor") is not None:
        out.append(f"{_CUSTOM_AT}: set with spec.clientIPDetection.xForwardedFor (one only)")
    if len(out) > problems:
        return "", False
    return str(name), closed is True


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
    _xff(spec, out)
    _xff_no_append(spec, out)
    _direct_source(spec, out)
    for at, value in (
        ("spec.enableProxyProtocol", spec.get("enableProxyProtocol")),
        ("spec.proxyProtocol.optional", _proxy(spec)[1]),
    ):
        if value is not None and not isinstance(value, bool):
            out.append(f"{at}: {value!r} is not true or false")
    proxy = spec.get("proxyProtocol")
    if proxy is not None and not isinstance(proxy, dict):
        out.append(f"spec.proxyProtocol: {proxy!r} is not an object")
    _timeouts(spec, out)
    _connection(spec, out)
    _custom_header(spec, out)
    _underscores(spec, out)
    rate_limit_headers_off(spec, out)
    _early_headers(spec, out)
    clienttls.versions(spec, out)
    clienttls.groups(spec, out)
    clienttls.session(spec, out)
    _path(spec, out)
    keepalive.tcp_keepalive(spec, "spec", out)
    return out


def listener_effect(
    spec: dict[str, Any], validation: ir.ClientValidation | None = None
) -> ir.ClientSettings | None:
    """The client settings a policy with ``spec`` (accepted, without problems) and the client
    certificate validation :func:`resolve` made of it give a listener; None when they change
    nothing."""
    hops, trusted = _xff(spec, [])
    proxy, optional = _proxy(spec)
    request, http_idle, tcp_idle = _timeouts(spec, [])
    max_connections, buffer_limit, accept = _connection(spec, [])
    tls_min, tls_max, ciphers, alpn = clienttls.versions(spec, [])
    curves, signatures = clienttls.groups(spec, [])
    ip_header, ip_header_fail_closed = _custom_header(spec, [])
    settings = ir.ClientSettings(
        xff_trusted_hops=hops,
        xff_trusted_cidrs=trusted,
        xff_skip_append=_xff_no_append(spec, []),
        client_ip_header=ip_header,
        client_ip_header_fail_closed=ip_header_fail_closed,
        proxy_protocol=proxy is not None and proxy is not False,
        proxy_protocol_optional=optional is True,
        request_received_timeout_s=request,
        http_idle_timeout_s=http_idle,
        tcp_idle_timeout_s=tcp_idle,
        max_connections=max_connections,
        buffer_limit_bytes=buffer_limit,
        max_accept_per_event=accept,
        headers_with_underscores=_underscores(spec, []),
        early_request_headers=_early_headers(spec, []),
        tls_min_version=tls_min,
        tls_max_version=tls_max,
        tls_ciphers=ciphers,
        tls_alpn=alpn,
        tls_ecdh_curves=curves,
        tls_signature_algorithms=signatures,
        tls_resumption=clienttls.session(spec, []),
        tls_client_validation=validation,
        path=_path(spec, []),
        tcp_keepalive=keepalive.tcp_keepalive(spec, "spec", []),
    )
    return None if settings == ir.ClientSettings() else settings
