"""The schemas' generated validators as Python modules: written once, imported after.

:mod:`gateweave.api.schemacode` writes one Python function per node of a version's schema.
Generating it parses every CEL rule with celpy (whose parser builds its tables, about 0.9 s
once per process; celpy, lark and the parse trees hold about 17 MB while loaded). This module
writes the generated code as a module file the first time, and imports it after (Python
caches its bytecode beside it), so a start neither parses a rule nor imports celpy or lark:
the schema walk (:mod:`gateweave.api.schema`) imports them when it needs a CEL program (for an
invalid object, or a rule the code evaluates with :mod:`gateweave.api.cel`'s closures).

Never stale. A file is named by what its code derives from: the schema's JSON text (key
order included, which decides the order defaults are added in) and the generator, the
source of the modules that write the code and of celpy's parser (:func:`generator_digest`).
A changed schema or generator names another file; the old one is never read again. A file
that does not load, or whose ``KEY`` is not the one asked for, is regenerated.

A module holds both forms :func:`schemacode.generate` writes: the validator (``ROOT``,
:func:`validator`) and its defaults-only form for objects the API server stored (``STORED``,
:func:`defaulter`).

The generated functions read their constants from module globals, rebuilt at import
without celpy: literals (strings, numbers, tuples, frozensets, default values) as written;
the memos of strings known to match a pattern or a format, as the generator registers
them; the schema's Struct types (:func:`schemastruct.root_type`, from the schema passed to
``bind``); RE2 programs by :func:`cel.search_program`; library functions by their module
attribute; the schema nodes a subtree is handed to the walk with, by their path in the
schema passed to ``bind``. A CEL program is a :class:`Rule`, compiled (celpy imported)
when first evaluated: for a rule the generated code does not write as Python, or one whose
Python expression raised. A value none of these rebuilds is not written: that version's
code is then compiled in memory (:func:`schemacode.compile_schema`), as it is without a
writable place.

Where: ``build/validators`` in a source checkout (beside the mypyc build; ``dev.py``
writes every version's file before a command runs), else ``$XDG_CACHE_HOME/gateweave/validators``
(``~/.cache``): a cache, not committed, as the generator changes with every edit of the
modules above. ``GATEWEAVE_VALIDATOR_CACHE`` names another directory, or ``off``. A directory
or file not owned by this user, or writable by others, is never read.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import py_compile
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateweave.api import cel, celcode, patterns, schemacode, schemastruct
from gateweave.api import schema as exact

Schema = dict[str, Any]
Validator = Callable[[dict[str, Any]], dict[str, Any]]
Forms = tuple[Validator, Validator]  # a version's validator and its defaults-only form

ENV = "GATEWEAVE_VALIDATOR_CACHE"
_HERE = Path(__file__).resolve()
# The modules that write the code (and this one, which writes the module around it).
_GENERATOR_MODULES = (
    "schemacode.py",
    "schemastruct.py",
    "celcode.py",
    "cel.py",
    "schema.py",
    "patterns.py",
)
# celpy's parser: its grammar and tree, and the lark version that reads them.
_PARSER_FILES = {
    "celpy": ("cel.lark", "celparser.py", "evaluation.py", "__init__.py"),
    "lark": ("__init__.py",),
}
# What the generated module imports, under names the generated code does not use.
_MODULES = {
    "_gw_cel": cel,
    "_gw_celcode": celcode,
    "_gw_patterns": patterns,
    "_gw_schema": exact,
    "_gw_schemacode": schemacode,
    "_gw_schemastruct": schemastruct,
    "_gw_math": math,
}
_OWN_NAMES = frozenset((*_MODULES, "_gw_codecache", "bind", "KEY", "ROOT", "STORED"))


class Rule:
    """A rule's CEL program, compiled (by :func:`cel.compile_rule`, with celpy) when first
    evaluated."""

    __slots__ = ("_program", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._program: cel.Program | None = None

    def evaluate(self, variables: cel.Env) -> Any:
        if self._program is None:
            self._program = cel.compile_rule(self.source)
        return self._program.evaluate(variables)


class Written(cel.Program):
    """A rule the schema walk evaluates (in a subtree the generated code hands to it),
    written as Python by :func:`celcode.transpile` (with no types known: exact for any value
    whenever it returns); where it raises, or for other variables than ``self``, the
    closures decide (compiled with celpy then). Given to :func:`cel.provide`."""

    __slots__ = ("_closures",)

    def __init__(self, source: str, fn: Callable[[Any], Any], uses_old_self: bool) -> None:
        super().__init__(source, fn, uses_old_self)
        self._closures: cel.Program | None = None

    def evaluate(self, variables: cel.Env) -> Any:
        if variables.keys() == {"self"}:
            try:
                return self.fn(variables["self"])
            except Exception:
                pass  # the closures' to say (an error, or a value this code cannot give)
        if self._closures is None:
            self._closures = cel.closures(self.source)
        return self._closures.evaluate(variables)


def memo(registry: list[set[str]]) -> set[str]:
    """A new memo of strings, registered where the generator registers its own (cleared by
    :func:`schemacode.clear_memos`)."""
    known: set[str] = set()
    registry.append(known)
    return known


# ---------------------------------------------------------------- keys and places


@functools.cache
def generator_digest() -> str:
    """What the generated code depends on besides the schema: the generating modules' source
    and celpy's parser, by content (and the Python version)."""
    h = hashlib.sha256(f"{sys.version_info[:2]}\n".encode())
    files = [_HERE, *(_HERE.parent / name for name in _GENERATOR_MODULES)]
    for package, names in _PARSER_FILES.items():
        spec = importlib.util.find_spec(package)  # (finds it without importing it)
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            raise OSError(f"{package} not found")
        files += [Path(locations[0]) / name for name in names]
    for path in files:
        h.update(path.name.encode() + b"\n" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def schema_digest(node: Schema) -> str:
    """The schema's JSON text, in its own key order (TypeError for a value JSON cannot hold)."""
    text = json.dumps(node, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def key(node: Schema) -> str:
    return f"schema {schema_digest(node)} generator {generator_digest()}"


def file_name(key: str) -> str:
    return f"v{hashlib.sha256(key.encode()).hexdigest()[:40]}.py"


def directories() -> list[Path]:
    """Where the generated modules are looked for, and written (the first that can be)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return [] if chosen in ("", "off") else [Path(chosen)]
    out = []
    root = _HERE.parents[2]
    if (root / "pyproject.toml").is_file() and (root / "gateweave" / "api").is_dir():
        out.append(root / "build" / "validators")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(cache):
        out.append(Path(cache) / "gateweave" / "validators")
    return out


def _trusted(path: Path) -> bool:
    """Owned by this user and writable by no one else (code from it is run)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


# ---------------------------------------------------------------- the module's text


class _NotWritable(Exception):
    """A value of the generated namespace this module cannot rebuild at import."""


def _literal(value: Any) -> str:
    t = type(value)
    if value is None or t in (bool, int, str, bytes):
        return repr(value)
    if t is float:
        if math.isfinite(value):
            return repr(value)
        return f"float({str(value)!r})"
    if t is tuple:
        return "(" + "".join(f"{_literal(v)}, " for v in value) + ")"
    if t is list:
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if t is frozenset:
        return "frozenset((" + "".join(sorted(f"{_literal(v)}, " for v in value)) + "))"
    if t is dict and all(type(k) is str for k in value):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "}"
    raise _NotWritable(t.__name__)


def _attribute(value: Any) -> str:
    """``value`` as an attribute of a module the code imports, or an entry of one's dict."""
    for alias, module in _MODULES.items():
        for attr, held in vars(module).items():
            if held is value:
                return f"{alias}.{attr}"
    for alias, module in _MODULES.items():
        for attr, held in vars(module).items():
            if type(held) is dict:
                for k, v in held.items():
                    if v is value and type(k) is str:
                        return f"{alias}.{attr}[{k!r}]"
    raise _NotWritable(type(value).__name__)


def _memo(value: set[str]) -> str:
    for pattern, known in exact._MATCHED.items():
        if known is value:
            return f"_gw_schema._MATCHED.setdefault({pattern!r}, set())"
    for registry in ("schemacode._PASSED", "celcode._MATCHED"):
        module, attr = registry.split(".")
        if any(known is value for known in getattr(_MODULES[f"_gw_{module}"], attr)):
            return f"_gw_codecache.memo(_gw_{registry})"
    raise _NotWritable("a set of strings")


def _node_paths(root: Schema) -> dict[int, tuple[str | int, ...]]:
    """Every dict and list of the schema, by identity: its path from the root."""
    paths: dict[int, tuple[str | int, ...]] = {}
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        value, path = stack.pop()
        if id(value) in paths:
            continue
        paths[id(value)] = path
        if type(value) is dict:
            stack += [(v, (*path, k)) for k, v in value.items() if type(v) in (dict, list)]
        elif type(value) is list:
            stack += [(v, (*path, i)) for i, v in enumerate(value) if type(v) in (dict, list)]
    return paths


def _recipe(value: Any, name_key: Any, nodes: dict[int, tuple[str | int, ...]]) -> tuple[str, bool]:
    """The expression that rebuilds ``value`` at import, and whether it reads the schema."""
    if type(value) in (dict, list) and id(value) in nodes:
        return "schema" + "".join(f"[{k!r}]" for k in nodes[id(value)]), True
    if type(value) is set:
        return _memo(value), False
    if name_key == ("struct", None):  # the root's Struct types, built again from the schema
        return "_gw_schemastruct.root_type(schema)", True
    if isinstance(value, cel.Program):
        return f"_gw_codecache.Rule({value.source!r})", False
    if type(value) is tuple and value and all(isinstance(p, cel.Program) for p in value):
        return "(" + "".join(f"_gw_codecache.Rule({p.source!r}), " for p in value) + ")", False
    try:
        return _literal(value), False
    except _NotWritable:
        pass
    if (
        type(name_key) is tuple
        and len(name_key) == 2
        and name_key[0] == "program"
        and type(name_key[1]) is str
        and cel.search_program(name_key[1]) is value
    ):
        return f"_gw_cel.search_program({name_key[1]!r})", False
    return _attribute(value), False


def _walked_rules(values: list[Any], nodes: dict[int, tuple[str | int, ...]]) -> list[str]:
    """The rules in the schema's subtrees the generated code hands to the walk."""
    out: list[str] = []
    stack = [v for v in values if type(v) is dict and id(v) in nodes]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            for rule in node.get("x-kubernetes-validations") or ():
                text = rule.get("rule") if isinstance(rule, dict) else None
                if isinstance(text, str) and text not in out:
                    out.append(text)
            stack += [v for v in node.values() if type(v) in (dict, list)]
        elif type(node) is list:
            stack += [v for v in node if type(v) in (dict, list)]
    return out


def _written(
    values: list[Any], nodes: dict[int, tuple[str | int, ...]], names: celcode.Names
) -> list[str]:
    """The walked rules as Python functions, each given to :func:`cel.provide` (the names they
    use added to ``names``)."""
    lines = []
    for i, rule in enumerate(_walked_rules(values, nodes)):
        try:
            uses_old_self = cel.compile_rule(rule).uses_old_self
            expr, _ = celcode.transpile(rule, names, "s")
        except (celcode.Untranslatable, cel.CelCompileError):
            continue  # the walk compiles it (with celpy) when it evaluates it
        lines += [
            f"def _gw_rule{i}(s):",
            f"    return {expr.code}",
            f"_gw_cel.provide(_gw_codecache.Written({rule!r}, _gw_rule{i}, {uses_old_self!r}))",
        ]
    return lines


def render(
    source: str, namespace: dict[str, Any], names: celcode.Names, node: Schema, key: str
) -> str:
    """The module of a generated validator: its namespace rebuilt, the rules of the subtrees
    the walk decides written as Python, then its code; raises _NotWritable when a value
    cannot be rebuilt."""
    nodes = _node_paths(node)
    rules = _written(list(namespace.values()), nodes, names)
    namespace = {**namespace, **{k: v for k, v in names.values.items() if k not in namespace}}
    if _OWN_NAMES & namespace.keys() or "schema" in namespace:
        raise _NotWritable("a name the module uses itself")
    keys = {name: k[1] for k, name in names._by_key.items()}
    lines = [
        "# A schema's validator, generated by gateweave.api.codecache (never edited: a changed",
        "# schema or generator is written to another file).",
        "import math as _gw_math",
        "from gateweave.api import cel as _gw_cel, celcode as _gw_celcode, codecache as "
        "_gw_codecache, patterns as _gw_patterns, schema as _gw_schema, schemacode as "
        "_gw_schemacode, schemastruct as _gw_schemastruct",
    ]
    bound: list[str] = []
    for name, value in namespace.items():
        expr, reads_schema = _recipe(value, keys.get(name), nodes)
        if reads_schema:
            bound.append(f"    {name} = {expr}")
        else:
            lines.append(f"{name} = {expr}")
    globals_line = f"    global {', '.join(b.split()[0] for b in bound)}" if bound else "    pass"
    lines += [*rules, "def bind(schema):", globals_line, *bound, source, f"KEY = {key!r}", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- reading and writing


def _load(path: Path, key: str, node: Schema) -> Forms | None:
    """The validator and defaults-only form of the module at ``path`` bound to ``node``; None
    when there is none, it is not trusted, does not load, or is another key's."""
    if not (_trusted(path.parent) and _trusted(path)):
        return None
    try:
        spec = importlib.util.spec_from_file_location(f"_gateweave_validator_{path.stem}", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if getattr(module, "KEY", None) != key:
            return None
        module.bind(node)
        forms: Forms = (module.ROOT, module.STORED)
    except Exception:  # a damaged file: generated again
        return None
    return forms


def _write(directory: Path, name: str, text: str) -> Path | None:
    """``text`` written to ``directory/name`` whole (never half a file under its name), and
    compiled."""
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        if not _trusted(directory):
            return None
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, directory / name)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return None
    # its bytecode too (the import reads it; it writes none under PYTHONDONTWRITEBYTECODE)
    py_compile.compile(str(directory / name), doraise=False, quiet=2)
    return directory / name


def _forms(node: Schema) -> Forms | None:
    """Imported when written before; else generated, written and imported; else (nowhere to
    write, or a value :func:`render` cannot write) compiled in memory."""
    try:
        k = key(node)
    except (TypeError, ValueError, OSError):  # not JSON, or the generator's files unreadable
        k = None
    places = directories() if k is not None else []
    for directory in places:
        forms = _load(directory / file_name(k or ""), k or "", node)
        if forms is not None:
            return forms
    try:
        source, namespace, names = schemacode.generate(node)
    except Exception:  # a schema schemacode cannot write: the schema walk does it all
        return None
    finally:
        cel.forget_trees()
    if k is not None and places:
        try:
            text = render(source, namespace, names, node, k)
        except _NotWritable:
            places = []
        for directory in places:
            path = _write(directory, file_name(k), text)
            forms = _load(path, k, node) if path is not None else None
            if forms is not None:
                return forms
    try:
        root = schemacode.run(source, namespace)
    except Exception:
        return None
    return root, namespace["STORED"]  # (the same module: run defined both)


_COMPILED: dict[int, tuple[Schema, Forms | None]] = {}


def _cached(node: Schema) -> Forms | None:
    entry = _COMPILED.get(id(node))
    if entry is None or entry[0] is not node:
        entry = (node, _forms(node))
        _COMPILED[id(node)] = entry
    return entry[1]


def validator(node: Schema) -> Validator | None:
    """The generated validator of a version's schema (imported, or generated, on first use),
    or None when it could not be generated."""
    forms = _cached(node)
    return None if forms is None else forms[0]


def defaulter(node: Schema) -> Validator | None:
    """The defaults-only form of :func:`validator` (``schemacode.generate``'s ``STORED``),
    for objects the API server stored; None when it could not be generated."""
    forms = _cached(node)
    return None if forms is None else forms[1]


def write_all() -> int:
    """Every served version's validator written (or found current): how many there are."""
    from gateweave.api.kinds import KINDS  # (kinds imports the decoding that imports this)

    count = 0
    for info in KINDS.values():
        if info.crd is not None:
            for root in exact.load_schemas(info.group, info.crd).values():
                count += validator(root) is not None
    return count
