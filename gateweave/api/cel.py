"""CEL for CRD ``x-kubernetes-validations`` rules, with the Kubernetes CEL libraries.

cel-python (``celpy``) parses each rule; its parse tree is then compiled once
into Python closures and cached, because celpy's tree-walking interpreter costs
0.5-3 ms per evaluation (too slow for every object at load) and its transpiler
fails on several Gateway API rules. The closures follow CEL semantics: strict
types, errors that ``&&``/``||`` and the ``all``/``exists`` macros absorb when the
other side decides, ``has()`` on fields, int64 overflow.

Provided besides the CEL standard functions (implemented here in Python, as
Kubernetes provides them in Go): the string extensions (``substring``, ``split``,
``lowerAscii``, ``upperAscii``, ``indexOf``, ``lastIndexOf``, ``replace``, ``trim``,
``charAt``, ``join``), RE2 ``matches``, the list library (``isSorted``, ``sum``,
``min``, ``max``, ``indexOf``), ``isIP``/``ip()`` (``family``, ``isLoopback``...),
``isCIDR``/``cidr()`` (``containsIP``, ``prefixLength``...), ``isURL``/``url()``
(``getScheme``, ``getHost``...), ``duration()``, and the format library
(``format.dns1123Label().validate(s)`` ...). Field names escaped the Kubernetes way
(``__namespace__``, ``__dash__``...) are unescaped on field selection.
"""

from __future__ import annotations

import functools
import importlib
import ipaddress
import itertools
import math
import urllib.parse
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import re2

from gateweave.api import patterns
from gateweave.api.limits import clip, quote


