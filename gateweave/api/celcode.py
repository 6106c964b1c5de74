"""CEL rules as Python expressions: the fast way to evaluate a rule that holds.

:mod:`gateweave.api.cel` compiles each rule into closures that follow CEL's semantics
exactly, errors included (``&&``/``||`` and the ``all``/``exists`` macros absorb an error
when the other side decides). They cost a few microseconds per rule, and a route has
dozens of rules. This module writes the same parse tree as one Python expression, which
the schema validators of :mod:`gateweave.api.schemacode` inline.

The expression is exact whenever it returns: each CEL operation becomes either the cel.py
function that implements it, or Python code that gives the same value for every operand
it accepts and raises for every other. So when the expression raises (anything), the
value is the closures' to decide (the generated validator then evaluates the rule with
them); an error that ``&&`` absorbs in CEL is absorbed there, as always.

Python code replaces a cel.py function where the operands' types are known: from literals,
from ``size()``, and from the schema. The generated validator runs a node's rules only on
a value it has checked against that node, so ``self`` and the fields, items and keys
reached from it have the types their schema nodes declare (:attr:`Expr.node`); where a
type is not known, a cheap operand is tested at run time (``x.startsWith('/')`` is
``x.startswith('/')`` for a str ``x``, the library's function for anything else).

Parts whose value is known where they run are folded away as the expression is written:
from the schema (a field required or defaulted is present once its node is checked; a list's
``maxItems`` bounds its size) and from the tests evaluated before them (:data:`Fact`: the right
side of ``&&`` runs where the left is true, a ternary's branches where the condition is true
or false; a node's rules where schemacode's case split established a field's value or a list's
length). Code that might raise is never folded into a value (:attr:`Expr.total`: it raising
is the closures' to decide), so the expression stays exact.

Names the expression uses (constants, cel.py's functions) are added to a :class:`Names`
namespace, the globals of the generated code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from gateweave.api import cel, patterns
from gateweave.api.cel import lark  # imported on first use

Schema = dict[str, Any]
Kind = Callable[
    [Any], "type | None"
]  # a schema node -> the type every value checked against it has
# (a schema node, a field) -> whether every value checked against the node has the field
# (required, or defaulted before the rules run)
Present = Callable[[Schema, str], bool]

# No string, list or map can hold this many elements (it exceeds any memory): a sum of a
# few sizes is far below INT64_MAX, so adding sizes needs no overflow check.
_SIZE_BOUND = 2**48


SIZE = "size()"  # in Writer.fields: the local variable holding size(self)


class Untranslatable(Exception):
    """A rule this module does not write as Python (the closures evaluate it instead)."""


class Names:
    """The globals of generated code: constants and functions, each under one name."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = dict(_HELPERS)
        self._by_key: dict[Any, str] = {}

    def add(self, prefix: str, value: Any, key: Any = None) -> str:
        """The name of ``value`` (the same name for the same ``key``; by identity without one)."""
        k = (prefix, key if key is not None else id(value))
        name = self._by_key.get(k)
        if name is None:
            name = f"{prefix}{len(self.values)}"
            self._by_key[k] = name
            self.values[name] = value
        return name


# What an earlier test established about a value, for the code evaluated after it (the
# schema's own facts, a field required or defaulted, are read from the nodes):
# ("has", code, field): the map ``code`` has ``field``; ("eq", code, s): ``code`` is the
# string ``s``; ("len", code, n): the list ``code`` holds ``n`` elements.
Fact = tuple[str, str, Any]


class Expr(NamedTuple):
    code: str
    boolean: bool = False  # the value is a Python bool whenever the code does not raise
    kind: type | None = None  # the value's type whenever the code does not raise (None: unknown)
    simple: bool = False  # a name, a literal or a field of one: pure and cheap to evaluate twice
    literal: object = None  # a string literal's value; a list of string literals' frozenset
    node: Schema | None = None  # the schema node the value was checked against
    bound: int | None = None  # a non-negative int never above this (None: not known to be one)
    # `c ? b : true` with a boolean `b`: (the Python condition, b's code), so that rules
    # guarded alike can share one test of the condition (see :func:`guarded_together`)
    guarded: tuple[str, str] | None = None
    total: bool = False  # the code never raises (then folding it away changes nothing)
    # facts the value establishes for the code evaluated after it (see :data:`Fact`): when
    # it is true (the right side of `&&`, a ternary's first branch) and when it is false
    if_true: frozenset[Fact] = frozenset()
    if_false: frozenset[Fact] = frozenset()
    sized: str | None = None  # an int that is the size of the value of this code
    most: int | None = None  # a list never longer than this
    tally: str | None = None  # (a list) the code of its size, cheaper than len() of it
    negates: Expr | None = None  # a boolean written as `not` of this one


