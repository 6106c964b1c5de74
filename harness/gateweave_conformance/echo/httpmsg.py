"""HTTP semantics shared by HTTP/1.x and HTTP/2: requests, responses and Go's header rules."""

from __future__ import annotations

import dataclasses
import email.utils
import re
from collections.abc import Iterable
from urllib.parse import quote, unquote_plus

from gateweave_conformance.echo.tlsinfo import TLSState

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def is_token(name: str) -> bool:
    return bool(_TOKEN.fullmatch(name))


def canonical_key(name: str) -> str:
    """Go's ``textproto.CanonicalMIMEHeaderKey``: ``x-foo-bar`` -> ``X-Foo-Bar``.

    Names with a byte that is not a token character are returned unchanged.
    """
    if not is_token(name):
        return name
    out = []
    upper = True
    for ch in name:
        if upper and "a" <= ch <= "z":
            ch = ch.upper()
        elif not upper and "A" <= ch <= "Z":
            ch = ch.lower()
        out.append(ch)
        upper = ch == "-"
    return "".join(out)


def merge_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Canonical name -> values in arrival order (names differing in case are merged)."""
    merged: dict[str, list[str]] = {}
    for name, value in pairs:
        merged.setdefault(canonical_key(name), []).append(value)
    return merged


@dataclasses.dataclass
class Request:
    """One request as the echo handler sees it (Go's ``http.Request``)."""

    method: str
    target: str  # raw request-target / :path, query included
    host: str
    proto: str  # HTTP/1.0, HTTP/1.1, HTTP/2.0
    headers: dict[str, list[str]]  # canonical names, Host excluded
    remote: str  # "ip:port"
    tls: TLSState | None = None

    @property
    def raw_path(self) -> str:
        target = self.target
        if target.startswith(("http://", "https://")):
            rest = target.split("://", 1)[1]
            slash = rest.find("/")
            qmark = rest.find("?")
            cut = min(i for i in (slash, qmark, len(rest)) if i >= 0)
            target = rest[cut:] or "/"
        return target.split("?", 1)[0]

    @property
    def raw_query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def query_get(self, key: str) -> str:
        """``r.URL.Query().Get(key)``: the first value, ``""`` when absent."""
        return query_get(self.raw_query, key)

    def header_get(self, name: str) -> str:
        values = self.headers.get(canonical_key(name))
        return values[0] if values else ""


@dataclasses.dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    body: bytes = b""


class ResetConnection(Exception):
    """The handler wants the TCP connection aborted with an RST (retry simulation)."""


def query_get(raw_query: str, key: str) -> str:
    """Go's ``url.ParseQuery`` then ``Get``: ``&``-separated, pairs with ``;`` skipped."""
    for pair in raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        name, _, value = pair.partition("=")
        if unquote_plus(name) == key:
            return unquote_plus(value)
    return ""


def go_clean_path(path: str) -> str:
    """Go's ``cleanPath`` used by ServeMux: rooted ``path.Clean`` keeping a trailing slash."""
    if not path:
        return "/"
    if path[0] != "/":
        path = "/" + path
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if parts:
                parts.pop()
            continue
        parts.append(segment)
    cleaned = "/" + "/".join(parts)
    if path.endswith("/") and cleaned != "/":
        cleaned += "/"
    return cleaned


def escape_path(path: str) -> str:
    """Go's ``url.URL.EscapedPath`` for a path without a valid RawPath (close enough)."""
    return quote(path, safe="/!$&'()*+,;=:@-._~")


def echo_set_headers(values: list[str]) -> list[tuple[str, str]]:
    """Response headers asked for by ``X-Echo-Set-Header`` values (ECHO.md, section 1).

    The first item for a name sets it (name case kept); later ones append ``,value``.
    Names that are not valid header names are dropped, as Go's writer drops them.
    """
    out: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            name, _, item_value = item.strip().partition(":")
            if name not in out:
                out[name] = item_value
            else:
                out[name] += "," + item_value.strip()
    return [(name, val.strip()) for name, val in out.items() if name and is_token(name)]


def http_date() -> str:
    return email.utils.formatdate(usegmt=True)


REASONS = {
    200: "OK",
    301: "Moved Permanently",
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}