class _OnFirstUse:
    """A module imported when one of its names is first read: celpy and lark (about 17 MB and,
    for celpy's parser, 0.9 s) serve only to parse rules, which a process that imports the
    generated validators (:mod:`gateweave.api.codecache`) does for invalid objects alone."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        value = getattr(module, attr)
        setattr(self, attr, value)
        return value


if TYPE_CHECKING:
    import celpy
    import lark as lark  # (gateweave.api.celcode reads it from here)
else:
    celpy = _OnFirstUse("celpy")
    lark = _OnFirstUse("lark")

Env = dict[str, Any]
Fn = Callable[[Env], Any]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


class CelError(Exception):
    """A CEL evaluation error (no such key, no such overload, ...)."""


class CelCompileError(Exception):
    """A rule that cannot be parsed or uses a construct that is not supported."""


# ---------------------------------------------------------------- values


class Duration:
    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.ns == self.ns

    def __lt__(self, other: Duration) -> bool:
        return self.ns < other.ns

    def __le__(self, other: Duration) -> bool:
        return self.ns <= other.ns

    def __hash__(self) -> int:
        return hash(self.ns)

    def __repr__(self) -> str:
        return f"duration({self.ns}ns)"


_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_DURATION_PART = re2.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> Duration:
    """A Go ``time.ParseDuration`` string ("1h2m", "1.5s", "300ms", "0")."""
    s = text
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return Duration(0)
    if not s:
        raise CelError(f"invalid duration {quote(text)}")
    total = 0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.start() != pos:
            raise CelError(f"invalid duration {quote(text)}")
        number, unit = m.group(1), m.group(2)
        whole, _, frac = number.partition(".")
        scale = _UNITS[unit]
        total += int(whole or "0") * scale
        if frac:
            total += int(frac) * scale // 10 ** len(frac)
        pos = m.end()
    total *= sign
    if not INT64_MIN <= total <= INT64_MAX:
        raise CelError(f"duration out of range {quote(text)}")
    return Duration(total)


class IP:
    __slots__ = ("addr",)

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.addr == self.addr

    def __hash__(self) -> int:
        return hash(self.addr)


class CIDR:
    __slots__ = ("addr", "net")

    def __init__(self, addr: IP, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        self.addr = addr
        self.net = net

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and other.addr == self.addr and other.net == self.net

    def __hash__(self) -> int:
        return hash((self.addr, self.net))


class URL:
    __slots__ = ("parts",)

    def __init__(self, parts: urllib.parse.SplitResult) -> None:
        self.parts = parts


class FormatLib:
    """The value of the identifier ``format`` (Kubernetes format library)."""


class FormatValidator:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


FORMAT_LIB = FormatLib()


def _type_name(v: Any) -> str:
    if v is None:
        return "null_type"
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        bytes: "bytes",
        list: "list",
        dict: "map",
    }.get(type(v), type(v).__name__)


def _overload(name: str, *args: Any) -> CelError:
    return CelError(f"no such overload: {name}({', '.join(_type_name(a) for a in args)})")


def _int64(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise CelError("integer overflow")
    return v


# ---------------------------------------------------------------- equality and ordering


def cel_eq(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is list:
            return len(a) == len(b) and all(cel_eq(x, y) for x, y in zip(a, b, strict=True))
        if ta is dict:
            return a.keys() == b.keys() and all(cel_eq(v, b[k]) for k, v in a.items())
        return bool(a == b)
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    return False


def _cmp_ok(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is tb and ta in (int, float, str, bytes, bool, Duration):
        return True
    return ta in (int, float) and tb in (int, float)


def _lt(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise _overload("_<_", a, b)
    return bool(a < b)


def _le(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise _overload("_<=_", a, b)
    return bool(a <= b)


def _in(a: Any, b: Any) -> bool:
    if type(b) is list:
        return any(cel_eq(a, x) for x in b)
    if type(b) is dict:
        return a in b if isinstance(a, (str, int, bool)) else False
    raise _overload("@in", a, b)


def _add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return _int64(a + b)
        if ta in (float, str, bytes, list):
            return a + b
        if ta is Duration:
            return Duration(_int64(a.ns + b.ns))
    raise _overload("_+_", a, b)


def _sub(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return _int64(a - b)
        if ta is float:
            return a - b
        if ta is Duration:
            return Duration(_int64(a.ns - b.ns))
    raise _overload("_-_", a, b)


def _mul(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb and ta is int:
        return _int64(a * b)
    if ta is tb and ta is float:
        return a * b
    raise _overload("_*_", a, b)


def _div(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb and ta is int:
        if b == 0:
            raise CelError("division by zero")
        q = abs(a) // abs(b)
        return _int64(q if (a >= 0) == (b >= 0) else -q)
    if ta is tb and ta is float:
        if b == 0:
            return math.copysign(math.inf, a) if a else math.nan
        return a / b
    raise _overload("_/_", a, b)


def _mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        if b == 0:
            raise CelError("modulus by zero")
        return int(math.fmod(a, b))
    raise _overload("_%_", a, b)


def _neg(a: Any) -> Any:
    if type(a) is int:
        return _int64(-a)
    if type(a) is float:
        return -a
    if type(a) is Duration:
        return Duration(-a.ns)
    raise _overload("-_", a)


def _not(a: Any) -> bool:
    if type(a) is bool:
        return not a
    raise _overload("!_", a)


# ---------------------------------------------------------------- regexes

RE_CACHE_SIZE = (
    1024  # compiled regexes kept (least recently used dropped): patterns may come from input
)
_RE_OPTIONS = re2.Options()
_RE_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=RE_CACHE_SIZE)
def compile_re2(pattern: str) -> Any:
    """A compiled RE2 regex (the last RE_CACHE_SIZE used are cached); raises ValueError
    for an invalid pattern."""
    try:
        return re2.compile(pattern, options=_RE_OPTIONS)
    except Exception as exc:
        raise ValueError(f"invalid RE2 regex {quote(pattern)}: {clip(str(exc))}") from None


_UNANCHORED = re2._Anchor.UNANCHORED
_NO_MATCH = re2._NULL_SPAN
_SEARCH_OPTIONS = re2.Options()
_SEARCH_OPTIONS.log_errors = False
_SEARCH_OPTIONS.never_capture = True  # only "is there a match": RE2 then runs its DFA alone


@functools.lru_cache(maxsize=RE_CACHE_SIZE)
def search_program(pattern: str) -> Any:
    """``pattern`` compiled for :func:`found` (cached as compile_re2 is; the same ValueError)."""
    compile_re2(pattern)
    return re2.compile(pattern, options=_SEARCH_OPTIONS)._regexp


def found(program: Any, text: str) -> bool:
    """Whether the :func:`search_program` ``program`` matches somewhere in ``text``; raises
    UnicodeEncodeError for a string with lone surrogates (not UTF-8)."""
    data = text.encode("utf-8")
    return bool(program.Match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)


def re2_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``, as ``compile_re2(pattern).search(text)
    is not None`` says; raises ValueError for an invalid pattern (and, as search does,
    UnicodeEncodeError for a string that is not UTF-8).

    Asks RE2 directly, on the UTF-8 bytes that ``search`` itself hands it, with a program
    compiled without capture groups: the ``re2`` module's ``search`` also finds every
    group's span and maps each back to character offsets, most of its cost, for a match
    object this answer does not need. The patterns of :data:`patterns.CHECKS` are
    answered by their Python checks."""
    check = patterns.CHECKS.get(pattern)
    if check is not None:
        return check(text)
    return found(search_program(pattern), text)


# ---------------------------------------------------------------- library functions


def _str(v: Any, fn: str, *rest: Any) -> str:
    if type(v) is not str:
        raise _overload(fn, v, *rest)
    return v


def _matches(s: Any, pattern: Any) -> bool:
    _str(s, "matches", pattern)
    _str(pattern, "matches", s)
    try:
        return re2_search(pattern, s)
    except ValueError as exc:
        raise CelError(str(exc)) from None


def _size(v: Any) -> int:
    if type(v) in (str, list, dict, bytes):
        return len(v)
    raise _overload("size", v)


def _contains(s: Any, sub: Any) -> bool:
    return _str(sub, "contains", s) in _str(s, "contains", sub)


def _starts(s: Any, p: Any) -> bool:
    return _str(s, "startsWith", p).startswith(_str(p, "startsWith", s))