TRUE = Expr("True", True, bool, True, total=True)
FALSE = Expr("False", True, bool, True, total=True)


def constant(x: Expr) -> bool | None:
    """The value of a boolean ``x`` folded to a constant; None for any other."""
    return {"True": True, "False": False}.get(x.code) if x.boolean else None


def _negated(x: Expr) -> Expr:
    """``!x`` for a boolean ``x`` (its facts swapped)."""
    known = constant(x)
    if known is not None:
        return FALSE if known else TRUE
    if x.negates is not None:
        return x.negates
    return Expr(
        f"(not {x.code})",
        True,
        bool,
        total=x.total,
        if_true=x.if_false,
        if_false=x.if_true,
        negates=x,
    )


def _logical(left: Expr, op: str, right: Expr) -> Expr:
    """``left and right`` (``op``: "and") or ``left or right`` of two booleans, folded where
    a side is known. Exact as Python evaluates it: a known right side drops the left only
    when the left never raises."""
    decisive = op == "or"  # the value of a side that decides
    lk, rk = constant(left), constant(right)
    if lk is decisive:
        return left
    if lk is not None:
        return right
    if rk is not None and rk is not decisive:
        return left
    if rk is decisive and left.total:
        return right
    if left.code == right.code:  # (pure code: the same value twice)
        return left
    return Expr(
        f"({left.code} {op} {right.code})",
        True,
        bool,
        total=left.total and right.total,
        if_true=left.if_true | right.if_true if op == "and" else frozenset(),
        if_false=left.if_false | right.if_false if op == "or" else frozenset(),
    )


def _int_literal(x: Expr) -> int | None:
    return int(x.code) if x.kind is int and x.code.isdigit() else None


def _typed(x: Expr, kind: type, fast: str, slow: str) -> str:
    """``fast`` where ``x`` is statically of ``kind``; else ``fast`` guarded by a type test
    of ``x`` (evaluated twice: only for a simple ``x``), or ``slow``."""
    if x.kind is kind:
        return fast
    if x.simple:
        return f"({fast} if type({x.code}) is {kind.__name__} else {slow})"
    return slow


def _cel_bool(value: Any) -> bool:
    """``value`` when it is a bool; raises otherwise (CEL: no such overload)."""
    if type(value) is bool:
        return value
    raise TypeError("not a bool")


def _cel_iter(value: Any) -> Any:
    """What a macro iterates: a list, or a map's keys; raises otherwise."""
    if type(value) is list or type(value) is dict:
        return value
    raise TypeError("not a list or map")


def _cel_has(value: Any, field: str) -> bool:
    if type(value) is dict:
        return field in value
    raise TypeError("has() on a value that is not a map")


