"""Validation and defaulting of manifests as the Kubernetes API server does it.

Custom resources (the Gateway API kinds, Envoy Gateway's) are checked against their
published CRD schemas (generated into ``gateweave/api/schemas/<group>/<plural>.json`` by
``scripts/gen_schemas.py``), in the API server's order: nulls without a default dropped,
``default`` applied (recursively, also inside defaults and array items), unknown fields
pruned (or, with strict field validation, each reported: ``unknown field "spec.hostname"``);
then the OpenAPI value validations, list-type uniqueness, and every
``x-kubernetes-validations`` CEL rule (see :mod:`gateweave.api.cel`). Core kinds get a
light structural check (and, strictly, their top-level fields and ObjectMeta's are checked
by name).

Messages follow the API server: ``<field path>: <reason>[: detail]``; each is a
:class:`FieldError`, which also carries the field path, to locate it in the text.
"""

from __future__ import annotations

import datetime
import difflib
import ipaddress
import json
import math
from importlib import resources
from typing import Any

from gateweave.api import cel, codecache, patterns
from gateweave.api.kinds import KindInfo
from gateweave.api.limits import MAX_MESSAGE_CHARS, clip, quote

Schema = dict[str, Any]

_SCHEMAS: dict[tuple[str, str], dict[str, Schema]] = {}
_ROOT_KEEP = ("apiVersion", "kind", "metadata")

DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_LABEL_RE = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_DNS1123_LABEL_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS1123_SUBDOMAIN_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def load_schemas(group: str, plural: str) -> dict[str, Schema]:
    """The openAPIV3Schema of each served version of the custom resource ``plural`` of ``group``
    (cached).
    """
    schemas = _SCHEMAS.get((group, plural))
    if schemas is None:
        text = (
            resources.files("gateweave.api")
            .joinpath("schemas", group, f"{plural}.json")
            .read_text()
        )
        schemas = json.loads(text)
        _SCHEMAS[(group, plural)] = schemas
    return schemas


# ---------------------------------------------------------------- formatting


def _go(value: Any) -> str:
    """A value as the API server prints it in an error (a long string cut, see limits.quote)."""
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return quote(str(value))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class FieldError(str):
    """One error message, ``<field path>: <reason>``, that also knows its field path
    (``path``: ``spec.rules[0].matches[0].path.type``; "" for the object itself), so that
    it can be located at the line of that field."""

    path: str

    def __new__(cls, path: str, message: str) -> FieldError:
        self = super().__new__(cls, clip(message, MAX_MESSAGE_CHARS))
        self.path = path
        return self


def _err(path: str, reason: str) -> FieldError:
    return FieldError(path, f"{path}: {reason}")


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return _err(path, f"Invalid value: {_go(value)}: {detail}")


# ---------------------------------------------------------------- defaulting and pruning


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts and lists copied, every other value shared)."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def _unknown_field(path: str, key: Any, known: Any) -> FieldError:
    """As the API server's strict decoding says it, with the closest known field if any."""
    key = str(key)
    close = (
        difflib.get_close_matches(key, list(known or ()), n=1, cutoff=0.75)
        if len(key) < 256
        else []
    )
    hint = f" (did you mean {quote(close[0])}?)" if close else ""
    return FieldError(path, f"unknown field {quote(path, MAX_MESSAGE_CHARS // 4)}{hint}")