def _ends(s: Any, p: Any) -> bool:
    return _str(s, "endsWith", p).endswith(_str(p, "endsWith", s))


def _substring(s: Any, start: Any, end: Any = None) -> str:
    _str(s, "substring", start)
    stop = len(s) if end is None else end
    if type(start) is not int or type(stop) is not int:
        raise _overload("substring", s, start)
    if not 0 <= start <= stop <= len(s):
        raise CelError(f"substring: index out of range: {start}, {stop}")
    return str(s[start:stop])


def _split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    _str(s, "split", sep)
    _str(sep, "split", s)
    if type(n) is not int:
        raise _overload("split", s, sep, n)
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if n > 0 and len(chars) > n:
            chars = [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    return s.split(sep) if n < 0 else s.split(sep, n - 1)


def _index_of(v: Any, sub: Any, start: Any = 0) -> int:
    if type(v) is list:
        for i, x in enumerate(v):
            if cel_eq(x, sub):
                return i
        return -1
    _str(v, "indexOf", sub)
    _str(sub, "indexOf", v)
    if type(start) is not int or not 0 <= start <= len(v):
        raise CelError("indexOf: index out of range")
    return v.find(sub, start)


def _last_index_of(v: Any, sub: Any, end: Any = None) -> int:
    if type(v) is list:
        for i in range(len(v) - 1, -1, -1):
            if cel_eq(v[i], sub):
                return i
        return -1
    _str(v, "lastIndexOf", sub)
    _str(sub, "lastIndexOf", v)
    if end is None:
        return v.rfind(sub)
    if type(end) is not int or not 0 <= end < max(len(v), 1):
        raise CelError("lastIndexOf: index out of range")
    return v.rfind(sub, 0, end + len(sub))


def _lower_ascii(s: Any) -> str:
    return "".join(c.lower() if c.isascii() else c for c in _str(s, "lowerAscii"))


def _upper_ascii(s: Any) -> str:
    return "".join(c.upper() if c.isascii() else c for c in _str(s, "upperAscii"))


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _str(s, "replace")
    _str(old, "replace")
    _str(new, "replace")
    if type(n) is not int:
        raise _overload("replace", s, old, new, n)
    return s.replace(old, new, n if n >= 0 else -1)


def _trim(s: Any) -> str:
    return _str(s, "trim").strip()


def _char_at(s: Any, i: Any) -> str:
    _str(s, "charAt", i)
    if type(i) is not int or not 0 <= i <= len(s):
        raise CelError("charAt: index out of range")
    return s[i : i + 1]


def _join(lst: Any, sep: Any = "") -> str:
    if type(lst) is not list or any(type(x) is not str for x in lst):
        raise _overload("join", lst, sep)
    return _str(sep, "join", lst).join(lst)


def _is_sorted(lst: Any) -> bool:
    if type(lst) is not list:
        raise _overload("isSorted", lst)
    return all(_le(a, b) for a, b in itertools.pairwise(lst))


def _sum(lst: Any) -> Any:
    if type(lst) is not list:
        raise _overload("sum", lst)
    if not lst:
        return 0
    total: Any = lst[0]
    for x in lst[1:]:
        total = _add(total, x)
    return total


def _min(lst: Any) -> Any:
    if type(lst) is not list or not lst:
        raise CelError(
            "min called on an empty list" if type(lst) is list else "no such overload: min"
        )
    best = lst[0]
    for x in lst[1:]:
        if _lt(x, best):
            best = x
    return best


def _max(lst: Any) -> Any:
    if type(lst) is not list or not lst:
        raise CelError(
            "max called on an empty list" if type(lst) is list else "no such overload: max"
        )
    best = lst[0]
    for x in lst[1:]:
        if _lt(best, x):
            best = x
    return best


def _parse_ip(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if "%" in s:  # zones are not allowed
        return None
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return None  # IPv4-mapped IPv6 addresses are rejected by the Kubernetes IP library
    return addr


def _is_ip(s: Any) -> bool:
    return _parse_ip(_str(s, "isIP")) is not None


def _ip(v: Any) -> IP:
    if type(v) is CIDR:
        return v.addr
    addr = _parse_ip(_str(v, "ip"))
    if addr is None:
        raise CelError(f"IP Address {quote(str(v))} parse error during conversion from string")
    return IP(addr)


def _parse_cidr(s: str) -> CIDR | None:
    ip_text, slash, bits = s.partition("/")
    addr = _parse_ip(ip_text)
    if addr is None or not slash or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        return None
    try:
        net = ipaddress.ip_network(s, strict=False)
    except ValueError:
        return None
    return CIDR(IP(addr), net)


def _is_cidr(s: Any) -> bool:
    return _parse_cidr(_str(s, "isCIDR")) is not None


def _cidr(s: Any) -> CIDR:
    c = _parse_cidr(_str(s, "cidr"))
    if c is None:
        raise CelError(f"network address {quote(str(s))} parse error during conversion from string")
    return c


def _family(v: Any) -> int:
    if type(v) is not IP:
        raise _overload("family", v)
    return v.addr.version


def _ip_pred(name: str, pred: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def f(v: Any) -> bool:
        if type(v) is not IP:
            raise _overload(name, v)
        return pred(v.addr)

    return f


def _contains_ip(c: Any, other: Any) -> bool:
    if type(c) is not CIDR:
        raise _overload("containsIP", c, other)
    addr = _ip(other).addr
    return addr.version == c.net.version and addr in c.net


def _contains_cidr(c: Any, other: Any) -> bool:
    if type(c) is not CIDR:
        raise _overload("containsCIDR", c, other)
    o = other if type(other) is CIDR else _cidr(other)
    return o.net.version == c.net.version and o.net.subnet_of(c.net)  # type: ignore[arg-type]


def _prefix_length(c: Any) -> int:
    if type(c) is not CIDR:
        raise _overload("prefixLength", c)
    return c.net.prefixlen


def _masked(c: Any) -> CIDR:
    if type(c) is not CIDR:
        raise _overload("masked", c)
    return CIDR(IP(c.net.network_address), c.net)


def _parse_url(s: str) -> URL | None:
    try:
        parts = urllib.parse.urlsplit(s)
    except ValueError:
        return None
    if not parts.scheme and not s.startswith("/"):
        return None  # Kubernetes requires an absolute URI or an absolute path
    return URL(parts)


def _is_url(s: Any) -> bool:
    return _parse_url(_str(s, "isURL")) is not None


def _url(s: Any) -> URL:
    u = _parse_url(_str(s, "url"))
    if u is None:
        raise CelError(f"URL {quote(str(s))} parse error during conversion from string")
    return u


def _url_part(name: str, part: Callable[[urllib.parse.SplitResult], str]) -> Callable[[Any], str]:
    def f(u: Any) -> str:
        if type(u) is not URL:
            raise _overload(name, u)
        return part(u.parts)

    return f


def _string(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) in (int, float):
        return str(v)
    if type(v) is bytes:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes") from None
    if type(v) is IP:
        return str(v.addr)
    if type(v) is CIDR:
        return f"{v.addr.addr}/{v.net.prefixlen}"
    if type(v) is URL:
        return v.parts.geturl()
    raise _overload("string", v)


def _int(v: Any) -> int:
    if type(v) is int:
        return v
    if type(v) is float:
        if math.isnan(v) or not INT64_MIN <= v <= INT64_MAX:
            raise CelError("int() range error")
        return int(v)
    if type(v) is str:
        try:
            return _int64(int(v, 10))
        except ValueError:
            raise CelError(f"cannot convert {clip(repr(v))} to int") from None
    if type(v) is Duration:
        return v.ns // 10**9
    raise _overload("int", v)


def _uint(v: Any) -> int:
    n = _int(v)
    if not 0 <= n <= UINT64_MAX:
        raise CelError("uint range error")
    return n


def _bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str and v in (
        "true",
        "false",
        "True",
        "False",
        "TRUE",
        "FALSE",
        "t",
        "f",
        "1",
        "0",
    ):
        return v in ("true", "True", "TRUE", "t", "1")
    raise _overload("bool", v)


def _bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    return _str(v, "bytes").encode()


def _double(v: Any) -> float:
    if type(v) in (int, float):
        return float(v)
    if type(v) is str:
        try:
            return float(v)
        except ValueError:
            raise CelError(f"cannot convert {clip(repr(v))} to double") from None
    raise _overload("double", v)


def _duration(v: Any) -> Duration:
    if type(v) is Duration:
        return v
    return parse_duration(_str(v, "duration"))


def _dur_part(name: str, unit: int) -> Callable[[Any], int]:
    def f(d: Any) -> int:
        if type(d) is not Duration:
            raise _overload(name, d)
        return int(d.ns / unit)

    return f


# Kubernetes format library (k8s.io/apiserver/pkg/cel/library/format.go)
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_FORMATS: dict[str, tuple[str, int, str]] = {
    # name: (regex, max length, message)
    "dns1123Label": (
        _DNS1123_LABEL,
        63,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
        "must start and end with an alphanumeric character",
    ),
    "dns1123Subdomain": (
        _DNS1123_SUBDOMAIN,
        253,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character",
    ),
    "dns1035Label": (
        _DNS1035_LABEL,
        63,
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character",
    ),
    "qualifiedName": (
        r"(" + _DNS1123_SUBDOMAIN + r"/)?" + _QUALIFIED_NAME,
        316,
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
        "end with an alphanumeric character",
    ),
    "labelValue": (
        r"(" + _QUALIFIED_NAME + r")?",
        63,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
        "'.', and must start and end with an alphanumeric character",
    ),
    "uuid": (
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        36,
        "does not match the UUID format",
    ),
    "date": (r"\d{4}-\d{2}-\d{2}", 10, "invalid date"),
}


def validate_format(name: str, value: str) -> list[str] | None:
    """The Kubernetes format library: None when valid, else the list of problems."""
    if name.endswith("Prefix") and name[: -len("Prefix")] in _FORMATS:
        value = value[:-1] if value.endswith("-") else value
        name = name[: -len("Prefix")]
    spec = _FORMATS.get(name)
    if spec is None:
        raise CelError(f"unknown format {name!r}")
    rx, max_len, msg = spec
    errors: list[str] = []
    if len(value) > max_len:
        errors.append(f"must be no more than {max_len} characters")
    if not re2_search("^(?:" + rx + ")$", value):
        errors.append(msg)
    return errors or None


def _format_method(name: str) -> Callable[[Any], FormatValidator]:
    def f(lib: Any) -> FormatValidator:
        if lib is not FORMAT_LIB:
            raise _overload(name, lib)
        return FormatValidator(name)

    return f


def _format_validate(v: Any, s: Any) -> list[str] | None:
    if type(v) is not FormatValidator:
        raise _overload("validate", v, s)
    return validate_format(v.name, _str(s, "validate", v))


def _named_format(name: str) -> FormatValidator:
    if type(name) is not str:
        raise _overload("format.named", name)
    return FormatValidator(name)


GLOBALS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "matches": _matches,
    "int": _int,
    "uint": _uint,
    "double": _double,
    "string": _string,
    "bool": _bool,
    "bytes": _bytes,
    "dyn": lambda v: v,
    "duration": _duration,
    "isIP": _is_ip,
    "ip": _ip,
    "isCIDR": _is_cidr,
    "cidr": _cidr,
    "isURL": _is_url,
    "url": _url,
}

METHODS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "contains": _contains,
    "startsWith": _starts,
    "endsWith": _ends,
    "matches": _matches,
    "substring": _substring,
    "split": _split,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "trim": _trim,
    "charAt": _char_at,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "family": _family,
    "isUnspecified": _ip_pred("isUnspecified", lambda a: a.is_unspecified),
    "isLoopback": _ip_pred("isLoopback", lambda a: a.is_loopback),
    "isLinkLocalMulticast": _ip_pred(
        "isLinkLocalMulticast",
        lambda a: (
            a in ipaddress.ip_network("224.0.0.0/24")
            if a.version == 4
            else a in ipaddress.ip_network("ff02::/16")
        ),
    ),
    "isLinkLocalUnicast": _ip_pred(
        "isLinkLocalUnicast", lambda a: a.is_link_local and not a.is_multicast
    ),
    "isGlobalUnicast": _ip_pred(
        "isGlobalUnicast",
        lambda a: (
            not (
                a.is_unspecified
                or a.is_loopback
                or a.is_multicast
                or a.is_link_local
                or a == ipaddress.ip_address("255.255.255.255")
            )
        ),
    ),
    "ip": _ip,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "prefixLength": _prefix_length,
    "masked": _masked,
    "string": _string,
    "getScheme": _url_part("getScheme", lambda p: p.scheme),
    "getHost": _url_part("getHost", lambda p: p.netloc.rpartition("@")[2]),
    "getHostname": _url_part("getHostname", lambda p: p.hostname or ""),
    "getPort": _url_part(
        "getPort", lambda p: p.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    ),
    "getEscapedPath": _url_part("getEscapedPath", lambda p: p.path),
    "getQuery": _url_part("getQuery", lambda p: p.query),
    "getHours": _dur_part("getHours", 3600 * 10**9),
    "getMinutes": _dur_part("getMinutes", 60 * 10**9),
    "getSeconds": _dur_part("getSeconds", 10**9),
    "getMilliseconds": _dur_part("getMilliseconds", 10**6),
    "validate": _format_validate,
    "named": lambda lib, name: _named_format(name),
    **{name: _format_method(name) for name in _FORMATS},
    **{
        name + "Prefix": _format_method(name + "Prefix")
        for name in ("dns1123Label", "dns1123Subdomain", "dns1035Label")
    },
}


# ---------------------------------------------------------------- field names

_RESERVED = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)


