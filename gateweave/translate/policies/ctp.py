"""ClientTrafficPolicy features (gateway.envoyproxy.io/v1alpha1).

``IMPLEMENTED`` lists the spec field paths gateweave implements (fields.py says how they are
written); every other set field is refused by name in the policy's status. A feature adds
its paths here, its value checks to :func:`problems`, and its part of the listener's
:class:`~gateweave.ir.ClientSettings` to :func:`listener_effect`; effects.py gives each listener
the effect of the policy that governs it
(:meth:`~gateweave.translate.policies.attach.PolicyIndex.for_listener`).

Implemented: the client address from trusted X-Forwarded-For hops
(``clientIPDetection.xForwardedFor.numTrustedHops``) or from a header of its own
(``clientIPDetection.customHeader`` ``name``, ``failClosed``); the PROXY protocol
(``proxyProtocol``, and the deprecated ``enableProxyProtocol``); the client-side timeouts
(``timeout.http`` ``requestReceivedTimeout`` and ``idleTimeout``, ``timeout.tcp.idleTimeout``);
connection limits (``connection.connectionLimit.value``, ``connection.bufferLimit``,
``connection.maxAcceptPerSocketEvent``, which the CRD defaults to 1); request headers with
underscores in their names (``headers.withUnderscoresAction``); request headers added, set or
removed before anything else sees the request (``headers.earlyRequestHeaders`` ``add``, ``set``,
``remove``); TLS on the filter chains terminating it (``tls.minVersion``, ``tls.maxVersion``,
``tls.ciphers``, ``tls.alpnProtocols``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import specvalue

IMPLEMENTED: frozenset[str] = frozenset(
    {
        "clientIPDetection",
        "clientIPDetection.xForwardedFor",
        "clientIPDetection.xForwardedFor.numTrustedHops",
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
        "headers.earlyRequestHeaders",
        "headers.earlyRequestHeaders.add",
        "headers.earlyRequestHeaders.add.name",
        "headers.earlyRequestHeaders.add.value",
        "headers.earlyRequestHeaders.set",
        "headers.earlyRequestHeaders.set.name",
        "headers.earlyRequestHeaders.set.value",
        "headers.earlyRequestHeaders.remove",
        "tls",
        "tls.minVersion",
        "tls.maxVersion",
        "tls.ciphers",
        "tls.alpnProtocols",
    }
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


class _Header(msgspec.Struct, frozen=True):
    name: str
    value: str


class _EarlyHeaders(msgspec.Struct, frozen=True):
    add: tuple[_Header, ...] = ()
    set: tuple[_Header, ...] = ()
    remove: tuple[str, ...] = ()


# An HTTP header name (the CRD's pattern): a token, no pseudo-header
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")
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
            if not _HEADER_NAME.fullmatch(header.name):
                out.append(f"{_EARLY_AT}.{key}[{i}].name: {header.name!r} is not a header name")
            if any(c in header.value for c in "\r\n\0"):
                out.append(
                    f"{_EARLY_AT}.{key}[{i}].value: {header.value!r} has a line break or NUL"
                )
    for i, name in enumerate(early.remove):
        if not _HEADER_NAME.fullmatch(name):
            out.append(f"{_EARLY_AT}.remove[{i}]: {name!r} is not a header name")
    if len(out) > bad or not (early.add or early.set or early.remove):
        return None
    return ir.HeaderMods(
        set=tuple((h.name, h.value) for h in early.set),
        add=tuple((h.name, h.value) for h in early.add),
        remove=early.remove,
    )


_TLS_VERSIONS = ("Auto", "1.0", "1.1", "1.2", "1.3")
_ALPN = ("http/1.0", "http/1.1", "h2")
# The TLS 1.2 and older cipher suites Envoy's TLS library (BoringSSL) knows by name; a name it
# does not know makes Envoy refuse the whole listener. "[A|B]": A and B of equal preference.
_CIPHERS: frozenset[str] = frozenset(
    {
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-PSK-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-PSK-AES128-CBC-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "ECDHE-PSK-AES256-CBC-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA",
        "PSK-AES128-CBC-SHA",
        "AES256-SHA",
        "PSK-AES256-CBC-SHA",
        "DES-CBC3-SHA",
    }
)


def _cipher_known(entry: str) -> bool:
    names = entry[1:-1].split("|") if entry.startswith("[") and entry.endswith("]") else [entry]
    return all(name in _CIPHERS for name in names)


def _strings(value: Any, at: str, out: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        out.append(f"{at}: {value!r} is not a list of strings")
        return None
    return tuple(value)


def _tls(
    spec: dict[str, Any], out: list[str]
) -> tuple[str, str, tuple[str, ...], tuple[str, ...] | None]:
    """(``tls.minVersion``, ``tls.maxVersion`` ("" when unset or Auto), ``tls.ciphers``,
    ``tls.alpnProtocols`` (None when unset)); problems go to ``out``."""
    tls = spec.get("tls")
    if tls is None:
        return "", "", (), None
    if not isinstance(tls, dict):
        out.append(f"spec.tls: {tls!r} is not an object")
        return "", "", (), None
    versions: list[str] = []
    for key in ("minVersion", "maxVersion"):
        version = tls.get(key)
        if version is not None and version not in _TLS_VERSIONS:
            out.append(f"spec.tls.{key}: {version!r} is not one of {', '.join(_TLS_VERSIONS)}")
            version = None
        versions.append("" if version in (None, "Auto") else str(version))
    low, high = versions
    # as the CRD's rules: an unset minimum stands for 1.2 (Envoy Gateway's), Auto for the lowest
    least = low or ("1.0" if tls.get("minVersion") == "Auto" else "1.2")
    if high and least > high:
        out.append(f"spec.tls.maxVersion: {high} is below spec.tls.minVersion {least}")
    ciphers = _strings(tls.get("ciphers"), "spec.tls.ciphers", out) or ()
    if ciphers and low == "1.3":
        out.append("spec.tls.ciphers: no cipher suite is chosen when the minimum version is 1.3")
    for i, cipher in enumerate(ciphers):
        if not _cipher_known(cipher):
            out.append(f"spec.tls.ciphers[{i}]: {cipher!r} is not a cipher suite Envoy knows")
    alpn = _strings(tls.get("alpnProtocols"), "spec.tls.alpnProtocols", out)
    for i, protocol in enumerate(alpn or ()):
        if protocol not in _ALPN:
            out.append(
                f"spec.tls.alpnProtocols[{i}]: {protocol!r} is not one of {', '.join(_ALPN)}"
            )
    return low, high, ciphers, alpn


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


_HOPS_AT = "spec.clientIPDetection.xForwardedFor.numTrustedHops"


def _hops(spec: dict[str, Any]) -> Any:
    detection = spec.get("clientIPDetection")
    xff = detection.get("xForwardedFor") if isinstance(detection, dict) else None
    return xff.get("numTrustedHops") if isinstance(xff, dict) else None


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
    hops = _hops(spec)
    if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int) or hops < 0):
        out.append(f"{_HOPS_AT}: {hops!r} is not a number of hops (an integer, 0 or more)")
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
    _early_headers(spec, out)
    _tls(spec, out)
    return out


def listener_effect(spec: dict[str, Any]) -> ir.ClientSettings | None:
    """The client settings a policy with ``spec`` (accepted, without problems) gives a listener;
    None when it changes nothing."""
    hops = _hops(spec)
    proxy, optional = _proxy(spec)
    request, http_idle, tcp_idle = _timeouts(spec, [])
    max_connections, buffer_limit, accept = _connection(spec, [])
    tls_min, tls_max, ciphers, alpn = _tls(spec, [])
    ip_header, ip_header_fail_closed = _custom_header(spec, [])
    settings = ir.ClientSettings(
        xff_trusted_hops=hops if isinstance(hops, int) else 0,
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
    )
    return None if settings == ir.ClientSettings() else settings