def _prepare(
    value: Any, schema: Schema | None, unknown: list[FieldError] | None = None, path: str = ""
) -> Any:
    """A copy of value with nulls dropped, defaults applied and unknown fields pruned;
    with ``unknown``, each pruned field is also reported there (``path``: where value is)."""
    if schema is None:
        return copy_json(value)
    if isinstance(value, dict):
        props: dict[str, Schema] | None = schema.get("properties")
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key) if props else None
            at = ""
            if unknown is not None:
                at = (
                    _child(path, key)
                    if sub is not None or not isinstance(extra, dict)
                    else f"{path}[{key}]"
                )
            if sub is None and isinstance(extra, dict):
                sub = extra
            if sub is None:
                if keep_unknown or extra is True:
                    out[key] = copy_json(item)
                elif unknown is not None:
                    unknown.append(_unknown_field(at, key, props))
                continue  # pruned
            if item is None and not sub.get("nullable"):
                if "default" in sub:
                    out[key] = _prepare(sub["default"], sub)
                continue  # a null without nullable is dropped
            out[key] = _prepare(item, sub, unknown, at)
        if props:
            for key, sub in props.items():
                if key not in out and "default" in sub and key not in value:
                    out[key] = _prepare(sub["default"], sub)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        sub_items = items if isinstance(items, dict) else None
        if unknown is None:
            return [_prepare(v, sub_items) for v in value]
        return [_prepare(v, sub_items, unknown, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


# ---------------------------------------------------------------- validation


def _is_rfc3339(text: str) -> bool:
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in text.upper() and len(text) >= 20


def _is_ipv4(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address) and "%" not in text
    except ValueError:
        return False


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


_MATCHED: dict[str, set[str]] = {}  # per pattern, short strings known to match it (bounded)


def _matches(pattern: str, text: str) -> bool:
    """Whether the RE2 ``pattern`` matches in ``text``; names, namespaces and hostnames
    repeat across objects, so the strings found to match are remembered."""
    passed = _MATCHED.get(pattern)
    if passed is not None and text in passed:
        return True
    if not cel.re2_search(pattern, text):
        return False
    if passed is None:
        if len(_MATCHED) >= 1024:
            _MATCHED.clear()
        passed = _MATCHED.setdefault(pattern, set())
    patterns.remember(passed, text)
    return True


_FORMATS: dict[str, Any] = {
    "date-time": _is_rfc3339,
    "datetime": _is_rfc3339,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "cidr": _is_cidr,
    "hostname": lambda s: len(s) <= 253 and _matches(_DNS1123_SUBDOMAIN_RE, s.lower()),
    "uuid": lambda s: _matches(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", s
    ),
    "byte": lambda s: _matches(
        r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$", s
    ),
    "date": lambda s: _matches(r"^\d{4}-\d{2}-\d{2}$", s),
    "duration": lambda s: _go_duration(s),
}


def _go_duration(text: str) -> bool:
    try:
        cel.parse_duration(text)
    except cel.CelError:
        return False
    return True


def _type_ok(value: Any, schema: Schema) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
    t = schema.get("type")
    if t is None:
        return True
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return True


def _list_key(item: Any, keys: list[str]) -> Any:
    if not isinstance(item, dict):
        return None
    return tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)


class _Validator:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.type_errors = (
            0  # values CEL cannot see as their schema says: rules above them are skipped
        )

    def node(self, value: Any, schema: Schema, path: str, cel_rules: bool = True) -> None:
        """Validate one value against one schema node; add every problem to self.errors."""
        errs = self.errors
        if value is None:
            if not schema.get("nullable"):
                t = schema.get("type", "object")
                errs.append(_invalid(path, value, f'{path} in body must be of type {t}: "null"'))
                self.type_errors += 1
            return
        if not _type_ok(value, schema):
            t = (
                "integer or string"
                if schema.get("x-kubernetes-int-or-string")
                else schema.get("type")
            )
            errs.append(
                _invalid(
                    path,
                    _json_type(value),
                    f'{path} in body must be of type {t}: "{_json_type(value)}"',
                )
            )
            self.type_errors += 1
            return
        type_errors_before = self.type_errors
        if "enum" in schema:
            enum = schema["enum"]
            if not any(cel.cel_eq(value, e) for e in enum):
                allowed = ", ".join(_go(e) for e in enum)
                errs.append(
                    _err(path, f"Unsupported value: {_go(value)}: supported values: {allowed}")
                )
        if isinstance(value, str):
            self.string(value, schema, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.number(value, schema, path)
        elif isinstance(value, list):
            self.array(value, schema, path, cel_rules)
        elif isinstance(value, dict):
            self.object(value, schema, path, cel_rules)
        for key in ("allOf", "anyOf", "oneOf", "not"):
            if key in schema:
                self.combinator(key, value, schema[key], path)
        if (
            cel_rules
            and "x-kubernetes-validations" in schema
            and self.type_errors == type_errors_before
        ):
            self.cel(value, schema, path)

    def string(self, value: str, schema: Schema, path: str) -> None:
        errs = self.errors
        n = len(value)
        if "maxLength" in schema and n > schema["maxLength"]:
            errs.append(_err(path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and n < schema["minLength"]:
            errs.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                )
            )
        pattern = schema.get("pattern")
        if pattern is not None:
            try:
                ok = _matches(pattern, value)
            except ValueError as exc:
                errs.append(_invalid(path, value, str(exc)))
            else:
                if not ok:
                    errs.append(_invalid(path, value, f"{path} in body should match '{pattern}'"))
        fmt = schema.get("format")
        check = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        if check is not None and not check(value):
            errs.append(
                _invalid(path, value, f"{path} in body must be of type {fmt}: {_go(value)}")
            )

    def number(self, value: float, schema: Schema, path: str) -> None:
        errs = self.errors
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            errs.append(_invalid(path, str(value), f"{path} in body must be a finite number"))
            return
        if "maximum" in schema:
            mx = schema["maximum"]
            if value > mx or (schema.get("exclusiveMaximum") and value == mx):
                rel = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
                errs.append(_invalid(path, value, f"{path} in body should be {rel} {mx}"))
        if "minimum" in schema:
            mn = schema["minimum"]
            if value < mn or (schema.get("exclusiveMinimum") and value == mn):
                rel = (
                    "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
                )
                errs.append(_invalid(path, value, f"{path} in body should be {rel} {mn}"))
        if "multipleOf" in schema and schema["multipleOf"] and value % schema["multipleOf"] != 0:
            errs.append(
                _invalid(
                    path, value, f"{path} in body should be a multiple of {schema['multipleOf']}"
                )
            )

    def array(self, value: list[Any], schema: Schema, path: str, cel_rules: bool) -> None:
        errs = self.errors
        n = len(value)
        if "maxItems" in schema and n > schema["maxItems"]:
            errs.append(_err(path, f"Too many: {n}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and n < schema["minItems"]:
            errs.append(
                _invalid(path, n, f"{path} in body should have at least {schema['minItems']} items")
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.node(item, items, f"{path}[{i}]", cel_rules)
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set" or schema.get("uniqueItems"):
            seen: set[str] = set()
            for i, item in enumerate(value):
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    errs.append(
                        _err(
                            f"{path}[{i}]",
                            "Duplicate value: "
                            f"{_go(item) if not isinstance(item, (dict, list)) else clip(key)}",
                        )
                    )
                seen.add(key)
        elif list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen_keys: set[Any] = set()
            for i, item in enumerate(value):
                k = _list_key(item, keys)
                if k is None:
                    continue
                if k in seen_keys:
                    shown = json.dumps({key: item.get(key) for key in keys}, sort_keys=True)
                    errs.append(_err(f"{path}[{i}]", f"Duplicate value: {clip(shown)}"))
                seen_keys.add(k)

    def object(self, value: dict[str, Any], schema: Schema, path: str, cel_rules: bool) -> None:
        errs = self.errors
        for req in schema.get("required", ()):
            if req not in value:
                errs.append(_err(_child(path, req), "Required value"))
        n = len(value)
        if "maxProperties" in schema and n > schema["maxProperties"]:
            errs.append(
                _err(path, f"Too many: {n}: must have at most {schema['maxProperties']} items")
            )
        if "minProperties" in schema and n < schema["minProperties"]:
            errs.append(
                _invalid(
                    path,
                    n,
                    f"{path} in body should have at least {schema['minProperties']} properties",
                )
            )
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key)
            if sub is not None:
                self.node(item, sub, _child(path, key), cel_rules)
            elif isinstance(extra, dict):
                self.node(item, extra, f"{path}[{key}]", cel_rules)

    def combinator(self, key: str, value: Any, sub: Any, path: str) -> None:
        """allOf/anyOf/oneOf/not: value validations only (structural schemas keep types out of
        them).
        """
        branches = [sub] if key == "not" else list(sub) if isinstance(sub, list) else []
        results: list[list[FieldError]] = []
        for branch in branches:
            if not isinstance(branch, dict):
                continue
            v = _Validator()
            v.node(value, branch, path, cel_rules=False)
            results.append(v.errors)
        passed = sum(1 for r in results if not r)
        if key == "allOf":
            for r in results:
                self.errors.extend(r)
        elif key == "anyOf" and passed == 0 and results:
            self.errors.append(
                _invalid(path, value, f"{path} in body must validate at least one schema (anyOf)")
            )
            self.errors.extend(results[0])
        elif key == "oneOf" and passed != 1 and results:
            self.errors.append(
                _invalid(
                    path, value, f"{path} in body must validate one and only one schema (oneOf)"
                )
            )
            if passed == 0:
                for r in results:
                    self.errors.extend(e for e in r if e not in self.errors)
        elif key == "not" and passed == 1:
            self.errors.append(
                _invalid(path, value, f"{path} in body must not validate the schema (not)")
            )

    def cel(self, value: Any, schema: Schema, path: str) -> None:
        for rule in schema["x-kubernetes-validations"]:
            if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
                continue
            try:
                program = cel.compile_rule(rule["rule"])
            except cel.CelCompileError as exc:
                self.errors.append(_invalid(path, value, f"compilation failed: {exc}"))
                continue
            if program.uses_old_self:
                continue  # transition rule: only evaluated on update
            shown = schema.get("type", "object")
            try:
                result = program.evaluate({"self": value})
            except cel.CelError as exc:
                # as the API server words it: "<error> evaluating rule: <message or rule>"
                what = str(rule.get("message") or rule["rule"]).strip()
                self.errors.append(_invalid(path, shown, f"{exc} evaluating rule: {what}"))
                continue
            if result is True:
                continue
            self.errors.append(self._rule_error(rule, value, shown, path))

    @staticmethod
    def _rule_error(rule: dict[str, Any], value: Any, shown: str, path: str) -> FieldError:
        message = rule.get("message") or f"failed rule: {rule['rule']}"
        expr = rule.get("messageExpression")
        if isinstance(expr, str):
            try:
                msg = cel.compile_rule(expr).evaluate({"self": value})
                if isinstance(msg, str) and msg.strip() and "\n" not in msg:
                    message = msg
            except (cel.CelError, cel.CelCompileError):
                pass
        field_path = rule.get("fieldPath")
        where = (
            path + field_path
            if isinstance(field_path, str) and field_path.startswith((".", "["))
            else path
        )
        reason = rule.get("reason") or "FieldValueInvalid"
        if reason == "FieldValueRequired":
            return _err(where, f"Required value: {message}")
        if reason == "FieldValueForbidden":
            return _err(where, f"Forbidden: {message}")
        if reason == "FieldValueDuplicate":
            return _err(where, f"Duplicate value: {message}")
        return _invalid(where, shown, message)


# ---------------------------------------------------------------- metadata and core kinds

# The fields of ObjectMeta, and the top-level fields of the core kinds gateweave reads
# (whose schemas gateweave does not carry: strict decoding checks them at the top level).
_OBJECT_META = frozenset(
    (
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    )
)
_CORE_FIELDS: dict[str, frozenset[str]] = {
    "Service": frozenset(("spec", "status")),
    "Namespace": frozenset(("spec", "status")),
    "Secret": frozenset(("data", "stringData", "type", "immutable")),
    "ConfigMap": frozenset(("data", "binaryData", "immutable")),
    "EndpointSlice": frozenset(("addressType", "endpoints", "ports")),
}


def _unknown_fields_without_schema(
    raw: dict[str, Any], info: KindInfo, errors: list[FieldError]
) -> None:
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        errors.extend(
            _unknown_field(f"metadata.{k}", k, _OBJECT_META) for k in meta if k not in _OBJECT_META
        )
    known = _CORE_FIELDS.get(info.kind)
    if info.crd is None and known is not None:
        fields = known | set(_ROOT_KEEP)
        errors.extend(_unknown_field(k, k, fields) for k in raw if k not in fields)


def _metadata(raw: dict[str, Any], info: KindInfo, errors: list[FieldError]) -> None:
    meta = raw.get("metadata")
    if meta is None:
        errors.append(_err("metadata.name", "Required value: name or generateName is required"))
        return
    if not isinstance(meta, dict):
        errors.append(
            _invalid(
                "metadata",
                _json_type(meta),
                'metadata in body must be of type object: "' + _json_type(meta) + '"',
            )
        )
        return
    name = meta.get("name")
    if name is None or name == "":
        errors.append(_err("metadata.name", "Required value: name or generateName is required"))
    elif not isinstance(name, str):
        errors.append(
            _invalid(
                "metadata.name",
                _json_type(name),
                'metadata.name in body must be of type string: "' + _json_type(name) + '"',
            )
        )
    elif info.kind == "Namespace":
        _dns_label("metadata.name", name, errors)
    elif info.kind == "Service":
        if len(name) > 63 or not _matches(_DNS1035_LABEL_RE, name):
            detail = "must be no more than 63 characters" if len(name) > 63 else DNS1035_LABEL_MSG
            errors.append(_invalid("metadata.name", name, detail))
    elif len(name) > 253 or not patterns.dns1123_subdomain(name):
        detail = "must be no more than 253 characters" if len(name) > 253 else DNS1123_SUBDOMAIN_MSG
        errors.append(_invalid("metadata.name", name, detail))
    ns = meta.get("namespace")
    if ns is not None and ns != "":
        if not isinstance(ns, str):
            errors.append(
                _invalid(
                    "metadata.namespace",
                    _json_type(ns),
                    'metadata.namespace in body must be of type string: "' + _json_type(ns) + '"',
                )
            )
        elif len(ns) > 63 or ns not in _MATCHED.get(_DNS1123_LABEL_RE, ()):
            _dns_label("metadata.namespace", ns, errors)  # (else: a namespace seen valid before)
    labels, annotations = meta.get("labels"), meta.get("annotations")
    if annotations is None and (labels is None or _is_string_map(labels)):
        return  # (the usual metadata: string labels, no annotations)
    for field in ("labels", "annotations"):
        m = meta.get(field)
        if m is not None and not _is_string_map(m):
            errors.append(
                _invalid(
                    f"metadata.{field}",
                    _json_type(m),
                    f"metadata.{field} must be a map of string to string",
                )
            )


_IS_STR = str.__instancecheck__  # (isinstance(v, str) in C: no generator per map)


def _is_string_map(m: Any) -> bool:
    return isinstance(m, dict) and all(map(_IS_STR, m.values()))


def _dns_label(path: str, value: str, errors: list[FieldError]) -> None:
    if len(value) > 63:
        errors.append(_invalid(path, value, "must be no more than 63 characters"))
    elif not _matches(_DNS1123_LABEL_RE, value):
        errors.append(_invalid(path, value, DNS1123_LABEL_MSG))


def _core(raw: dict[str, Any], info: KindInfo, errors: list[FieldError]) -> None:
    spec = raw.get("spec")
    if info.kind == "Service" and spec is not None:
        if not isinstance(spec, dict):
            errors.append(
                _invalid(
                    "spec",
                    _json_type(spec),
                    'spec in body must be of type object: "' + _json_type(spec) + '"',
                )
            )
            return
        ports = spec.get("ports")
        if ports is None:
            return
        if not isinstance(ports, list):
            errors.append(
                _invalid(
                    "spec.ports",
                    _json_type(ports),
                    'spec.ports in body must be of type array: "' + _json_type(ports) + '"',
                )
            )
            return
        for i, port in enumerate(ports):
            p = f"spec.ports[{i}]"
            if not isinstance(port, dict):
                errors.append(
                    _invalid(
                        p,
                        _json_type(port),
                        f'{p} in body must be of type object: "{_json_type(port)}"',
                    )
                )
                continue
            num = port.get("port")
            if num is None:
                errors.append(_err(f"{p}.port", "Required value"))
            elif isinstance(num, bool) or not isinstance(num, int):
                errors.append(
                    _invalid(
                        f"{p}.port",
                        _json_type(num),
                        f'{p}.port in body must be of type integer: "{_json_type(num)}"',
                    )
                )
            elif not 1 <= num <= 65535:
                errors.append(_invalid(f"{p}.port", num, "must be between 1 and 65535, inclusive"))
    elif info.kind == "EndpointSlice":
        at = raw.get("addressType")
        if at is None:
            errors.append(_err("addressType", "Required value"))
        elif at not in ("IPv4", "IPv6", "FQDN"):
            errors.append(
                _err(
                    "addressType",
                    f'Unsupported value: {_go(at)}: supported values: "FQDN", "IPv4", "IPv6"',
                )
            )


# ---------------------------------------------------------------- entry points


def validate_value(value: Any, schema: Schema, path: str = "") -> tuple[Any, list[FieldError]]:
    """Default, prune and validate one value against one (structural) schema node."""
    out = _prepare(value, schema)
    validator = _Validator()
    validator.node(out, schema, path)
    return out, validator.errors


def validate(
    raw: dict[str, Any], info: KindInfo, *, strict: bool = False, owned: bool = False
) -> tuple[dict[str, Any], list[FieldError]]:
    """Return (defaulted copy of raw, errors). An empty error list means the API server accepts it.

    Unknown fields are pruned; ``strict`` also reports each one (``unknown field
    "spec.hostname"``), as the API server's strict field validation (``kubectl apply``'s
    default) refuses them. Never raises: any unexpected shape of ``raw`` becomes an error.
    ``owned``: the caller hands ``raw`` over (it is not used again but through the result),
    so it may be defaulted in place and be part of the result instead of copied.
    """
    try:
        return _validate(raw, info, strict, owned)
    except RecursionError:
        return raw, [
            _invalid("<root>", "object", "object is nested too deeply (or refers to itself)")
        ]
    except Exception as exc:  # defensive: validation must never take the process down
        return raw, [
            _err(
                "<root>",
                f"Internal error: validation failed: {type(exc).__name__}: {clip(str(exc))}",
            )
        ]


def default(raw: dict[str, Any], info: KindInfo, *, owned: bool = False) -> dict[str, Any]:
    """``raw`` defaulted and pruned as the CRD schema of its version says, never refused:
    for objects the API server already accepted (validated against the schema of the
    version they were written in, which may differ from the one they are read in).
    So nothing the API server checks on write is checked again: the schema's generated
    defaults-only form (:mod:`gateweave.api.schemacode`'s ``STORED``: the structure and the
    defaults, no pattern, format, bound or CEL rule), and the walk's defaulting for an
    object whose structure that form cannot vouch for. ``owned``: as for :func:`validate`."""
    fast = _compiled(raw, info, owned, stored=True)
    if fast is not None:
        return fast
    try:
        result, _ = _defaulted(raw, info, None)
    except RecursionError:
        return raw
    return result


def _root(raw: dict[str, Any], info: KindInfo) -> Schema | None:
    """The schema of the version ``raw`` is written in (None: no
    schema, or not a version served).
    """
    if info.crd is None:
        return None
    version = str(raw.get("apiVersion", "")).rpartition("/")[2]
    return load_schemas(info.group, info.crd).get(version)


_GENERATED: dict[
    tuple[str, str, bool], Any
] = {}  # (kind, apiVersion, stored) -> the schema's generated validator or defaults-only form
_UNKNOWN = object()


def _compiled(
    raw: dict[str, Any], info: KindInfo, owned: bool, *, stored: bool = False
) -> dict[str, Any] | None:
    """What :func:`_defaulted` makes of a ``raw`` that its schema accepts (``stored``: of a
    ``raw`` whose structure is the schema's), by the schema's generated code
    (:mod:`gateweave.api.schemacode`, as :mod:`gateweave.api.codecache` delivers it); None when
    that code cannot vouch for ``raw`` (invalid, or a shape it leaves to this module's walk).
    The code defaults in place: ``raw`` itself when ``owned``, else a copy."""
    api_version = raw.get("apiVersion") if isinstance(raw, dict) else None
    if not isinstance(api_version, str):
        return None
    key = (info.kind, api_version, stored)
    fn = _GENERATED.get(key, _UNKNOWN)
    if fn is _UNKNOWN:
        root = _root(raw, info)
        form = codecache.defaulter if stored else codecache.validator
        fn = form(root) if root is not None else None
        if len(_GENERATED) < 1024:  # apiVersions come from input: a bounded memo
            _GENERATED[key] = fn
    if fn is None:
        return None
    try:
        return fn(raw if owned else copy_json(raw))
    except Exception:
        return None


def _defaulted(
    raw: dict[str, Any], info: KindInfo, unknown: list[FieldError] | None
) -> tuple[dict[str, Any], Schema | None]:
    """(raw defaulted and pruned, the schema of its version); (raw, None) without a schema."""
    if info.crd is None or not isinstance(raw, dict):
        return raw, None
    root = _root(raw, info)
    if root is None:
        return raw, None
    body = {k: v for k, v in raw.items() if k not in _ROOT_KEEP}
    # metadata is ObjectMeta, checked by _metadata: it is kept as is, not pruned by the CRD schema
    result: dict[str, Any] = {k: copy_json(raw[k]) for k in _ROOT_KEEP if k in raw}
    result.update(_prepare(body, root, unknown))
    if not isinstance(result.get("metadata", {}), dict):
        del result["metadata"]  # reported by _metadata
    return result, root


def _validate(
    raw: dict[str, Any], info: KindInfo, strict: bool, owned: bool
) -> tuple[dict[str, Any], list[FieldError]]:
    errors: list[FieldError] = []
    if not isinstance(raw, dict):
        return raw, [_invalid("<root>", _json_type(raw), "object must be a map")]
    if strict:
        _unknown_fields_without_schema(raw, info, errors)
    _metadata(raw, info, errors)
    if info.crd is None:
        _core(raw, info, errors)
        return raw, errors
    if not errors:
        fast = _compiled(raw, info, owned)
        if fast is not None:
            return fast, errors
    result, root = _defaulted(raw, info, errors if strict else None)
    if root is None:
        version = str(raw.get("apiVersion", "")).rpartition("/")[2]
        errors.append(
            _invalid("apiVersion", raw.get("apiVersion"), f"version {quote(version)} is not served")
        )
        return raw, errors
    validator = _Validator()
    validator.node(result, root, "")
    errors.extend(validator.errors)
    return result, errors