def unescape(name: str) -> str:
    """Kubernetes CEL property-name unescaping (``__namespace__`` -> ``namespace``, ``a__dash__b``
    -> ``a-b``).
    """
    if name.startswith("__") and name.endswith("__") and name[2:-2] in _RESERVED:
        return name[2:-2]
    if "__" not in name:
        return name
    out: list[str] = []
    i = 0
    tokens = (("__underscores__", "__"), ("__dot__", "."), ("__dash__", "-"), ("__slash__", "/"))
    while i < len(name):
        for tok, rep in tokens:
            if name.startswith(tok, i):
                out.append(rep)
                i += len(tok)
                break
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


# ---------------------------------------------------------------- compiler


def _select(obj: Any, field: str) -> Any:
    if type(obj) is dict:
        try:
            return obj[field]
        except KeyError:
            raise CelError(f"no such key: {clip(str(field))}") from None
    raise CelError(f"type '{_type_name(obj)}' does not support field selection")


def _index(obj: Any, key: Any) -> Any:
    t = type(obj)
    if t is list:
        if type(key) is float and key.is_integer():
            key = int(key)
        if type(key) is not int:
            raise _overload("_[_]", obj, key)
        if not 0 <= key < len(obj):
            raise CelError(f"index out of bounds: {key}")
        return obj[key]
    if t is dict:
        try:
            return obj[key]
        except (KeyError, TypeError):
            raise CelError(f"no such key: {clip(str(key))}") from None
    raise _overload("_[_]", obj, key)


