"""JSON encoded the way Go's encoding/json does it, so bodies match upstream byte for byte."""

from __future__ import annotations

import json
from typing import Any

_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _escape_html(text: str) -> str:
    # These characters only ever occur inside JSON strings, so replacing them in the
    # whole document equals Go's per-string HTML escaping.
    for raw, escaped in _GO_ESCAPES:
        text = text.replace(raw, escaped)
    return text


def marshal(value: Any) -> bytes:
    """``json.Marshal``: compact, HTML characters escaped, UTF-8 kept."""
    return _escape_html(json.dumps(value, ensure_ascii=False, separators=(",", ":"))).encode()


def marshal_indent(value: Any) -> bytes:
    """``json.MarshalIndent(v, "", " ")``: one space per level, no trailing newline."""
    return _escape_html(json.dumps(value, ensure_ascii=False, indent=1)).encode()


def go_string(raw: bytes) -> str:
    """A Go string of arbitrary bytes as encoding/json sees it (invalid UTF-8 -> U+FFFD)."""
    return raw.decode("utf-8", errors="replace")
