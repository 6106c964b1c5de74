"""RE2 checks: every regular expression that reaches Envoy must compile in RE2 (Envoy's dialect)."""

from __future__ import annotations

from functools import lru_cache

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error goes into a condition message, not to stderr


@lru_cache(maxsize=8192)
def re2_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid RE2 expression, or None when it is (memoised: pure)."""
    try:
        re2.compile(pattern, _OPTIONS)
    except Exception as exc:  # re2.error, and TypeError/ValueError on odd input
        text = exc.args[0] if exc.args else str(exc)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return str(text) or "invalid regular expression"
    return None


def re2_escape(text: str) -> str:
    """``text`` as an RE2 literal."""
    out = []
    for ch in text:
        out.append(ch if ch.isalnum() or ch == "_" else "\\" + ch if ch.isascii() else ch)
    return "".join(out)