def _as_bool(v: Any, what: str) -> bool:
    if type(v) is not bool:
        raise CelError(f"no such overload: {what} applied to {_type_name(v)}")
    return v


def _children(tree: lark.Tree) -> list[Any]:
    return list(tree.children)


class _Compiler:
    def __init__(self) -> None:
        self.idents: set[str] = set()

    def c(self, t: Any) -> Fn:
        if not isinstance(t, lark.Tree):
            raise CelCompileError(f"unexpected token {t!r}")
        method = getattr(self, "c_" + str(t.data), None)
        if method is None:
            raise CelCompileError(f"unsupported construct {t.data}")
        fn: Fn = method(t)
        return fn

    # ---- operators

    def c_expr(self, t: lark.Tree) -> Fn:
        ch = _children(t)
        if len(ch) == 1:
            return self.c(ch[0])
        cond, yes, no = self.c(ch[0]), self.c(ch[1]), self.c(ch[2])

        def ternary(env: Env) -> Any:
            return yes(env) if _as_bool(cond(env), "_?_:_") else no(env)

        return ternary

    def c_conditionalor(self, t: lark.Tree) -> Fn:
        return self._logical(t, decisive=True, op="_||_")

    def c_conditionaland(self, t: lark.Tree) -> Fn:
        return self._logical(t, decisive=False, op="_&&_")

    def _logical(self, t: lark.Tree, decisive: bool, op: str) -> Fn:
        """CEL's commutative || (decisive=True) and && (decisive=False): a side equal to
        ``decisive`` wins even if the other side errs; when both err, the left error is reported."""
        ch = _children(t)
        if len(ch) == 1:
            return self.c(ch[0])
        left, right = self.c(ch[0]), self.c(ch[1])

        def logical(env: Env) -> Any:
            err: CelError | None = None
            try:
                lv = left(env)
                if lv is decisive:
                    return decisive
                if lv is not (not decisive):
                    err = _overload(op, lv)
            except CelError as exc:
                err = exc
            try:
                rv = right(env)
            except CelError:
                if err is not None:
                    raise err from None
                raise
            if rv is decisive:
                return decisive
            if err is not None:
                raise err
            return _as_bool(rv, op)

        return logical

    _BINARY: dict[str, Callable[[Any, Any], Any]] = {
        "relation_lt": _lt,
        "relation_le": _le,
        "relation_gt": lambda a, b: _lt(b, a),
        "relation_ge": lambda a, b: _le(b, a),
        "relation_eq": cel_eq,
        "relation_ne": lambda a, b: not cel_eq(a, b),
        "relation_in": _in,
        "addition_add": _add,
        "addition_sub": _sub,
        "multiplication_mul": _mul,
        "multiplication_div": _div,
        "multiplication_mod": _mod,
    }

    def _binary(self, t: lark.Tree) -> Fn:
        ch = _children(t)
        if len(ch) == 1:
            return self.c(ch[0])
        op_tree, right_tree = ch
        op = self._BINARY[str(op_tree.data)]
        left, right = self.c(op_tree.children[0]), self.c(right_tree)

        def binary(env: Env) -> Any:
            return op(left(env), right(env))

        return binary

    c_relation = _binary
    c_addition = _binary
    c_multiplication = _binary

    def c_unary(self, t: lark.Tree) -> Fn:
        ch = _children(t)
        if len(ch) == 1:
            return self.c(ch[0])
        op, operand = str(ch[0].data), self.c(ch[1])
        if op == "unary_not":
            return lambda env: _not(operand(env))
        return lambda env: _neg(operand(env))

    # ---- members

    def c_member(self, t: lark.Tree) -> Fn:
        return self.c(t.children[0])

    def c_primary(self, t: lark.Tree) -> Fn:
        return self.c(t.children[0])

    def c_paren_expr(self, t: lark.Tree) -> Fn:
        return self.c(t.children[0])

    def c_member_dot(self, t: lark.Tree) -> Fn:
        obj, field = self.c(t.children[0]), unescape(str(t.children[1]))
        return lambda env: _select(obj(env), field)

    def c_member_index(self, t: lark.Tree) -> Fn:
        obj, key = self.c(t.children[0]), self.c(t.children[1])
        return lambda env: _index(obj(env), key(env))

    def c_member_dot_arg(self, t: lark.Tree) -> Fn:
        ch = _children(t)
        target, name = ch[0], str(ch[1])
        args = list(ch[2].children) if len(ch) > 2 else []
        if name in ("all", "exists", "exists_one", "map", "filter"):
            return self._macro(name, self.c(target), args)
        fn = METHODS.get(name)
        if fn is None:
            raise CelCompileError(f"undeclared method {name!r}")
        recv = self.c(target)
        cargs = [self.c(a) for a in args]
        if not cargs:
            return lambda env: fn(recv(env))
        if len(cargs) == 1:
            a0 = cargs[0]
            return lambda env: fn(recv(env), a0(env))
        return lambda env: fn(recv(env), *[a(env) for a in cargs])

    def _var_name(self, t: Any) -> str:
        node = t
        while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
            node = node.children[0]
        if isinstance(node, lark.Tree) and node.data == "ident":
            return str(node.children[0])
        raise CelCompileError("macro variable must be a simple identifier")

    def _macro(self, name: str, target: Fn, args: list[Any]) -> Fn:
        if name == "map" and len(args) == 3:
            var, cond, body = self._var_name(args[0]), self.c(args[1]), self.c(args[2])
        elif len(args) == 2:
            var, cond, body = self._var_name(args[0]), None, self.c(args[1])
        else:
            raise CelCompileError(f"wrong number of arguments to macro {name}")

        def items(env: Env) -> Any:
            coll = target(env)
            if type(coll) not in (list, dict):
                raise _overload(name, coll)
            return coll

        def run(env: Env) -> Any:
            coll = items(env)
            saved = env.get(var, _MISSING)
            try:
                return _MACROS[name](env, var, coll, body, cond)
            finally:
                if saved is _MISSING:
                    env.pop(var, None)
                else:
                    env[var] = saved

        return run

    def c_ident_arg(self, t: lark.Tree) -> Fn:
        ch = _children(t)
        name = str(ch[0])
        args = list(ch[1].children) if len(ch) > 1 else []
        if name == "has":
            return self._has(args)
        fn = GLOBALS.get(name)
        if fn is None:
            raise CelCompileError(f"undeclared function {name!r}")
        cargs = [self.c(a) for a in args]
        if len(cargs) == 1:
            a0 = cargs[0]
            return lambda env: fn(a0(env))
        return lambda env: fn(*[a(env) for a in cargs])

    def _has(self, args: list[Any]) -> Fn:
        node = args[0] if len(args) == 1 else None
        while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
            node = node.children[0]
        if not (isinstance(node, lark.Tree) and node.data == "member_dot"):
            raise CelCompileError("invalid argument to has() macro")
        obj, field = self.c(node.children[0]), unescape(str(node.children[1]))

        def has(env: Env) -> bool:
            o = obj(env)
            if type(o) is dict:
                return field in o
            raise CelError(f"invalid type for field selection: {_type_name(o)}")

        return has

    def c_ident(self, t: lark.Tree) -> Fn:
        name = str(t.children[0])
        self.idents.add(name)

        def ident(env: Env) -> Any:
            try:
                return env[name]
            except KeyError:
                raise CelError(f"undeclared reference to {name!r}") from None

        return ident

    def c_dot_ident(self, t: lark.Tree) -> Fn:
        return self.c_ident(t)

    def c_list_lit(self, t: lark.Tree) -> Fn:
        items = [self.c(e) for e in t.children[0].children] if t.children else []
        return lambda env: [i(env) for i in items]

    def c_map_lit(self, t: lark.Tree) -> Fn:
        kids = list(t.children[0].children) if t.children else []
        pairs = [(self.c(kids[i]), self.c(kids[i + 1])) for i in range(0, len(kids), 2)]

        def map_lit(env: Env) -> Any:
            out: dict[Any, Any] = {}
            for k, v in pairs:
                key = k(env)
                if type(key) not in (str, int, bool):
                    raise CelError(f"unsupported map key type {_type_name(key)}")
                if key in out:
                    raise CelError(f"repeated key {clip(repr(key))} in map literal")
                out[key] = v(env)
            return out

        return map_lit

    def c_literal(self, t: lark.Tree) -> Fn:
        tok = t.children[0]
        if not isinstance(tok, lark.Token):
            raise CelCompileError("malformed literal")
        kind, text = tok.type, str(tok)
        value: Any
        if kind == "INT_LIT":
            neg = text.startswith("-")
            body = text[1:] if neg else text
            value = int(body, 16) if body.lower().startswith("0x") else int(body)
            value = _int64(-value if neg else value)
        elif kind == "UINT_LIT":
            body = text[:-1]
            value = int(body, 16) if body.lower().startswith("0x") else int(body)
        elif kind == "FLOAT_LIT":
            value = float(text)
        elif kind in ("STRING_LIT", "MLSTRING_LIT"):
            value = str(celpy.evaluation.celstr(tok))
        elif kind == "BYTES_LIT":
            value = bytes(celpy.evaluation.celbytes(tok))
        elif kind == "BOOL_LIT":
            value = text == "true"
        elif kind == "NULL_LIT":
            value = None
        else:
            raise CelCompileError(f"unsupported literal {text!r}")
        return lambda env: value


