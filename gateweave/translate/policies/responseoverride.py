"""BackendTrafficPolicy ``responseOverride``: an upstream answer one of the overrides matches
(``match.statusCodes``: its status is a ``Value`` or in an inclusive ``Range``; and
``match.responseHeaders``: it has each header with a value ``Exact``, by ``Prefix``, ``Suffix``
or ``RegularExpression``) is replaced by that override's ``response`` (its ``body``, inline or a
ConfigMap's key ``response.body`` as Envoy Gateway reads it, an Envoy format string as there
(:func:`body_format`); its ``contentType``; its ``statusCode``, else the upstream's; its
``header`` ``add`` and ``set``), in Envoy's custom_response filter. The first override matching
an answer answers it. An override with a ``redirect`` instead (``scheme``, ``hostname``,
``port``, ``path`` ``ReplaceFullPath``, ``statusCode`` 301 or 302, by default 302) has Envoy send
the request again, internally, to the URL made of it, and answer with that request's answer under
the redirect's status (Envoy's redirect policy, as Envoy Gateway writes it).

A body read from a ConfigMap makes this a feature with a ``resolve`` step (btp.py): a missing
ConfigMap or key is a problem naming it.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import specvalue
from gateweave.translate.regex import re2_error

BODY_KEY = "response.body"  # Envoy Gateway's key of a ValueRef ConfigMap
_LOWEST, _HIGHEST = 100, 599  # the statuses Envoy matches

_AT = "responseOverride"
FIELDS: frozenset[str] = frozenset(
    {
        _AT,
        f"{_AT}.match",
        f"{_AT}.match.statusCodes",
        f"{_AT}.match.statusCodes.type",
        f"{_AT}.match.statusCodes.value",
        f"{_AT}.match.statusCodes.range",
        f"{_AT}.match.statusCodes.range.start",
        f"{_AT}.match.statusCodes.range.end",
        f"{_AT}.match.responseHeaders",
        f"{_AT}.match.responseHeaders.name",
        f"{_AT}.match.responseHeaders.value",
        f"{_AT}.match.responseHeaders.value.type",
        f"{_AT}.match.responseHeaders.value.value",
        f"{_AT}.response",
        f"{_AT}.response.contentType",
        f"{_AT}.response.statusCode",
        f"{_AT}.response.body",
        f"{_AT}.response.body.type",
        f"{_AT}.response.body.inline",
        f"{_AT}.response.body.valueRef",
        f"{_AT}.response.body.valueRef.group",
        f"{_AT}.response.body.valueRef.kind",
        f"{_AT}.response.body.valueRef.name",
        f"{_AT}.response.header",
        f"{_AT}.response.header.add",
        f"{_AT}.response.header.add.name",
        f"{_AT}.response.header.add.value",
        f"{_AT}.response.header.set",
        f"{_AT}.response.header.set.name",
        f"{_AT}.response.header.set.value",
        f"{_AT}.redirect",
        f"{_AT}.redirect.scheme",
        f"{_AT}.redirect.hostname",
        f"{_AT}.redirect.port",
        f"{_AT}.redirect.statusCode",
        f"{_AT}.redirect.path",
        f"{_AT}.redirect.path.type",
        f"{_AT}.redirect.path.replaceFullPath",
    }
)


class _Range(msgspec.Struct, frozen=True):
    start: int
    end: int


class _StatusCode(msgspec.Struct, frozen=True):
    type: str = "Value"
    value: int | None = None
    range: _Range | None = None


class _Value(msgspec.Struct, frozen=True):
    value: str
    type: str = "Exact"


class _HeaderMatch(msgspec.Struct, frozen=True):
    name: str
    value: _Value


class _Match(msgspec.Struct, frozen=True, rename="camel"):
    status_codes: tuple[_StatusCode, ...] = ()
    response_headers: tuple[_HeaderMatch, ...] = ()


class _Header(msgspec.Struct, frozen=True):
    name: str
    value: str


class _Headers(msgspec.Struct, frozen=True):
    add: tuple[_Header, ...] = ()
    set: tuple[_Header, ...] = ()


class _Response(msgspec.Struct, frozen=True, rename="camel"):
    content_type: str | None = None
    status_code: int | None = None
    body: specvalue.InlineOrRef | None = None
    header: _Headers | None = None


class _RedirectPath(msgspec.Struct, frozen=True, rename="camel"):
    type: str
    replace_full_path: str | None = None


class _Redirect(msgspec.Struct, frozen=True, rename="camel"):
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    status_code: int = 302
    path: _RedirectPath | None = None


class _Override(msgspec.Struct, frozen=True):
    match: _Match = _Match()
    response: _Response | None = None
    redirect: _Redirect | None = None


def resolve(
    ctx: Any, namespace: str, spec: dict[str, Any]
) -> tuple[tuple[ir.ResponseOverride, ...], list[str]]:
    """The policy's overrides, in order, and what in them cannot be applied (each with its
    place in the spec)."""
    raw = spec.get(_AT)
    out: list[str] = []
    if raw is None:
        return (), out
    try:
        entries = msgspec.convert(raw, tuple[_Override, ...], strict=False)
    except msgspec.ValidationError as exc:
        return (), [f"spec.{_AT}: {exc}"]
    found: list[ir.ResponseOverride] = []
    for i, entry in enumerate(entries):
        at = f"spec.{_AT}[{i}]"
        codes = _codes(entry.match.status_codes, f"{at}.match.statusCodes", out)
        header_matches = _header_matches(
            entry.match.response_headers, f"{at}.match.responseHeaders", out
        )
        if not entry.match.status_codes and not entry.match.response_headers:
            out.append(f"{at}.match: at least one of statusCodes, responseHeaders is needed")
        if entry.redirect is not None:
            if entry.response is not None:
                out.append(f"{at}: response and redirect are both set (one only)")
            found.append(
                ir.ResponseOverride(
                    codes=codes,
                    response_headers=header_matches,
                    redirect=_redirect(entry.redirect, f"{at}.redirect", out),
                )
            )
            continue
        response = entry.response or _Response()
        body = _body(ctx, namespace, response.body, f"{at}.response.body", out)
        status = response.status_code
        if status is not None and not _LOWEST <= status <= _HIGHEST:
            out.append(f"{at}.response.statusCode: {status} is not an HTTP status (100-599)")
            status = None
        found.append(
            ir.ResponseOverride(
                codes=codes,
                response_headers=header_matches,
                body=body,
                content_type=response.content_type,
                status=status,
                headers=_headers(response.header, f"{at}.response.header", out),
            )
        )
    return (tuple(found) if not out else ()), out


def route_effect(overrides: tuple[ir.ResponseOverride, ...], route: ir.Route) -> ir.Route:
    return msgspec.structs.replace(route, response_overrides=overrides) if overrides else route


_VALUE_TYPES = ("Exact", "Prefix", "Suffix", "RegularExpression")


def _header_matches(
    matches: tuple[_HeaderMatch, ...], at: str, out: list[str]
) -> tuple[ir.StringMatch, ...]:
    """The upstream response headers an override needs (all of them: name lowercased, as Envoy
    keeps them)."""
    found: list[ir.StringMatch] = []
    for j, match in enumerate(matches):
        where = f"{at}[{j}]"
        if not specvalue.HEADER_NAME.fullmatch(match.name):
            out.append(f"{where}.name: {match.name!r} is not a header name")
        if match.value.type not in _VALUE_TYPES:
            out.append(
                f"{where}.value.type: {match.value.type!r} is not one of {', '.join(_VALUE_TYPES)}"
            )
        elif match.value.type == "RegularExpression" and (err := re2_error(match.value.value)):
            out.append(
                f"{where}.value.value: {match.value.value!r} is not a valid regular expression: "
                f"{err}"
            )
        found.append(
            ir.StringMatch(name=match.name.lower(), type=match.value.type, value=match.value.value)
        )
    return tuple(found)


def _codes(
    status_codes: tuple[_StatusCode, ...], at: str, out: list[str]
) -> tuple[tuple[int, int], ...]:
    codes: list[tuple[int, int]] = []
    for j, code in enumerate(status_codes):
        where = f"{at}[{j}]"
        if code.type == "Value" and code.value is not None:
            span = (code.value, code.value)
        elif code.type == "Range" and code.range is not None:
            span = (code.range.start, code.range.end)
            if span[0] >= span[1]:
                out.append(f"{where}.range: end must be greater than start")
                continue
        elif code.type in ("Value", "Range"):
            out.append(f"{where}: type {code.type} needs its {code.type.lower()}")
            continue
        else:
            out.append(f"{where}.type: {code.type!r} is not one of Value, Range")
            continue
        if not (span[0] >= _LOWEST and span[1] <= _HIGHEST):
            out.append(f"{where}: {span[0]}-{span[1]} is outside the HTTP statuses (100-599)")
            continue
        codes.append(span)
    return tuple(codes)


# The CRD's PreciseHostname: lowercase DNS labels, no wildcard
_HOSTNAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _redirect(redirect: _Redirect, at: str, out: list[str]) -> ir.Redirect:
    """The redirect of an override (at ``at``); its problems go to ``out``."""
    if redirect.scheme is not None and redirect.scheme not in ("http", "https"):
        out.append(f"{at}.scheme: {redirect.scheme!r} is not one of http, https")
    if redirect.hostname is not None and (
        len(redirect.hostname) > 253 or not _HOSTNAME.fullmatch(redirect.hostname)
    ):
        out.append(f"{at}.hostname: {redirect.hostname!r} is not a host name")
    if redirect.port is not None and not 0 < redirect.port < 65536:
        out.append(f"{at}.port: {redirect.port} is not a port number (1-65535)")
    if redirect.status_code not in (301, 302):
        out.append(f"{at}.statusCode: {redirect.status_code} is not one of 301, 302")
    path = redirect.path
    if path is not None and path.type != "ReplaceFullPath":
        out.append(f"{at}.path.type: {path.type!r}: only ReplaceFullPath is supported")
    elif path is not None and (
        path.replace_full_path is None
        or not path.replace_full_path.startswith("/")
        or any(c in path.replace_full_path for c in "\r\n\0")
    ):
        out.append(
            f"{at}.path.replaceFullPath: {path.replace_full_path!r} is not a path (starting with /)"
        )
    return ir.Redirect(
        scheme=redirect.scheme,
        hostname=redirect.hostname,
        port=redirect.port,
        path_type=None if path is None else path.type,
        path=None if path is None else path.replace_full_path,
        status_code=redirect.status_code,
    )


def _headers(headers: _Headers | None, at: str, out: list[str]) -> ir.HeaderMods | None:
    """The headers the override's answer gets (``add``: beside any of the name, ``set``: in
    place of them); None when none."""
    if headers is None or not (headers.add or headers.set):
        return None
    for key, pairs in (("add", headers.add), ("set", headers.set)):
        for i, header in enumerate(pairs):
            if not specvalue.HEADER_NAME.fullmatch(header.name):
                out.append(f"{at}.{key}[{i}].name: {header.name!r} is not a header name")
            if any(c in header.value for c in "\r\n\0"):
                out.append(f"{at}.{key}[{i}].value: {header.value!r} has a line break or NUL")
    return ir.HeaderMods(
        set=tuple((h.name, h.value) for h in headers.set),
        add=tuple((h.name, h.value) for h in headers.add),
    )


def _body(
    ctx: Any, namespace: str, body: specvalue.InlineOrRef | None, at: str, out: list[str]
) -> str | None:
    if body is None:
        return None
    text = specvalue.inline_or_ref(ctx, namespace, body, at, out, BODY_KEY, first=False)
    return None if text is None else body_format(text, at, out)


# Envoy's format operators (command, argument, length): a % and capitals, digits or _, an
# argument in parentheses, a length after a colon, a closing %.
_OPERATOR = re.compile(r"%([A-Z0-9_]+)(?:\(([^)]*)\))?(?::([0-9]+))?%")
# The operators a body may use: Envoy 1.40 has each (tests/xds/test_policy_response_override.py
# has Envoy check them all); another is a problem, not a configuration Envoy would refuse.
_PLAIN_OPERATORS = frozenset(
    {
        "RESPONSE_CODE",
        "RESPONSE_CODE_DETAILS",
        "RESPONSE_FLAGS",
        "RESPONSE_FLAGS_LONG",
        "PROTOCOL",
        "UPSTREAM_PROTOCOL",
        "UPSTREAM_HOST",
        "UPSTREAM_CLUSTER",
        "UPSTREAM_LOCAL_ADDRESS",
        "UPSTREAM_TRANSPORT_FAILURE_REASON",
        "DOWNSTREAM_REMOTE_ADDRESS",
        "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT",
        "DOWNSTREAM_LOCAL_ADDRESS",
        "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT",
        "DOWNSTREAM_DIRECT_REMOTE_ADDRESS",
        "DOWNSTREAM_LOCAL_PORT",
        "ROUTE_NAME",
        "HOSTNAME",
        "REQUESTED_SERVER_NAME",
        "REQUEST_DURATION",
        "RESPONSE_DURATION",
        "DURATION",
        "BYTES_RECEIVED",
        "BYTES_SENT",
        "CONNECTION_ID",
        "STREAM_ID",
        "UPSTREAM_REQUEST_ATTEMPT_COUNT",
    }
)
_HEADER_OPERATORS = frozenset({"REQ", "RESP", "TRAILER"})  # (name) or (name?alternative)
_TIME_OPERATORS = frozenset({"START_TIME", "EMIT_TIME"})  # an optional strftime-like format
_HEADER_ARGUMENT = re.compile(r"[A-Za-z0-9_:-]+(\?[A-Za-z0-9_:-]+)?")


def body_format(text: str, at: str, out: list[str]) -> str:
    """The body ``text`` as the Envoy format string Envoy Gateway makes of it: its operators
    (``%RESPONSE_CODE%``, ``%REQ(x-id)%``...) are replaced in each answer and ``%%`` is a ``%``,
    as there; any other ``%`` stands for itself (escaped, where Envoy would refuse the body). An
    operator gateweave does not know is a problem in ``out``."""
    parts: list[str] = []
    pos = 0
    while (i := text.find("%", pos)) >= 0:
        parts.append(text[pos:i])
        found = _OPERATOR.match(text, i)
        if text.startswith("%%", i) or found is None:
            parts.append("%%")
            pos = i + (2 if text.startswith("%%", i) else 1)
            continue
        command, argument, length = found.groups()
        if not _known_operator(command, argument, length):
            out.append(
                f"{at}: {found.group(0)!r} is not a format operator gateweave supports "
                "(%% writes a %)"
            )
        parts.append(found.group(0))
        pos = found.end()
    parts.append(text[pos:])
    return "".join(parts)


def _known_operator(command: str, argument: str | None, length: str | None) -> bool:
    if command in _HEADER_OPERATORS:
        return argument is not None and _HEADER_ARGUMENT.fullmatch(argument) is not None
    if length is not None:
        return False
    if command in _TIME_OPERATORS:
        return True
    return command in _PLAIN_OPERATORS and argument is None
