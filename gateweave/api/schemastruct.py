"""A version's schema mirrored as msgspec Struct types: the structural checks done in C.

Checked node by node in the interpreter, the structure of a manifest (the type of each
field, the fields required, unknown and null ones, enums, lengths and bounds) was most of
the generated validator's time. The generated validator (:mod:`gateweave.api.schemacode`)
first converts the manifest to these types with ``msgspec.convert``, which makes those
checks in C, then does the rest in Python: defaults, patterns and formats, list keys,
CEL rules, the subtrees the schema walk decides. A manifest the types refuse is the
schema walk's, which says what is wrong (located, as before): the generated code only
ever answers for manifests the walk accepts, so the answer and every message stay the
same; only the time differs. Which checks the types make for the code is decided in
:mod:`gateweave.api.schemacode` (``_struct_*``). The converted instances are dropped at
once.

Fields are named by position (``f0``...) and renamed to their JSON names (which need not be
identifiers); an absent optional field is ``None``, which a present field never is (its
type does not admit null: a null is the schema walk's to decide).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateweave.api import schemacode

Schema = dict[str, Any]

# (what the generated code calls and catches, by this module's attributes)
convert = msgspec.convert
ValidationError = msgspec.ValidationError

_BASE: dict[str, Any] = {"string": str, "integer": int, "boolean": bool, "number": float}


class _Builder:
    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.count = 0

    def of(self, node: Any) -> Any:
        """The type a value checked against ``node`` is converted to."""
        if not schemacode._handled(node):
            return Any  # the walk decides it (the generated code refuses a null itself)
        t = node["type"]
        if t == "array":
            item = self.of(node["items"])
            return self._sized(list[item], node.get("minItems"), node.get("maxItems"))  # type: ignore[valid-type]
        if t == "object":
            return self.object(node, root=False)
        if schemacode._struct_enum(node):
            return Literal[tuple(node["enum"])]
        base = _BASE[t]
        if t == "string":
            return self._sized(base, node.get("minLength"), node.get("maxLength"))
        if schemacode._struct_bounds(node):
            meta: dict[str, Any] = {}
            for key, excl, strict, loose in (
                ("minimum", "exclusiveMinimum", "gt", "ge"),
                ("maximum", "exclusiveMaximum", "lt", "le"),
            ):
                if key in node:
                    meta[strict if node.get(excl) else loose] = node[key]
            return Annotated[base, msgspec.Meta(**meta)] if meta else base
        return base

    @staticmethod
    def _sized(base: Any, low: Any, high: Any) -> Any:
        meta: dict[str, Any] = {}
        if low is not None and int(low) > 0:
            meta["min_length"] = int(low)
        if high is not None:
            meta["max_length"] = int(high)
        return Annotated[base, msgspec.Meta(**meta)] if meta else base

    def object(self, node: Schema, *, root: bool) -> Any:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):  # a map
            value = self.of(extra)
            return self._sized(
                dict[str, value],  # type: ignore[valid-type]
                node.get("minProperties"),
                node.get("maxProperties"),
            )
        known = self.done.get(id(node))
        if known is not None:
            return known
        props: dict[str, Schema] = node.get("properties") or {}
        required = set(node.get("required") or ())
        fields: list[Any] = []
        for i, (key, sub) in enumerate(props.items()):
            if root and key in schemacode.exact._ROOT_KEEP:
                typ: Any = dict if sub.get("type") == "object" else str
            else:
                typ = self.of(sub)
            if key in required and not (isinstance(sub, dict) and "default" in sub):
                fields.append((f"f{i}", typ, msgspec.field(name=key)))
            else:
                fields.append((f"f{i}", typ, msgspec.field(default=None, name=key)))
        self.count += 1
        made = msgspec.defstruct(
            f"S{self.count}",
            fields,
            forbid_unknown_fields=True,
            kw_only=True,
            gc=False,
            module=__name__,
        )
        self.done[id(node)] = made
        return made


def root_type(node: Schema) -> Any:
    """The Struct type of a version's root node (:func:`schemacode.generate` vouches that
    the node is one it writes)."""
    return _Builder().object(node, root=True)