_MISSING = object()


def _m_all(env: Env, var: str, coll: Any, body: Fn, _: Fn | None) -> bool:
    err: CelError | None = None
    for item in coll:
        env[var] = item
        try:
            if _as_bool(body(env), "all") is False:
                return False
        except CelError as exc:
            err = err or exc
    if err is not None:
        raise err
    return True


def _m_exists(env: Env, var: str, coll: Any, body: Fn, _: Fn | None) -> bool:
    err: CelError | None = None
    for item in coll:
        env[var] = item
        try:
            if _as_bool(body(env), "exists") is True:
                return True
        except CelError as exc:
            err = err or exc
    if err is not None:
        raise err
    return False


def _m_exists_one(env: Env, var: str, coll: Any, body: Fn, _: Fn | None) -> bool:
    count = 0
    for item in coll:
        env[var] = item
        if _as_bool(body(env), "exists_one"):
            count += 1
    return count == 1


def _m_filter(env: Env, var: str, coll: Any, body: Fn, _: Fn | None) -> list[Any]:
    out = []
    for item in coll:
        env[var] = item
        if _as_bool(body(env), "filter"):
            out.append(item)
    return out


def _m_map(env: Env, var: str, coll: Any, body: Fn, cond: Fn | None) -> list[Any]:
    out = []
    for item in coll:
        env[var] = item
        if cond is None or _as_bool(cond(env), "map"):
            out.append(body(env))
    return out


