"""The regular expressions the schemas use on values that seldom repeat, as Python checks.

Every route has paths, hostnames and header values of its own, so the cost of a regex call
is paid per value; RE2 through its Python module costs about a microsecond a call, these
checks a fraction of that. Each answers exactly what RE2 answers for its pattern (the
patterns are keyed by their exact text; tests/api/test_schemacode.py compares each with
RE2 on generated strings); any other pattern goes to RE2.
"""

from __future__ import annotations

from collections.abc import Callable

# Strings found to pass a check (a pattern, a format) are remembered, per check, in a set
# of at most this many strings (cleared when full) of at most this many characters.
PASSED_MAX = 65_536
PASSED_LEN = 256


def remember(passed: set[str], text: str) -> None:
    """Note in ``passed`` (bounded, see :data:`PASSED_MAX`) that ``text`` passed its check."""
    if len(text) <= PASSED_LEN:
        if len(passed) >= PASSED_MAX:
            passed.clear()
        passed.add(text)


_LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"
_LABEL_CHARS = frozenset(_LOWER_DIGITS + "-")
_SUBDOMAIN_CHARS = _LABEL_CHARS | {"."}
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_PATH_CHARS = frozenset(
    "-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._~!$&'()*+,;=:@"
)
_HEX = frozenset("0123456789abcdefABCDEF")
_VISIBLE = frozenset(chr(c) for c in range(0x21, 0x7F))  # [!-~]
_VISIBLE_OR_BLANK = _VISIBLE | {" ", "\t"}


def dns1123_label(value: str) -> bool:
    """``^[a-z0-9]([-a-z0-9]*[a-z0-9])?$``"""
    return bool(value) and value[0] != "-" and value[-1] != "-" and _LABEL_CHARS.issuperset(value)


def dns1123_subdomain(value: str) -> bool:
    """``^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$``: labels joined by
    dots.
    """
    # every label non-empty and neither starting nor ending with "-", in one pass of C checks
    return (
        bool(value)
        and value[0] not in "-."
        and value[-1] not in "-."
        and _SUBDOMAIN_CHARS.issuperset(value)
        and ".." not in value
        and ".-" not in value
        and "-." not in value
    )


def dns1035_label(value: str) -> bool:
    """``^[a-z]([-a-z0-9]*[a-z0-9])?$``"""
    return (
        bool(value) and value[0] in _LETTERS and value[-1] != "-" and _LABEL_CHARS.issuperset(value)
    )


def hostname(value: str) -> bool:
    """``^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$``: a
    subdomain, or ``*.`` and a subdomain."""
    return dns1123_subdomain(value[2:] if value.startswith("*.") else value)


def http_path(value: str) -> bool:
    """``^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$``: path characters, and ``%``
    only before two hexadecimal digits."""
    if "%" not in value:
        return bool(value) and _PATH_CHARS.issuperset(value)
    first, *escaped = value.split("%")
    if not _PATH_CHARS.issuperset(first):
        return False
    return all(
        len(p) >= 2 and p[0] in _HEX and p[1] in _HEX and _PATH_CHARS.issuperset(p[2:])
        for p in escaped
    )


def header_value(value: str) -> bool:
    """``^[!-~]+([\\t ]?[!-~]+)*$``: visible characters, single spaces or tabs between them."""
    return (
        bool(value)
        and value[0] in _VISIBLE
        and value[-1] in _VISIBLE
        and _VISIBLE_OR_BLANK.issuperset(value)
        and "  " not in value
        and "\t\t" not in value
        and " \t" not in value
        and "\t " not in value
    )


CHECKS: dict[str, Callable[[str], bool]] = {
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": dns1123_label,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$": dns1123_subdomain,
    r"^[a-z]([-a-z0-9]*[a-z0-9])?$": dns1035_label,
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$": hostname,
    r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$": http_path,
    r"^[!-~]+([\t ]?[!-~]+)*$": header_value,
}
"""Exact pattern text -> the check that answers as RE2 does."""
