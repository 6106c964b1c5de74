"""Each CRD schema compiled once into Python code that validates and defaults at decoding speed.

:mod:`gateweave.api.schema` walks a manifest against its schema node by node, reading the
schema's keywords as it goes, and says everything that is wrong; a route costs it about
a millisecond. Almost every manifest is valid, and for a valid one only two answers
matter: that it is valid, and its defaulted copy. This module writes, for each version's
schema, code in two steps. First the structure, in C: ``msgspec.convert`` of the manifest
to the schema mirrored as Struct types (:mod:`gateweave.api.schemastruct`: the types of the
fields, required, unknown and null fields, string enums, lengths, integer bounds, item
counts). Then the rest, one Python function per object or array node that has some: its
defaults, patterns and formats (checked once per distinct string), list keys, a number's
finiteness, and its CEL rules as Python expressions (:mod:`gateweave.api.celcode`; a node's
rules written once per value of an enum field, or per length of a list, where each case folds
them: :meth:`_Gen.split`). The
code is written as a module ahead of time and imported (:mod:`gateweave.api.codecache`), or
compiled with ``exec`` (:func:`compile_schema`).

The generated code is exact where it answers and answers only what it is sure of: it
returns the same defaulted copy as the schema walk for a manifest the schema walk accepts,
and raises for anything else (a violation, but also any shape it does not handle itself:
a null, an unknown field, an integer written as ``1.0``). Then the schema walk runs,
and its errors are the answer. So the two can differ only in speed; tests compare them on
the conformance manifests, the fuzz suite's mutations and generated values.

Beside the validator, each version's code has a defaults-only form (``STORED``), for objects
read from the Kubernetes API server, which checked everything else when they were written: the
Struct types' structure, then only the defaults (``_Gen``'s ``stored`` decides what it leaves
out). For any object whose structure is the schema's it answers exactly as the walk's
defaulting (:func:`gateweave.api.schema.default`) does; for any other it raises (then the walk
defaults it).

Nodes with keywords this module does not write code for (``allOf``/``anyOf``/``oneOf``/
``not``, ``x-kubernetes-int-or-string``, ``nullable``, ``multipleOf``, ``uniqueItems``,
``x-kubernetes-preserve-unknown-fields``, ...) are handed to the schema walk, subtree by
subtree: a subtree's validity and defaulted copy do not depend on anything above it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from gateweave.api import cel, celcode, patterns
from gateweave.api import schema as exact

Schema = dict[str, Any]


class Unsure(Exception):
    """The generated code cannot vouch for this value: the schema walk decides."""


# Keywords the generated code checks itself; a node with any other keyword the schema walk
# reads goes to the schema walk as a whole.
_WRITTEN = frozenset(
    (
        "type",
        "properties",
        "required",
        "default",
        "items",
        "additionalProperties",
        "enum",
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-validations",
    )
)
# Keywords the schema walk reads (anything else, description or x-kubernetes-map-type, has no
# effect).
_READ = _WRITTEN | frozenset(
    (
        "nullable",
        "x-kubernetes-int-or-string",
        "multipleOf",
        "uniqueItems",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "x-kubernetes-preserve-unknown-fields",
    )
)
# The Python type of a value the generated code has checked against a node of each type.
_KINDS: dict[str, type] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "boolean": bool,
}


def _pattern(pattern: str, value: str) -> None:
    if not exact._matches(pattern, value):  # (which remembers the strings that match)
        raise Unsure


def _enum(value: Any, allowed: tuple[Any, ...]) -> None:
    if not any(cel.cel_eq(value, e) for e in allowed):
        raise Unsure


def _json_key(value: Any) -> Any:
    """A value that two list-map keys share exactly when the schema walk's JSON texts of them
    are equal (strings, integers and absent keys; anything else is the schema walk's)."""
    if value is None or type(value) is str or type(value) is int:
        return value
    raise Unsure


def _unique_map(items: list[Any], keys: tuple[str, ...]) -> None:
    if len(keys) == 1:  # (the usual list map, keyed by one field: its values compared alone)
        field = keys[0]
        found = [_json_key(item.get(field)) for item in items if type(item) is dict]
        if len(set(found)) != len(found):
            raise Unsure
        return
    seen = set()
    for item in items:
        if type(item) is dict:
            key = tuple(_json_key(item.get(k)) for k in keys)
            if key in seen:
                raise Unsure
            seen.add(key)


def _unique_set(items: list[Any]) -> None:
    """Strings and integers are equal exactly when their JSON texts are (as the walk
    compares items); anything else (a bool equals 1 in Python) is the walk's."""
    if all(type(i) is str or type(i) is int for i in items):
        if len(set(items)) != len(items):
            raise Unsure
        return
    raise Unsure


_PASSED: list[set[str]] = []  # the strings known to be of a format, per format and schema


def clear_memos() -> None:
    """Forget every remembered string (what a cold start knows: for measurements and tests)."""
    for passed in [*_PASSED, *exact._MATCHED.values()]:
        passed.clear()
    celcode.clear_memos()


def _rules_hold(programs: tuple[cel.Program, ...], value: Any) -> bool:
    """Every rule true, by the closures (exact; what a rule's Python expression could not say)."""
    for program in programs:
        try:
            if program.evaluate({"self": value}) is not True:
                return False
        except cel.CelError:
            return False
    return True


def _walk(value: Any, node: Schema) -> Any:
    """A subtree the generated code leaves to the schema walk: its defaulted copy when valid
    and without unknown fields (those are refused or pruned: the walk's to say which)."""
    unknown: list[exact.FieldError] = []
    out = exact._prepare(value, node, unknown)
    if unknown:
        raise Unsure
    validator = exact._Validator()
    validator.node(out, node, "")
    if validator.errors:
        raise Unsure
    return out


def _handled(node: Any) -> bool:
    """Whether the generated code checks a value against ``node`` itself (else: the walk)."""
    return (
        isinstance(node, dict)
        and node.get("type") in (*_KINDS, "number")
        and not any(k in node for k in _READ - _WRITTEN)
        and not (
            node["type"] == "object"
            and node.get("properties")
            and node.get("additionalProperties") not in (None, False)
        )
        and node.get("additionalProperties") is not True
        and not (node["type"] == "array" and not isinstance(node.get("items"), dict))
    )


def _struct_enum(node: Schema) -> bool:
    """Whether the node's Struct type (:mod:`gateweave.api.schemastruct`) checks its enum
    (a string's, as a Literal); else the generated code does."""
    enum = node.get("enum")
    return node["type"] == "string" and enum is not None and all(type(e) is str for e in enum)


def _struct_bounds(node: Schema) -> bool:
    """Whether the node's Struct type checks its bounds (an integer's, integral bounds);
    else the generated code does."""
    return node["type"] == "integer" and all(
        type(node[k]) is int for k in ("minimum", "maximum") if k in node
    )


def _kind(node: Any) -> type | None:
    """The Python type of every value the generated code accepted against ``node``."""
    return _KINDS.get(node["type"]) if _handled(node) else None


class _Gen:
    """The code of one version's schema, run on a manifest its Struct types accepted (so
    without the checks those made).

    ``stored``: the defaults-only form (:func:`generate`'s ``STORED``), for an object the API
    server stored: the structure (the Struct types, then nulls and the walk's subtrees
    pruned and defaulted) and the defaults, none of the checks the API server made on write
    (patterns, formats, enums, bounds, list keys, sizes, CEL rules). This flag is the one
    place that decides what the form leaves out."""

    def __init__(self, names: celcode.Names | None = None, *, stored: bool = False) -> None:
        self.stored = stored
        self.prefix = "g" if stored else "f"  # (both forms' functions share one module)
        self.names = names if names is not None else celcode.Names()
        self.names.values.update(
            {
                "Unsure": Unsure,
                "_pattern": _pattern,
                "_remember": patterns.remember,
                "_enum": _enum,
                "_unique_map": _unique_map,
                "_unique_set": _unique_set,
                "_rules_hold": _rules_hold,
                "_walk": _walk,
                "_prepare": exact._prepare,
                "_copy": exact.copy_json,
                "_isfinite": math.isfinite,
            }
        )
        self.funcs: dict[int, str] = {}
        self.blocks: list[list[str]] = []
        self.loops: dict[str, str] = {}  # an array's function -> its items' (its only check)
        self.keep: list[Schema] = []  # the nodes named by id stay alive while generating
        self.top: Schema | None = None  # the root node

    # ---- scalars, inline in the code of their object or array

    @staticmethod
    def checked(passed: str, fn: str, x: str, pad: str) -> list[str]:
        """A string checked by the Python function ``fn`` (a pattern's or a format's), once:
        the strings that passed are remembered in ``passed``."""
        return [
            f"{pad}if {x} not in {passed}:",
            f"{pad}    if not {fn}({x}): raise Unsure",
            f"{pad}    _remember({passed}, {x})",
        ]

    def scalar(self, node: Schema, x: str, out: list[str], pad: str) -> None:
        # (the type, a string's lengths: checked by the Struct types; a float's finiteness not)
        if self.stored:
            return  # (a scalar has no default of its own below it: nothing to do)
        t = node["type"]
        if t == "number":
            out.append(
                f"{pad}if type({x}) is not int and (type({x}) is not float or not _isfinite({x})): "
                "raise Unsure"
            )
        enum = node.get("enum")
        if enum is not None and not _struct_enum(node):
            out.append(
                f"{pad}_enum({x}, {self.names.add('E', tuple(enum), ('enumt', repr(enum)))})"
            )
        if t == "string":
            pattern = node.get("pattern")
            if pattern is not None:
                # the strings schema._matches found to match (checked inline: most repeat)
                passed = self.names.add(
                    "P", exact._MATCHED.setdefault(pattern, set()), ("pattern", pattern)
                )
                check = patterns.CHECKS.get(pattern)
                if check is not None:  # a pattern written as Python: called directly
                    fn = self.names.add("F", check, ("patternfn", pattern))
                    out += self.checked(passed, fn, x, pad)
                else:
                    pat = self.names.add("S", pattern, ("str", pattern))
                    out.append(f"{pad}if {x} not in {passed}: _pattern({pat}, {x})")
            fmt = node.get("format")
            check = exact._FORMATS.get(fmt) if isinstance(fmt, str) else None
            if check is not None:
                known: set[str] = set()
                passed = self.names.add("P", known, ("format", fmt))
                if self.names.values[passed] is known:
                    _PASSED.append(known)
                fn = self.names.add("F", check, ("formatfn", fmt))
                out += self.checked(passed, fn, x, pad)
        elif t in ("integer", "number") and not _struct_bounds(node):
            self.bounds(node, x, out, pad)
        self.rules(node, x, out, pad)

    def bounds(self, node: Schema, x: str, out: list[str], pad: str) -> None:
        for key, excl, op in (
            ("maximum", "exclusiveMaximum", ">"),
            ("minimum", "exclusiveMinimum", "<"),
        ):
            if key in node:
                limit = self.names.add("N", node[key], ("num", repr(node[key])))
                out.append(
                    f"{pad}if {x} {op + '=' if node.get(excl) else op} {limit}: raise Unsure"
                )

    # ---- CEL rules

    def present(self, node: Schema, key: str) -> bool:
        """Whether every value checked against the object ``node`` has the field ``key`` when
        its rules run: required (the Struct types check it), or defaulted (a default the walk
        accepts; not the root's kept fields, never defaulted)."""
        props = node.get("properties") or {}
        if node.get("type") != "object" or key not in props:
            return False
        if key in (node.get("required") or ()):
            return True
        if node is self.top and key in exact._ROOT_KEEP:
            return False
        return self.default(props[key]) not in (
            None,
            "_raise_unsure()",
        )

    def rules(self, node: Schema, x: str, out: list[str], pad: str) -> None:
        rules = node.get("x-kubernetes-validations")
        if not rules or self.stored:
            return
        # fields always there once the node is checked (required, or defaulted): read once
        fields: dict[str, str] = {}
        if node.get("type") == "object" and x == "d":
            props = node.get("properties") or {}
            fields = {k: f"s_{i}" for i, k in enumerate(k for k in props if self.present(node, k))}
        if node.get("type") in ("object", "array", "string"):
            fields[celcode.SIZE] = "s_len"
        used: set[str] = set()

        def write(source: str, facts: frozenset[celcode.Fact]) -> celcode.Expr | None:
            """The rule as Python where ``facts`` hold (None: the closures evaluate it)."""
            try:
                expr, reads = celcode.transpile(
                    source, self.names, x, node, _kind, fields, self.present, facts
                )
            except (celcode.Untranslatable, cel.CelCompileError):
                return None
            used.update(reads)
            return expr

        programs: list[cel.Program] = []
        general: list[celcode.Expr] = []  # the rules written as Python booleans
        sources: list[str] = []  # (their sources)
        parts: list[str] = []  # the others
        for rule in rules:
            if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
                continue
            try:
                program = cel.compile_rule(rule["rule"])
            except cel.CelCompileError:
                out.append(
                    f"{pad}raise Unsure  # a rule that does not compile: an error for every value"
                )
                return
            if program.uses_old_self:
                continue  # transition rule: only evaluated on update
            programs.append(program)
            expr = write(rule["rule"], frozenset())
            if expr is None:
                parts.append(
                    f"_rules_hold(({self.names.add('R', program, ('program', rule['rule']))},), "
                    f"{x})"
                )
            elif expr.boolean:
                general.append(expr)
                sources.append(rule["rule"])
            else:
                parts.append(f"({expr.code}) is True")
        if not programs:
            return
        parts += self.split(node, x, fields, sources, general, write, used)
        if not parts:
            return  # (every rule decided true by the schema)
        progs = self.names.add(
            "R", tuple(programs), ("programs", tuple(p.source for p in programs))
        )
        out += [
            f"{pad}try:",
            *(
                f"{pad}    {fields[k]} = {f'len({x})' if k == celcode.SIZE else f'{x}[{k!r}]'}"
                for k in sorted(used)
            ),
            f"{pad}    ok = {' and '.join(parts)}",
            f"{pad}except Exception:",
            f"{pad}    ok = _rules_hold({progs}, {x})",
            f"{pad}if not ok: raise Unsure",
        ]

    def split(
        self,
        node: Schema,
        x: str,
        fields: dict[str, str],
        sources: list[str],
        general: list[celcode.Expr],
        write: Callable[[str, frozenset[celcode.Fact]], celcode.Expr | None],
        used: set[str],
    ) -> list[str]:
        """The codes of the boolean rules ``general`` (of ``sources``), all to hold: as they
        are, or written once per case of a test where that pays (:meth:`cases`), each case's
        rules folded by what its test established, the rules as they are in the last branch.
        A rule every case of an enum's values folds to true (the node's enum decides it) is
        pinned: left out."""
        best: tuple[float, list[str], str | None] | None = None
        written: dict[frozenset[celcode.Fact], list[celcode.Expr | None]] = {}

        def case(facts: frozenset[celcode.Fact]) -> list[celcode.Expr | None]:
            """The rules written where ``facts`` hold (once per facts)."""
            if facts not in written:
                written[facts] = [write(source, facts) for source in sources]
            return written[facts]

        for key, cases, exhaustive in self.cases(node, x, fields):
            if not any(_reads(e.code, fields[key]) for e in general):
                continue  # (no rule reads what the cases test: nothing folds)
            folded = [case(facts) for _test, facts in cases]
            if any(e is None or not e.boolean for row in folded for e in row):
                continue
            rows = [[e for e in row if e is not None] for row in folded]
            pinned = {
                i for i in range(len(sources)) if exhaustive and all(_true(row[i]) for row in rows)
            }
            rest = [e for i, e in enumerate(general) if i not in pinned]
            whole = _conjunction(rest)
            codes = [
                _conjunction([e for i, e in enumerate(row) if i not in pinned]) for row in rows
            ]
            # the cost, by the length of the code: each test a few, the cases alike likely
            # (a list's lengths: each of 1.._LENGTHS, and any longer, alike)
            tests = [len(test) + 12 for test, _facts in cases]
            costs = [sum(tests[: i + 1]) + _cost(c) for i, c in enumerate(codes)]
            if not exhaustive:  # (lengths past the cases': the rules as they are, after the tests)
                costs += [sum(tests) + _cost(whole)] * (_LENGTHS + 1 - len(cases))
            cost = sum(costs) / len(costs)
            if pinned and (best is None or _cost(whole) < best[0]):
                best = (_cost(whole), [whole], None)
            if cost < 0.8 * _cost(whole) and (best is None or cost < best[0]):
                chain = whole
                for (test, _facts), code in reversed(list(zip(cases, codes, strict=True))):
                    chain = (
                        f"({test} or {chain})"
                        if code == "True"
                        else f"({code} if {test} else {chain})"
                    )
                best = (cost, [chain], key)
        if best is not None:
            if best[2] is not None:
                used.add(best[2])  # (the cases' tests read it)
            return [c for c in best[1] if c != "True"]
        return [c for c in celcode.guarded_together(general) if c != "True"]

    def cases(
        self, node: Schema, x: str, fields: dict[str, str]
    ) -> list[tuple[str, list[tuple[str, frozenset[celcode.Fact]]], bool]]:
        """Tests a node's rules may be split by: the field a test reads, its cases (each a
        test's code and the facts it establishes) and whether they are exhaustive. Each value
        of an always present string field's enum (which the Struct types check); a list's
        lengths, one, one and two, one to three (:data:`_LENGTHS`) elements."""
        out: list[tuple[str, list[tuple[str, frozenset[celcode.Fact]]], bool]] = []
        if x != "d":
            return out
        props = node.get("properties") or {}
        for key, local in fields.items():
            sub = props.get(key)
            if not (isinstance(sub, dict) and _handled(sub) and _struct_enum(sub)):
                continue
            values = [v for v in sub["enum"] if type(v) is str]
            cases = [(f"({local} == {v!r})", frozenset((("eq", local, v),))) for v in values]
            out.append((key, cases, True))
        if node.get("type") == "array" and celcode.SIZE in fields:
            lengths = [
                (f"({fields[celcode.SIZE]} == {n})", frozenset((("len", x, n),)))
                for n in range(1, _LENGTHS + 1)
            ]
            out += [(celcode.SIZE, lengths[:n], False) for n in range(1, len(lengths) + 1)]
        return out

    # ---- containers: one function each

    def value(self, node: Schema, x: str, out: list[str], pad: str) -> str | None:
        """Code checking ``x`` (not None) against ``node`` and defaulting it in place; or,
        for a node the walk decides, the expression of the value that replaces ``x``."""
        if not _handled(node):
            walk = "_prepare" if self.stored else "_walk"  # (stored: pruned and defaulted only)
            return f"{walk}({x}, {self.names.add('W', node, ('walk', id(node)))})"
        if node["type"] in ("object", "array"):
            name = self.func(node)
            item = self.loops.get(name)
            if item is not None:  # (a list whose function only checks each item: no call)
                out.append(f"{pad}for y in {x}: {item}(y)")
            elif name:  # ("": a node left with nothing to check)
                out.append(f"{pad}{name}({x})")
        else:
            self.scalar(node, x, out, pad)
        return None

    def func(self, node: Schema) -> str:
        name = self.funcs.get(id(node))
        if name is not None:
            return name
        name = f"{self.prefix}{len(self.funcs)}"
        self.funcs[id(node)] = name
        self.keep.append(node)
        body = self.array(node) if node["type"] == "array" else self.object(node, root=False)
        if not body:
            self.funcs[id(node)] = ""
            return ""
        self.blocks.append([f"def {name}(d):", *body])
        loop = _ITEMS_ONLY.fullmatch("\n".join(body))
        if loop is not None:
            self.loops[name] = loop.group(1)
        return name

    def array(self, node: Schema) -> list[str]:
        out: list[str] = []  # (the type, minItems, maxItems: checked by the Struct types)
        loop: list[str] = []
        replace = self.value(node["items"], "x", loop, "        ")
        if replace is not None:
            out += [
                "    for i, x in enumerate(d):",
                "        if x is None: raise Unsure",
                f"        d[i] = {replace}",
            ]
        elif loop:
            out += ["    for x in d:", *loop]
        list_type = None if self.stored else node.get("x-kubernetes-list-type")
        if list_type == "set":
            out.append("    if len(d) > 1: _unique_set(d)")
        elif list_type == "map":
            keys = tuple(node.get("x-kubernetes-list-map-keys") or ())
            out.append(f"    if len(d) > 1: _unique_map(d, {keys!r})")
        self.rules(node, "d", out, "    ")
        return out

    def object(self, node: Schema, *, root: bool) -> list[str]:
        """An object's checks after its Struct type's (the type, each present field of a
        known name, not null unless the walk decides it, of its type; required fields; a
        map's size): those left of the fields present (a lookup each, only for the fields
        that have some), the defaults of the absent ones in field order, the node's rules."""
        props: dict[str, Schema] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        required = list(node.get("required") or ())
        out: list[str] = []
        if isinstance(extra, dict):  # a map: any keys, each value checked against one node
            loop: list[str] = []
            replace = self.value(extra, "x", loop, "        ")
            if replace is not None:  # (a node the walk decides: its type admits null)
                out += [
                    "    if None in d.values(): raise Unsure  # a null: dropped, defaulted or "
                    "nullable",
                    "    for k, x in d.items():",
                    f"        d[k] = {replace}",
                ]
            elif loop:
                out += ["    for x in d.values():", *loop]
            if not self.stored:
                out += [f"    if {key!r} not in d: raise Unsure  # required" for key in required]
        else:
            out += [
                f"    raise Unsure  # {key!r} is required but not a field"
                for key in required
                if key not in props and not self.stored
            ][:1]
            for key, sub in props.items():
                if root and key in exact._ROOT_KEEP:
                    # kept as written (never pruned or defaulted): only its type is checked
                    if (
                        not isinstance(sub, dict)
                        or set(sub) - {"type", "description"}
                        or sub.get("type") not in ("object", "string")
                    ):
                        raise ValueError(
                            f"root field {key} has a schema this module does not check"
                        )
                    continue
                checks: list[str] = []
                replace = self.value(sub, "x", checks, "        ")
                if replace is not None:  # (a node the walk decides: its type admits null)
                    out += [
                        f"    if {key!r} in d:",
                        f"        x = d[{key!r}]",
                        "        if x is None: raise Unsure  # a null: dropped, defaulted or "
                        "nullable",
                        f"        d[{key!r}] = {replace}",
                    ]
                elif checks:
                    out += [f"    x = d.get({key!r})", "    if x is not None:", *checks]
            for key, sub in props.items():
                default = None if root and key in exact._ROOT_KEEP else self.default(sub)
                if default is not None:
                    out.append(f"    if {key!r} not in d: d[{key!r}] = {default}")
            if "maxProperties" in node and not self.stored:
                out.append(f"    if len(d) > {int(node['maxProperties'])}: raise Unsure")
            if "minProperties" in node and not self.stored:
                out.append(f"    if len(d) < {int(node['minProperties'])}: raise Unsure")
        if not root:
            self.rules(node, "d", out, "    ")
        return out

    def default(self, sub: Schema) -> str | None:
        """The expression of a fresh copy of ``sub``'s default (defaulted itself, as the
        schema walk applies it), or None when there is none; a default the schema walk would
        refuse raises there."""
        if not isinstance(sub, dict) or "default" not in sub:
            return None
        value = exact._prepare(sub["default"], sub)
        validator = exact._Validator()
        validator.node(value, sub, "")
        if validator.errors and not self.stored:  # (stored: applied as the walk applies it)
            return "_raise_unsure()"
        if value is None or type(value) in (str, int, bool):
            return repr(value)
        name = self.names.add("D", value, ("default", id(sub)))
        return name if type(value) is float else f"_copy({name})"

    def root(self, node: Schema, name: str, structure: list[str]) -> None:
        """The function ``name``: ``structure`` (the Struct types' check), then the root
        object's code; it returns the defaulted copy in the walk's key order (``d`` itself when
        its keys already are: it starts with every key of ``_ROOT_KEEP``, in that order)."""
        keep = exact._ROOT_KEEP
        self.top = node
        body = self.object(node, root=True)
        body += [
            f"    if tuple(d)[:{len(keep)}] == {keep!r}:",
            "        o = d  # (the usual order, already the walk's: no copy)",
            "    else:",
            "        o = {}",
            *(f"        if {k!r} in d: o[{k!r}] = d[{k!r}]" for k in keep),
            "        for k, x in d.items():",
            f"            if k not in {keep!r}: o[k] = x",
        ]
        self.rules(node, "o", body, "    ")
        body.append("    return o")
        self.blocks.append([f"def {name}(d):", *structure, *body])


# The body of an array's function that only checks each item with the item's function.
_ITEMS_ONLY = re.compile(r"    for x in d:\n        ([a-z]+[0-9]+)\(x\)")

# A list's rules are split by its lengths up to this one (see :meth:`_Gen.cases`); in the
# cost of a split, each of these lengths and every longer list weigh alike.
_LENGTHS = 3


def _reads(code: str, local: str) -> bool:
    """Whether ``code`` reads the local variable ``local`` (or holds a comprehension, which a
    list's length splits unroll)."""
    return re.search(rf"\b{local}\b", code) is not None or (local == "s_len" and " for " in code)


def _cost(code: str) -> int:
    """A rough cost of evaluating ``code``: its length, and a comprehension (a call and a
    list) as much as a long expression."""
    return len(code) + 300 * code.count(" for ")


def _true(expr: celcode.Expr) -> bool:
    return celcode.constant(expr) is True


def _conjunction(rules: list[celcode.Expr]) -> str:
    """The code of boolean ``rules`` all holding ("True" for none; "False" where one is)."""
    if any(celcode.constant(r) is False for r in rules):
        return "False"
    codes = celcode.guarded_together([r for r in rules if not _true(r)])
    return f"({' and '.join(codes)})" if len(codes) > 1 else (codes[0] if codes else "True")


def _raise_unsure() -> Any:
    raise Unsure


def generate(node: Schema) -> tuple[str, dict[str, Any], celcode.Names]:
    """The source of one version's validator (its function ``ROOT``) and of its defaults-only
    form for stored objects (``STORED``), the namespace they run in (their globals) and the
    names of that namespace's values (:func:`compile_schema` runs it;
    :mod:`gateweave.api.codecache` writes it as a module). Raises ValueError for a schema this
    module does not write."""
    if not _handled(node) or node["type"] != "object" or not node.get("properties"):
        raise ValueError("a root node this module does not write")
    from gateweave.api import schemastruct  # (which reads this module's decisions)

    gen = _Gen()
    # First the structure, in C: the manifest converted to the schema's Struct types (which
    # raises for anything they refuse: then the walk decides).
    struct = gen.names.add("T", schemastruct.root_type(node), ("struct", None))
    convert = gen.names.add("F", schemastruct.convert, ("convert", None))
    refused = gen.names.add("F", schemastruct.ValidationError, ("refused", None))
    structure = [
        "    try:",
        f"        {convert}(d, type={struct})",
        f"    except {refused}:",
        "        raise Unsure from None",
    ]
    gen.root(node, "root", structure)
    stored = _Gen(gen.names, stored=True)
    stored.root(node, "stored", structure)
    namespace: dict[str, Any] = dict(gen.names.values)
    namespace["_raise_unsure"] = _raise_unsure
    lines = [line for block in (*gen.blocks, *stored.blocks) for line in block]
    return "\n".join(lines) + "\nROOT = root\nSTORED = stored\n", namespace, gen.names


def compile_schema(node: Schema) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The generated validator of one version's schema: ``fn(raw)`` defaults ``raw`` in
    place and returns it as ``schema._defaulted`` makes it (apiVersion, kind and metadata
    first) when ``raw`` is valid; it raises when ``raw`` is not valid, or when the generated
    code cannot tell (then the walk decides, on ``raw`` with some defaults already in
    place: what the walk would add anyway, where it would add it, at the end of its map).
    Generated and compiled in memory (:mod:`gateweave.api.codecache` imports it instead,
    written ahead of time)."""
    source, namespace, _ = generate(node)
    return run(source, namespace)


def run(
    source: str, namespace: dict[str, Any], name: str = "ROOT"
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function ``name`` of what :func:`generate` wrote (``ROOT``: the validator;
    ``STORED``: its defaults-only form), compiled in memory (``namespace`` is its globals)."""
    exec(compile(source, "<gateweave.api.schemacode>", "exec"), namespace)
    fn: Callable[[dict[str, Any]], dict[str, Any]] = namespace[name]
    return fn