_MACROS: dict[str, Callable[[Env, str, Any, Fn, Fn | None], Any]] = {
    "all": _m_all,
    "exists": _m_exists,
    "exists_one": _m_exists_one,
    "filter": _m_filter,
    "map": _m_map,
}


# ---------------------------------------------------------------- public API


class Program:
    """One compiled CEL expression."""

    __slots__ = ("fn", "source", "uses_old_self")

    def __init__(self, source: str, fn: Fn, uses_old_self: bool) -> None:
        self.source = source
        self.fn = fn
        self.uses_old_self = uses_old_self

    def evaluate(self, variables: Env) -> Any:
        """The expression's value; raises CelError on an evaluation error (never anything else)."""
        env: Env = {"format": FORMAT_LIB, **variables}
        try:
            return self.fn(env)
        except CelError:
            raise
        except RecursionError:
            raise CelError("expression too deeply nested") from None
        except Exception as exc:  # a library function failing on odd input is an evaluation error
            raise CelError(f"{type(exc).__name__}: {clip(str(exc))}") from None


_PARSER: celpy.Environment | None = None
_PROGRAMS: dict[str, Program] = {}
# Parse trees by source: each rule is read twice at least (compiled into closures, and written
# as Python by gateweave.api.celcode), and the versions of a kind share most of their rules.
# Parsing is most of the cost of generating a schema's validator (at a cold start, before the
# first object of a kind is decoded). The trees are only read, never changed; they are
# dropped (:func:`forget_trees`) once a validator is generated, not kept while serving.
_TREES: dict[str, lark.Tree] = {}
_TREES_MAX = 4096  # the CRD schemas hold about 200 distinct rules: a bound, not an eviction