def _cel_map(pairs: tuple[tuple[Any, Any], ...]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if type(key) not in (str, int, bool) or key in out:
            raise TypeError("map literal key")
        out[key] = value
    return out


_MATCHED: list[set[str]] = []  # every set of strings known to match a `matches` pattern


def clear_memos() -> None:
    """Forget the strings known to match."""
    for passed in _MATCHED:
        passed.clear()


def _cel_matches(program: Any, passed: set[str], value: str) -> bool:
    """``value.matches(pattern)`` for a string ``value`` and the :func:`cel.search_program`
    of a literal ``pattern``, remembering the strings that match (a bounded set)."""
    found = cel.found(program, value)
    if found:
        patterns.remember(passed, value)
    return found


_HELPERS: dict[str, Any] = {
    "_cel_bool": _cel_bool,
    "_cel_iter": _cel_iter,
    "_cel_has": _cel_has,
    "_cel_map": _cel_map,
    "_cel_matches": _cel_matches,
    "_cel_eq": cel.cel_eq,
    "_cel_lt": cel._lt,
    "_cel_le": cel._le,
    "_cel_in": cel._in,
    "_cel_add": cel._add,
    "_cel_sub": cel._sub,
    "_cel_mul": cel._mul,
    "_cel_div": cel._div,
    "_cel_mod": cel._mod,
    "_cel_neg": cel._neg,
    "_cel_not": cel._not,
    "_cel_index": cel._index,
}

_ORDER = {
    "relation_lt": ("<", "_cel_lt({a}, {b})"),
    "relation_le": ("<=", "_cel_le({a}, {b})"),
    "relation_gt": (">", "_cel_lt({b}, {a})"),
    "relation_ge": (">=", "_cel_le({b}, {a})"),
}
_BINARY = {
    "relation_in": "_cel_in({a}, {b})",
    "addition_add": "_cel_add({a}, {b})",
    "addition_sub": "_cel_sub({a}, {b})",
    "multiplication_mul": "_cel_mul({a}, {b})",
    "multiplication_div": "_cel_div({a}, {b})",
    "multiplication_mod": "_cel_mod({a}, {b})",
}
# Methods and functions whose cel.py implementation returns a bool whenever it returns.
_BOOL_CALLS = frozenset(("contains", "startsWith", "endsWith", "matches"))
# String methods with a string literal argument, as Python's (the receiver a str).
_STR_METHODS = {
    "startsWith": "{s}.startswith({p})",
    "endsWith": "{s}.endswith({p})",
    "contains": "({p} in {s})",
}
_MACROS = ("all", "exists", "exists_one", "map", "filter")
# Macros over a list of at most this many elements (known from an earlier test) are written
# without a comprehension.
_UNROLLED = 3
# The keyword bounding size() of a value of each type.
_MOST: dict[type | None, str] = {str: "maxLength", list: "maxItems", dict: "maxProperties"}


def _valid_pattern(pattern: str) -> bool:
    try:
        cel.search_program(pattern)
    except ValueError:
        return False
    return True


class _Writer:
    def __init__(
        self,
        names: Names,
        self_name: str,
        self_node: Schema | None,
        kind: Kind,
        fields: dict[str, str],
        present: Present,
        facts: frozenset[Fact],
    ) -> None:
        self.names = names
        self.self_name = self_name
        self.self_node = self_node
        self.kind = kind
        self.present = present
        self.fields = fields  # fields of self always present, each in a local variable
        self.used: set[str] = set()  # the ones the expression reads
        self.scope: dict[str, Expr] = {}  # macro variables in scope
        self.facts = facts  # what the code evaluated before this point established

    @contextmanager
    def _assuming(self, facts: frozenset[Fact]) -> Iterator[None]:
        """Code written where ``facts`` hold too (it runs only after a test established them)."""
        outer = self.facts
        self.facts = outer | facts
        try:
            yield
        finally:
            self.facts = outer

    def _known(self, what: str, code: str) -> Any:
        """The third member of the fact ``(what, code, ...)`` in force (None: no such fact)."""
        for fact in self.facts:
            if fact[0] == what and fact[1] == code:
                return fact[2]
        return None

    def e(self, t: Any) -> Expr:
        if not isinstance(t, lark.Tree):
            raise Untranslatable(f"token {t!r}")
        method = getattr(self, "w_" + str(t.data), None)
        if method is None:
            raise Untranslatable(str(t.data))
        out: Expr = method(t)
        return out

    def _bool(self, x: Expr) -> str:
        return x.code if x.boolean else f"_cel_bool({x.code})"

    def _as_bool(self, x: Expr) -> Expr:
        """``x`` as a Python bool (raising when it is not a bool)."""
        return x if x.boolean else Expr(f"_cel_bool({x.code})", True, bool)

    def _checked(self, code: str, node: Any, simple: bool, total: bool = False) -> Expr:
        """A value checked against ``node`` (its type then known), or of unknown type
        (``total``: reading it never raises)."""
        if isinstance(node, dict):
            kind = self.kind(node)
            if kind is not None:
                return Expr(code, kind is bool, kind, simple, node=node, total=total)
        return Expr(code, simple=simple, total=total)

    # ---- operators

    def w_expr(self, t: lark.Tree) -> Expr:
        ch = list(t.children)
        if len(ch) == 1:
            return self.e(ch[0])
        cond = self._as_bool(self.e(ch[0]))
        with self._assuming(cond.if_true):
            yes = self.e(ch[1])
        with self._assuming(cond.if_false):
            no = self.e(ch[2])
        return self._ternary(cond, yes, no)

    @staticmethod
    def _ternary(cond: Expr, yes: Expr, no: Expr) -> Expr:
        """``cond ? yes : no`` for a boolean ``cond``, folded where a side is known."""
        known = constant(cond)
        if known is not None:
            return yes if known else no
        if yes.code == no.code and cond.total:
            return yes
        if yes.boolean and no.boolean:
            if constant(yes) is True and constant(no) is False:
                return cond
            if constant(yes) is False and constant(no) is True:
                return _negated(cond)
            if constant(yes) is not None:  # `c ? true : b` is `c || b`; `c ? false : b`, `!c && b`
                test = cond.code if constant(yes) else _negated(cond).code
                op = "or" if constant(yes) else "and"
                return Expr(f"({test} {op} {no.code})", True, bool, total=cond.total and no.total)
        same = yes.kind if yes.kind is no.kind else None
        bound = max(yes.bound, no.bound) if yes.bound is not None and no.bound is not None else None
        guarded = (cond.code, yes.code) if yes.boolean and no.code == "True" else None
        return Expr(
            f"({yes.code} if {cond.code} else {no.code})",
            yes.boolean and no.boolean,
            same,
            bound=bound,
            guarded=guarded,
            total=cond.total and yes.total and no.total,
        )

    def w_conditionalor(self, t: lark.Tree) -> Expr:
        return self._logical(t, "or")

    def w_conditionaland(self, t: lark.Tree) -> Expr:
        return self._logical(t, "and")

    def _logical(self, t: lark.Tree, op: str) -> Expr:
        ch = list(t.children)
        if len(ch) == 1:
            return self.e(ch[0])
        left = self._as_bool(self.e(ch[0]))
        # the right side runs only when the left did not decide (is true for `and`)
        with self._assuming(left.if_true if op == "and" else left.if_false):
            right = self._as_bool(self.e(ch[1]))
        return _logical(left, op, right)

    def _binary(self, t: lark.Tree) -> Expr:
        ch = list(t.children)
        if len(ch) == 1:
            return self.e(ch[0])
        op_tree, right_tree = ch
        op = str(op_tree.data)
        a, b = self.e(op_tree.children[0]), self.e(right_tree)
        if op in ("relation_eq", "relation_ne"):
            return self._equality(a, b, op == "relation_eq")
        if op in _ORDER:
            known = self._ordered(a, op, b)
            if known is not None:
                return TRUE if known else FALSE
            py, template = _ORDER[op]
            slow = template.format(a=a.code, b=b.code)
            fast = f"({a.code} {py} {b.code})"
            code = self._same_kind(a, b, fast, slow)
            return Expr(code, True, bool, total=code == fast and a.total and b.total)
        if op == "relation_in" and type(a.literal) is str and b.kind in (list, dict):
            # a string in a list (Python's == is CEL's against a string) or among a map's keys
            return Expr(f"({a.code} in {b.code})", True, bool, total=b.total)
        if op == "relation_in" and type(b.literal) is frozenset:
            # `x in ['a', 'b']`: membership in a frozenset of the strings (an unhashable x
            # raises; any other value that is not a string is in neither)
            value = self._known("eq", a.code)
            if value is not None:  # (an earlier test found `x` to be this string)
                return TRUE if value in b.literal else FALSE
            values = self.names.add("c_", b.literal, ("strset", tuple(sorted(b.literal))))
            return Expr(f"({a.code} in {values})", True, bool, total=a.total and a.kind is str)
        if (
            op == "addition_add"
            and a.bound is not None
            and b.bound is not None
            and a.bound + b.bound <= cel.INT64_MAX
        ):
            # two non-negative ints whose sum cannot overflow: Python's + is CEL's
            if b.code == "0" or a.code == "0":  # (x + 0 is x)
                return b if a.code == "0" else a
            return Expr(
                f"({a.code} + {b.code})",
                kind=int,
                bound=a.bound + b.bound,
                total=a.total and b.total,
            )
        return Expr(
            _BINARY[op].format(a=a.code, b=b.code),
            op == "relation_in",
            bool if op == "relation_in" else None,
        )

    def _equality(self, a: Expr, b: Expr, eq: bool) -> Expr:
        """``a == b`` (``eq``) or ``a != b``, folded where an earlier test or the schema
        decides it."""
        py = "==" if eq else "!="
        if a.code == b.code and a.total and (a.boolean or a.kind in (str, int)):
            return TRUE if eq else FALSE  # (pure, never raising, not a float: equal to itself)
        for x, y in ((a, b), (b, a)):
            if type(y.literal) is str:
                value = self._known("eq", x.code)
                if value is not None:  # an earlier test found `x` to be this string
                    return TRUE if (value == y.literal) == eq else FALSE
                # Python's == against a str is CEL's: equal only to an equal string, false
                # for any other value (no number or bool equals a string in either language)
                facts: frozenset[Fact] = frozenset((("eq", x.code, y.literal),))
                return Expr(
                    f"({a.code} {py} {b.code})",
                    True,
                    bool,
                    total=a.total and b.total,
                    if_true=facts if eq else frozenset(),
                    if_false=frozenset() if eq else facts,
                )
        ka, kb = _int_literal(a), _int_literal(b)
        sized, n = (a.sized, kb) if kb is not None else (b.sized, ka)
        if sized is not None and n is not None:
            # `size(x) == n`: then x holds n elements
            facts = frozenset((("len", sized, n),))
            code = f"({a.code} {py} {b.code})"
            return Expr(
                code,
                True,
                bool,
                total=a.total and b.total,
                if_true=facts if eq else frozenset(),
                if_false=frozenset() if eq else facts,
            )
        if ka is not None and kb is not None:
            return TRUE if (ka == kb) == eq else FALSE
        if a.boolean and b.boolean:  # two bools: Python's == is CEL's
            return Expr(f"({a.code} {py} {b.code})", True, bool, total=a.total and b.total)
        slow = f"_cel_eq({a.code}, {b.code})" if eq else f"(not _cel_eq({a.code}, {b.code}))"
        fast = f"({a.code} {py} {b.code})"
        code = self._same_kind(a, b, fast, slow)
        return Expr(code, True, bool, total=code == fast and a.total and b.total)

    @staticmethod
    def _ordered(a: Expr, op: str, b: Expr) -> bool | None:
        """The value of ``a < b`` (``op`` of :data:`_ORDER`) where both are int literals, or a
        never-raising non-negative int against a literal above its bound; else None."""
        ka, kb = _int_literal(a), _int_literal(b)
        if ka is not None and kb is not None:
            return {
                "relation_lt": ka < kb,
                "relation_le": ka <= kb,
                "relation_gt": ka > kb,
                "relation_ge": ka >= kb,
            }[op]
        if kb is not None and a.bound is not None and a.total:
            at_most = a.bound <= kb  # (a <= kb always; a < kb too where a.bound < kb)
            below = a.bound < kb
            answers = {
                "relation_le": True if at_most else None,
                "relation_lt": True if below else None,
                "relation_gt": False if at_most else None,
                "relation_ge": False if below else None,
            }
            return answers[op]
        return None

    @staticmethod
    def _same_kind(a: Expr, b: Expr, fast: str, slow: str) -> str:
        """``fast`` (a Python comparison) where both operands are ints or both strings, on
        which Python's ==, <, <= are CEL's; else the library's ``slow``."""
        for x, y in ((a, b), (b, a)):
            if x.kind in (int, str) and (y.kind is x.kind or y.simple):
                return _typed(y, x.kind, fast, slow) if x.kind is not None else slow
        return slow

    w_relation = _binary
    w_addition = _binary
    w_multiplication = _binary

    def w_unary(self, t: lark.Tree) -> Expr:
        ch = list(t.children)
        if len(ch) == 1:
            return self.e(ch[0])
        op, operand = str(ch[0].data), self.e(ch[1])
        if op == "unary_not":
            if operand.boolean:
                return _negated(operand)
            return Expr(f"_cel_not({operand.code})", True, bool)
        return Expr(f"_cel_neg({operand.code})")

    # ---- members

    def w_member(self, t: lark.Tree) -> Expr:
        return self.e(t.children[0])

    w_primary = w_member
    w_paren_expr = w_member

    def w_member_dot(self, t: lark.Tree) -> Expr:
        obj, field = self.e(t.children[0]), cel.unescape(str(t.children[1]))
        # a map's key, or an exception for anything else (a list, a string, a missing key)
        code = f"{obj.code}[{field!r}]"
        simple = obj.simple and obj.literal is None
        if obj.code == self.self_name and field in self.fields:
            code, simple = self.fields[field], True
            self.used.add(field)
        if obj.kind is dict and obj.node is not None:
            props = obj.node.get("properties") or {}
            extra = obj.node.get("additionalProperties")
            return self._checked(
                code,
                props.get(field, extra if isinstance(extra, dict) else None),
                simple,
                self._has_field(obj, field),
            )
        return Expr(code, simple=simple)

    def _has_field(self, obj: Expr, field: str) -> bool:
        """Whether the map ``obj`` (never raising) is known to have ``field``: the schema
        requires or defaults it, or an earlier test found it."""
        if not (obj.total and obj.kind is dict):
            return False
        if ("has", obj.code, field) in self.facts:
            return True
        return obj.node is not None and self.present(obj.node, field)

    def w_member_index(self, t: lark.Tree) -> Expr:
        obj, key = self.e(t.children[0]), self.e(t.children[1])
        slow = f"_cel_index({obj.code}, {key.code})"
        if key.kind is int and key.code.isdigit():
            # a list's element (IndexError past its end), as _index gives it
            code = _typed(obj, list, f"{obj.code}[{key.code}]", slow)
            if obj.kind is list and obj.node is not None:
                # (never raising where the list is known to hold more elements)
                total = obj.total and int(key.code) < (self._length(obj.code) or 0)
                return self._checked(code, obj.node.get("items"), False, total)
            return Expr(code)
        return Expr(slow)

    def w_member_dot_arg(self, t: lark.Tree) -> Expr:
        ch = list(t.children)
        target, name = ch[0], str(ch[1])
        args = list(ch[2].children) if len(ch) > 2 else []
        if name in _MACROS:
            return self._macro(name, self.e(target), args)
        fn = cel.METHODS.get(name)
        if fn is None:
            raise Untranslatable(f"method {name}")
        return self._call(fn, ("method", name), name, [self.e(target), *(self.e(a) for a in args)])

    def _call(self, fn: Any, key: tuple[str, str], name: str, args: list[Expr]) -> Expr:
        fname = self.names.add("m_" if key[0] == "method" else "g_", fn, key)
        slow = f"{fname}({', '.join(a.code for a in args)})"
        if name == "size" and len(args) == 1:
            # len() is size() for a string, list, map or bytes, and raises for every other
            # value gateweave's CEL has (none of its own types has a length)
            x = args[0]
            n = self._length(x.code) if x.kind is list else None
            if n is not None:
                return Expr(str(n), kind=int, simple=True, bound=n, total=True)
            if x.tally is not None:
                return Expr(x.tally, kind=int, bound=x.most, total=x.total)
            measured = x.kind in (str, list, dict)
            bound = _SIZE_BOUND if x.most is None else x.most
            if measured and x.node is not None and x.most is None:  # (the Struct types' limit)
                most = x.node.get(_MOST[x.kind])
                bound = most if type(most) is int and 0 <= most < _SIZE_BOUND else bound
            total = measured and x.total
            if x.code == self.self_name and measured and SIZE in self.fields:
                self.used.add(SIZE)  # size(self), once per node
                return Expr(
                    self.fields[SIZE], kind=int, simple=True, bound=bound, total=total, sized=x.code
                )
            return Expr(
                f"len({x.code})", kind=int, simple=x.simple, bound=bound, total=total, sized=x.code
            )
        if len(args) == 2 and type(args[1].literal) is str:
            receiver, literal = args[0], args[1].literal
            if name in _STR_METHODS:
                fast = _STR_METHODS[name].format(s=receiver.code, p=repr(literal))
                return Expr(_typed(receiver, str, fast, slow), True, bool)
            check = patterns.CHECKS.get(literal) if name == "matches" else None
            if check is not None:
                fn = self.names.add("c_", check, ("check", literal))
                return Expr(_typed(receiver, str, f"{fn}({receiver.code})", slow), True, bool)
            if name == "matches" and receiver.simple and _valid_pattern(literal):
                known: set[str] = set()
                passed = self.names.add("c_", known, ("matches", literal))
                if self.names.values[passed] is known:
                    _MATCHED.append(known)
                program = self.names.add("c_", cel.search_program(literal), ("program", literal))
                code = (
                    f"({receiver.code} in {passed} or _cel_matches({program}, {passed}, "
                    f"{receiver.code}))"
                )
                return Expr(_typed(receiver, str, code, slow), True, bool)
        boolean = name in _BOOL_CALLS
        return Expr(slow, boolean, bool if boolean else None)

    def _length(self, code: str) -> int | None:
        """How many elements the list ``code`` is known to hold (None: not known)."""
        n = self._known("len", code)
        return n if type(n) is int else None

    def _var(self, t: Any) -> str:
        node = t
        while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
            node = node.children[0]
        if isinstance(node, lark.Tree) and node.data == "ident":
            name = str(node.children[0])
            if name.isidentifier():
                return name
        raise Untranslatable("macro variable")

    def _macro(self, name: str, target: Expr, args: list[Any]) -> Expr:
        if name == "map" and len(args) == 3:
            var, cond_tree, body_tree = self._var(args[0]), args[1], args[2]
        elif len(args) == 2:
            var, cond_tree, body_tree = self._var(args[0]), None, args[1]
        else:
            raise Untranslatable(f"macro {name}")
        v = f"v_{var}"
        items = target.node.get("items") if target.kind is list and target.node else None
        n = self._length(target.code) if target.kind is list and target.simple else None
        if n is not None and n <= _UNROLLED:
            return self._unrolled(name, var, target, items, body_tree, cond_tree, n)
        body, cond = self._scoped(var, self._element(v, target, items), body_tree, cond_tree)
        coll = target.code if target.kind in (list, dict) else f"_cel_iter({target.code})"
        # `all` of a body always true, `exists` of one always false: every element, or none,
        # gives the same value
        decided = {"all": True, "exists": False}.get(name)
        iterable = target.total and target.kind in (list, dict)
        if decided is not None and constant(body) is decided and iterable:
            return TRUE if decided else FALSE
        # list comprehensions, not generators (cheaper for the short lists of a manifest): an
        # element evaluated past the one that decides may raise, and then the closures decide
        if name == "all":
            out = Expr(f"all([{self._bool(body)} for {v} in {coll}])", True, bool)
        elif name == "exists":
            out = Expr(f"any([{self._bool(body)} for {v} in {coll}])", True, bool)
        elif name == "exists_one":
            out = Expr(f"(len([1 for {v} in {coll} if {self._bool(body)}]) == 1)", True, bool)
        elif name == "filter":
            out = Expr(f"[{v} for {v} in {coll} if {self._bool(body)}]", kind=list)
        elif cond is not None:
            out = Expr(f"[{body.code} for {v} in {coll} if {self._bool(cond)}]", kind=list)
        else:
            out = Expr(f"[{body.code} for {v} in {coll}]", kind=list)
        if target.kind is not list or not target.simple:
            return out
        # A list of one element (most lists of a manifest: one parentRef, filter, backendRef):
        # the body written once more over that element, without the comprehension (a
        # function call and a list in Python 3.11, several times the cost of the body). The
        # same operations on the same value: the same result, or the same exception.
        # (Lists of two written so too: 0.4% fewer instructions per load, not kept.)
        one = Expr(f"(len({target.code}) == 1)", True, bool)
        with self._assuming(frozenset((("len", target.code, 1),))):
            single = self._unrolled(name, var, target, items, body_tree, cond_tree, 1)
        if single.boolean and constant(single) is not None:
            return self._ternary(one, single, out)
        return out._replace(code=f"({single.code} if {one.code} else {out.code})")

    def _unrolled(
        self,
        name: str,
        var: str,
        target: Expr,
        items: Any,
        body_tree: Any,
        cond_tree: Any,
        n: int,
    ) -> Expr:
        """The macro ``name`` over the list ``target`` known to hold ``n`` elements: its body
        written once per element, without a comprehension. Where it returns, its value is
        the macro's: `all` as `and`, `exists` as `or` (an element that decides decides in CEL
        too, whatever the others give), `exists_one` by the count of true bodies."""
        codes = [f"{target.code}[{i}]" for i in range(n)]
        # (each element exists: reading it never raises)
        rows = [
            self._scoped(var, self._element(c, target, items), body_tree, cond_tree) for c in codes
        ]
        if name in ("all", "exists"):
            out = self._as_bool(rows[0][0])
            for body, _cond in rows[1:]:
                out = _logical(out, "and" if name == "all" else "or", self._as_bool(body))
            return out  # (its facts hold after it: about the elements, not the variable)
        if name == "exists_one":
            tests = [self._as_bool(body) for body, _cond in rows]
            if n == 1:
                return tests[0]
            known = [constant(t) for t in tests]
            if n == 2 and known.count(None) == 1:  # (one side known: the other decides)
                other = tests[known.index(None)]
                return _negated(other) if True in known else other
            total = all(t.total for t in tests)
            return Expr(f"(({' + '.join(t.code for t in tests)}) == 1)", True, bool, total=total)
        parts: list[Expr] = []
        counted = []
        for code, (body, cond) in zip(codes, rows, strict=True):
            if name == "filter":
                test = self._as_bool(body)
                counted.append(test.code)
                parts.append(Expr(f"([{code}] if {test.code} else [])", total=test.total))
            elif cond is not None:
                test = self._as_bool(cond)
                code_ = f"([{body.code}] if {test.code} else [])"
                parts.append(Expr(code_, total=test.total and body.total))
            else:
                parts.append(Expr(f"[{body.code}]", total=body.total))
        return Expr(
            " + ".join(p.code for p in parts)
            if n == 1
            else f"({' + '.join(p.code for p in parts)})",
            kind=list,
            most=n,
            total=all(p.total for p in parts),
            # (a filter's size: how many bools are true)
            tally=f"({' + '.join(counted)})" if name == "filter" and n > 1 else None,
        )

    def _element(self, code: str, target: Expr, items: Any) -> Expr:
        """An element of ``target`` (a list's, checked against ``items``; or a map's key,
        which need not be a string: YAML has others)."""
        if items is not None:
            return self._checked(code, items, True, True)
        return Expr(code, simple=True, total=True)

    def _scoped(
        self, var: str, element: Expr, body_tree: Any, cond_tree: Any
    ) -> tuple[Expr, Expr | None]:
        """A macro's body (and the condition of a three-argument ``map``) written with
        ``var`` standing for ``element``."""
        outer, outer_facts = self.scope.get(var), self.facts
        self.scope[var] = element
        # (facts about an outer variable of the same name no longer apply)
        self.facts = frozenset(f for f in outer_facts if f"v_{var}" not in f[1])
        try:
            body = self.e(body_tree)
            cond = self.e(cond_tree) if cond_tree is not None else None
        finally:
            self.facts = outer_facts
            if outer is None:
                del self.scope[var]
            else:
                self.scope[var] = outer
        return body, cond

    def w_ident_arg(self, t: lark.Tree) -> Expr:
        ch = list(t.children)
        name = str(ch[0])
        args = list(ch[1].children) if len(ch) > 1 else []
        if name == "has":
            return self._has(args)
        fn = cel.GLOBALS.get(name)
        if fn is None:
            raise Untranslatable(f"function {name}")
        return self._call(fn, ("function", name), name, [self.e(a) for a in args])

    def _has(self, args: list[Any]) -> Expr:
        node = args[0] if len(args) == 1 else None
        while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
            node = node.children[0]
        if not (isinstance(node, lark.Tree) and node.data == "member_dot"):
            raise Untranslatable("has() argument")
        obj, field = self.e(node.children[0]), cel.unescape(str(node.children[1]))
        if self._has_field(obj, field):
            return TRUE
        return Expr(
            _typed(obj, dict, f"({field!r} in {obj.code})", f"_cel_has({obj.code}, {field!r})"),
            True,
            bool,
            total=obj.total and obj.kind is dict,
            if_true=frozenset((("has", obj.code, field),)),
        )

    def w_ident(self, t: lark.Tree) -> Expr:
        name = str(t.children[0])
        if name in self.scope:
            return self.scope[name]
        if name == "self":
            return self._checked(self.self_name, self.self_node, True, True)
        if name == "format":
            return Expr(self.names.add("c_", cel.FORMAT_LIB, ("format",)), simple=True, total=True)
        raise Untranslatable(f"identifier {name}")

    w_dot_ident = w_ident

    # ---- literals

    def w_list_lit(self, t: lark.Tree) -> Expr:
        items = [self.e(e) for e in t.children[0].children] if t.children else []
        code = f"[{', '.join(i.code for i in items)}]"
        strings = [i.literal for i in items if type(i.literal) is str]
        # a list of string literals also carries them as a set, for `in`
        literal = frozenset(strings) if items and len(strings) == len(items) else None
        return Expr(code, kind=list, literal=literal, total=all(i.total for i in items))

    def w_map_lit(self, t: lark.Tree) -> Expr:
        kids = list(t.children[0].children) if t.children else []
        pairs = [
            f"({self.e(kids[i]).code}, {self.e(kids[i + 1]).code})" for i in range(0, len(kids), 2)
        ]
        return Expr(f"_cel_map(({''.join(p + ', ' for p in pairs)}))", kind=dict)

    def w_literal(self, t: lark.Tree) -> Expr:
        # the closures' own literal decoding, so both read a literal alike
        value = cel._Compiler().c_literal(t)({})
        kind = type(value)
        if value is None or kind in (bool, str, int):
            bound = value if kind is int and value >= 0 else None
            return Expr(
                repr(value),
                kind is bool,
                kind,
                True,
                value if kind is str else None,
                bound=bound,
                total=True,
            )
        return Expr(
            self.names.add("c_", value, ("literal", kind.__name__, repr(value))),
            kind=kind,
            simple=True,
            total=True,
        )


def guarded_together(rules: list[Expr]) -> list[str]:
    """The codes of boolean ``rules``, all to hold, with the rules of the form ``c ? b : true``
    that share a condition ``c`` written as one ``(b1 and b2 ...) if c else True``: ``c`` is
    tested once (a node's rules often share one, e.g. a path match's over its type). Only
    the order of evaluation changes: with pure operands, the conjunction's value is the
    same whenever it does not raise (and when it raises, the closures decide)."""
    by_test: dict[str, list[str]] = {}
    for rule in rules:
        if rule.guarded is not None:
            by_test.setdefault(rule.guarded[0], []).append(rule.guarded[1])
    out: list[str] = []
    for rule in rules:
        if rule.guarded is None or len(by_test[rule.guarded[0]]) == 1:
            out.append(rule.code)
        elif by_test[rule.guarded[0]]:  # (the first of its group: the group's place)
            test = rule.guarded[0]
            out.append(f"(({' and '.join(by_test[test])}) if {test} else True)")
            by_test[test] = []
    return out


def transpile(
    source: str,
    names: Names,
    self_name: str,
    self_node: Schema | None = None,
    kind: Kind = lambda node: None,
    fields: dict[str, str] | None = None,
    present: Present = lambda node, field: False,
    facts: frozenset[Fact] = frozenset(),
) -> tuple[Expr, set[str]]:
    """``source`` as a Python expression over the variable ``self_name``, whose value was
    checked against the schema node ``self_node``; ``kind(node)`` is the Python type of
    every value checked against ``node`` (None when not known). ``fields`` names the
    local variables that hold fields of ``self`` always present (the expression reads
    those instead; under the key :data:`SIZE`, ``size(self)``); the second value is the
    fields it reads. Raises
    :class:`Untranslatable` (or :class:`cel.CelCompileError`) when it cannot be written."""
    writer = _Writer(names, self_name, self_node, kind, fields or {}, present, facts)
    return writer.e(cel.parse(source)), writer.used
