"""Regular expressions as Envoy takes them: every one gateweave sends must compile in RE2 the way
Envoy compiles it and stay within the limits Envoy applies, or Envoy refuses the whole resource it
is in (a NACK that would freeze every other route of the same route table).

Measured against the pinned Envoy (1.40, ``envoy --mode validate``;
tests/translate/test_envoy_limits.py):

* Envoy compiles the pattern's UTF-8 bytes as Latin-1 text: its program sizes and errors are
  those of ``google-re2`` with ``encoding=LATIN1`` on the encoded pattern (``\\x{100}`` is an
  error there, ``[^/]`` costs 6 instructions, not the 12 of UTF-8 mode).
* Envoy's ``google_re2`` engine refuses a regex whose RE2 program is larger than the runtime value
  ``re2.max_program_size.error_level``: 100 unless the bootstrap's runtime sets it, and
  gateweave's does not. Roughly one instruction per literal byte, so ``a{100}``, a 97-byte literal
  path or ``[a-z0-9-]{1,64}`` are all too large.
* ``RegexMatcher.regex`` has ``min_len: 1``: an empty regex is refused.
"""

from __future__ import annotations

from functools import lru_cache

import re2

# Envoy's re2.max_program_size.error_level default (source/common/common/regex.cc).
ENVOY_MAX_PROGRAM_SIZE = 100

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error goes into a condition message, not to stderr
_OPTIONS.encoding = re2.Options.Encoding.LATIN1  # as Envoy compiles (see above)


@lru_cache(maxsize=8192)
def re2_error(pattern: str) -> str | None:
    """Why Envoy would refuse ``pattern``, or None when it takes it (memoised: pure)."""
    if not pattern:
        return "Envoy does not take an empty regular expression"
    try:
        compiled = re2.compile(pattern.encode("utf-8"), _OPTIONS)
    except Exception as exc:  # re2.error, and TypeError/ValueError on odd input
        text = exc.args[0] if exc.args else str(exc)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return str(text) or "invalid regular expression"
    size = compiled.programsize
    if size > ENVOY_MAX_PROGRAM_SIZE:
        return (
            f"RE2 program size {size} is over Envoy's limit of {ENVOY_MAX_PROGRAM_SIZE}"
            " (re2.max_program_size.error_level); simplify it, e.g. fewer or smaller repetition "
            "counts"
        )
    return None


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def re2_escape(text: str) -> str:
    """``text`` as an RE2 literal (only RE2's special characters escaped)."""
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in text)


def origin_regex(origin: str) -> str | None:
    """The RE2 pattern a CORS allowOrigin with a ``*`` label is matched with (``*`` stands for
    one or more characters other than ``/``), or None when it is matched exactly or is ``*``."""
    if origin == "*" or "*" not in origin:
        return None
    return "^" + "[^/]+".join(re2_escape(part) for part in origin.split("*")) + "$"