def parse(source: str) -> lark.Tree:
    """celpy's parse tree of one CEL expression (shared: not to be changed);
    CelCompileError when it does not parse."""
    global _PARSER
    tree = _TREES.get(source)
    if tree is not None:
        return tree
    if _PARSER is None:
        _PARSER = celpy.Environment()
    try:
        tree = _PARSER.compile(source)
    except Exception as exc:
        raise CelCompileError(f"syntax error: {exc}") from None
    if len(_TREES) < _TREES_MAX:
        _TREES[source] = tree
    return tree


def forget_trees() -> None:
    """Drop the kept parse trees (a few MB for the CRDs' rules): what was generated from them
    (compiled rules, validators) does not read them again."""
    _TREES.clear()


def compile_rule(source: str) -> Program:
    """Parse (with celpy) and compile one CEL expression, cached by its text.

    Raises CelCompileError when the rule cannot be parsed or uses an undeclared function.
    """
    prog = _PROGRAMS.get(source)
    if prog is None:
        prog = closures(source)
        _PROGRAMS[source] = prog
    return prog


def closures(source: str) -> Program:
    """``source`` parsed (with celpy) and compiled into closures, not cached (what
    :func:`compile_rule` returns unless it was given another program by :func:`provide`)."""
    tree = parse(source)
    compiler = _Compiler()
    fn = compiler.c(tree)
    return Program(source, fn, "oldSelf" in compiler.idents)


def provide(program: Program) -> None:
    """What :func:`compile_rule` returns for ``program.source`` from now on, unless it has
    compiled that rule already: a program of the same values (as
    :class:`gateweave.api.codecache.Written` is), which spares the parse."""
    _PROGRAMS.setdefault(program.source, program)


def evaluate(source: str, self_value: Any) -> Any:
    """Compile (cached) and evaluate ``source`` with ``self`` bound to ``self_value``."""
    return compile_rule(source).evaluate({"self": self_value})
