"""Defaulting and validation of manifests from the upstream CRD schemas and CEL rules."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from hypothesis import given, settings
from hypothesis import strategies as st

from gateweave.api import cel, schema
from gateweave.api.decode import decode, kind_info
from gateweave.api.kinds import KINDS
from tests.support.data import CRDS, EG_CRDS, MANIFESTS, OWN_CRDS, ROOT, yaml_files

G = "gateway.networking.k8s.io/v1"


def substitute(text: str) -> str:
    return (
        text.replace("{GATEWAY_CLASS_NAME}", "gateweave")
        .replace("{GATEWAY_CONTROLLER_NAME}", "gateweave.io/gateway-controller")
        .replace("PLACEHOLDER_UNUSABLE_ADDRS", "192.0.2.1")
        .replace("PLACEHOLDER_USABLE_ADDRS", "127.10.0.9")
    )


def conformance_objects(subst: bool = True) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in yaml_files(MANIFESTS, "**/*.yaml"):
        text = path.read_text()
        for doc in yaml.safe_load_all(substitute(text) if subst else text):
            if kind_info(doc) is not None:
                out.append((path.name, doc))
    return out


def check(raw: dict[str, Any]) -> tuple[dict[str, Any], list[schema.FieldError]]:
    info = kind_info(raw)
    assert info is not None
    return schema.validate(raw, info)


def gateway(*listeners: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": G,
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"},
        "spec": {"gatewayClassName": "gateweave", "listeners": list(listeners), **spec},
    }


def route(*rules: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": G,
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            **({"rules": list(rules)} if rules else {}),
            **spec,
        },
    }


HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}


# ---------------------------------------------------------------- generated data


def test_generated_schemas_are_up_to_date_and_without_descriptions(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_schemas", ROOT / "scripts" / "gen_schemas.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    written = []
    for crd_dir, group in (
        (CRDS, "gateway.networking.k8s.io"),
        (EG_CRDS, "gateway.envoyproxy.io"),
        (OWN_CRDS, "gateweave.io"),
    ):
        written += gen.generate(crd_dir, group, tmp_path)
    shipped = ROOT / "gateweave" / "api" / "schemas"
    rel = sorted(str(p.relative_to(tmp_path)) for p in written)
    assert rel == sorted(str(p.relative_to(shipped)) for p in shipped.glob("*/*.json"))
    for p in written:
        assert p.read_bytes() == (shipped / p.relative_to(tmp_path)).read_bytes(), p.name
    # the Envoy Gateway schemas ship with Envoy Gateway's licence
    assert (shipped / "gateway.envoyproxy.io" / "LICENSE").read_bytes() == (
        EG_CRDS.parent / "LICENSE"
    ).read_bytes()
    for info in KINDS.values():
        if info.crd:
            schemas = schema.load_schemas(info.group, info.crd)
            assert set(info.versions) <= set(schemas), info.kind

    def no_descriptions(node: Any) -> None:
        if isinstance(node, dict):
            assert "description" not in node or not isinstance(node["description"], str)
            for k, v in node.items():
                if k == "properties":
                    for sub in v.values():
                        no_descriptions(sub)
                elif k in ("items", "additionalProperties", "not"):
                    no_descriptions(v)
                elif k in ("anyOf", "oneOf", "allOf"):
                    for sub in v:
                        no_descriptions(sub)

    gc = schema.load_schemas("gateway.networking.k8s.io", "gatewayclasses")["v1"]
    no_descriptions(gc)
    # a *property* named description (GatewayClass spec.description) is kept
    assert gc["properties"]["spec"]["properties"]["description"]["type"] == "string"


# ---------------------------------------------------------------- defaults


def test_httproute_defaults() -> None:
    raw = route({"backendRefs": [{"name": "svc", "port": 8080}]})
    before = copy.deepcopy(raw)
    out, errors = check(raw)
    assert errors == []
    assert raw == before  # input untouched
    rule = out["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {"name": "svc", "port": 8080, "group": "", "kind": "Service", "weight": 1}
    ]
    assert out["spec"]["parentRefs"] == [
        {"name": "gw", "group": "gateway.networking.k8s.io", "kind": "Gateway"}
    ]


def test_httproute_without_rules_gets_default_rule_and_nested_defaults() -> None:
    raw = route()
    out, errors = check(raw)
    assert errors == []
    assert out["spec"]["rules"] == [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]
    # defaults inside array items and inside a defaulted object
    raw = route({"matches": [{"headers": [{"name": "x", "value": "y"}], "path": {"value": "/a"}}]})
    out, errors = check(raw)
    assert errors == []
    match = out["spec"]["rules"][0]["matches"][0]
    assert match["headers"] == [{"name": "x", "value": "y", "type": "Exact"}]
    assert match["path"] == {"type": "PathPrefix", "value": "/a"}


def test_redirect_and_listener_defaults() -> None:
    raw = route({"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]})
    out, errors = check(raw)
    assert errors == []
    assert out["spec"]["rules"][0]["filters"][0]["requestRedirect"]["statusCode"] == 302
    out, errors = check(gateway(dict(HTTP)))
    assert errors == []
    assert out["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "Same"}}


def test_null_without_nullable_takes_the_default_or_is_dropped() -> None:
    raw = route(
        {
            "matches": None,
            "backendRefs": [{"name": "svc", "port": 80, "weight": None, "namespace": None}],
        }
    )
    out, errors = check(raw)
    assert errors == []
    rule = out["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"][0]["weight"] == 1
    assert "namespace" not in rule["backendRefs"][0]


def test_decode_returns_typed_model_with_defaults() -> None:
    decoded, errors = decode(route({"backendRefs": [{"name": "svc", "port": 8080}]}), "f.yaml:1")
    assert errors == []
    assert decoded is not None
    text = json.dumps([decoded.raw, __import__("msgspec").to_builtins(decoded.model)])
    assert '"weight": 1' in text and '"PathPrefix"' in text


def test_unknown_fields_are_pruned() -> None:
    raw = gateway({**HTTP, "bogus": 1}, extra={"a": 1})
    raw["status"] = {"unknown": True}
    raw["metadata"]["labels"] = {"a": "b"}
    out, errors = check(raw)
    assert errors == []
    assert "extra" not in out["spec"]
    assert "bogus" not in out["spec"]["listeners"][0]
    assert "unknown" not in out["status"]
    assert out["metadata"] == {"name": "gw", "namespace": "ns", "labels": {"a": "b"}}
    assert out["apiVersion"] == G and out["kind"] == "Gateway"


# ---------------------------------------------------------------- the conformance manifests


def test_every_conformance_object_is_accepted() -> None:
    objs = conformance_objects()
    gw_api = [(f, d) for f, d in objs if KINDS[d["kind"]].crd]
    assert len(gw_api) > 300
    failures = []
    for name, doc in objs:
        _, errors = check(doc)
        if errors:
            failures.append((name, doc["kind"], doc["metadata"].get("name"), errors))
    assert failures == []


def test_unsubstituted_address_placeholders_are_rejected_like_the_api_server() -> None:
    # spec.addresses[].type defaults to IPAddress, whose value must be an IPv4 or IPv6 address
    # (oneOf)
    docs = [d for f, d in conformance_objects(subst=False) if f == "gateway-static-addresses.yaml"]
    assert len(docs) == 1
    doc = json.loads(json.dumps(docs[0]).replace("{GATEWAY_CLASS_NAME}", "gateweave"))
    _, errors = check(doc)
    assert any(e.startswith("spec.addresses[1]: ") and "oneOf" in e for e in errors)
    assert any(e.startswith("spec.addresses[2].value: ") and "ipv4" in e for e in errors)
    assert not any(e.startswith("spec.addresses[0]") for e in errors)  # a domain-prefixed type


def test_cel_agrees_with_celpy_on_the_conformance_manifests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every (rule, self) evaluated on the conformance set gives the result celpy's interpreter
    gives.

    Pairs where celpy fails (it lacks the Kubernetes extensions such as split(), and its
    exists_one() does not absorb errors in && as CEL requires) are skipped.
    """
    seen: dict[tuple[str, str], tuple[Any, Any]] = {}
    original = cel.Program.evaluate

    def recording(self: cel.Program, variables: dict[str, Any]) -> Any:
        result = original(self, variables)
        seen[(self.source, json.dumps(variables["self"], sort_keys=True))] = (
            variables["self"],
            result,
        )
        return result

    monkeypatch.setattr(cel.Program, "evaluate", recording)
    monkeypatch.setattr(schema, "_compiled", lambda *args: None)  # every rule by the closures
    for _, doc in conformance_objects():
        check(doc)
    monkeypatch.undo()
    assert len({src for src, _ in seen}) > 50

    def is_ip(s: Any) -> celtypes.BoolType:
        return celtypes.BoolType(cel._is_ip(str(s)))

    env = celpy.Environment()
    programs: dict[str, Any] = {}
    compared = 0
    per_rule: dict[str, int] = {}
    for (src, _), (value, ours) in seen.items():
        per_rule[src] = per_rule.get(src, 0) + 1
        if per_rule[src] > 12:  # celpy's interpreter is slow: a sample of values per rule
            continue
        if src not in programs:
            programs[src] = env.program(env.compile(src), functions={"isIP": is_ip})
        try:
            theirs = programs[src].evaluate({"self": celpy.json_to_cel(value)})
        except Exception:
            continue
        if not isinstance(theirs, celtypes.BoolType):
            continue
        compared += 1
        assert bool(theirs) is ours, (src, value)
    assert compared > 0.9 * sum(min(n, 12) for n in per_rule.values())


# ---------------------------------------------------------------- invalid objects


def test_port_out_of_range() -> None:
    _, errors = check(gateway({**HTTP, "port": 70000}))
    assert errors == [
        "spec.listeners[0].port: Invalid value: 70000: spec.listeners[0].port in body should be "
        "less than or equal to 65535"
    ]


def test_bad_hostname_pattern() -> None:
    _, errors = check(gateway({**HTTP, "hostname": "Bad_Host"}))
    assert len(errors) == 1
    assert errors[0].startswith(
        'spec.listeners[0].hostname: Invalid value: "Bad_Host": spec.listeners[0].hostname in body '
        "should match"
    )


def test_path_must_start_with_slash() -> None:
    _, errors = check(route({"matches": [{"path": {"type": "PathPrefix", "value": "foo"}}]}))
    assert errors == [
        'spec.rules[0].matches[0].path: Invalid value: "object": '
        "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"
    ]
    _, errors = check(
        route({"matches": [{"path": {"type": "RegularExpression", "value": "foo.*"}}]})
    )
    assert errors == []


def test_listener_tls_rules() -> None:
    _, errors = check(gateway({"name": "tls", "port": 443, "protocol": "TLS"}))
    assert errors == [
        'spec.listeners: Invalid value: "array": tls mode must be set for protocol TLS'
    ]
    _, errors = check(
        gateway({**HTTP, "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]}})
    )
    assert errors == [
        'spec.listeners: Invalid value: "array": tls must not be specified for protocols '
        "['HTTP', 'TCP', 'UDP']"
    ]
    _, errors = check(
        gateway({"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"mode": "Terminate"}})
    )
    # the rule reads self.options without has(): the API server fails the evaluation (no such key)
    assert errors == [
        'spec.listeners[0].tls: Invalid value: "object": no such key: certificateRefs evaluating '
        "rule: "
        "certificateRefs or options must be specified when mode is Terminate"
    ]
    tls = {"mode": "Terminate", "certificateRefs": [], "options": {}}
    _, errors = check(gateway({"name": "https", "port": 443, "protocol": "HTTPS", "tls": tls}))
    assert errors == [
        'spec.listeners[0].tls: Invalid value: "object": certificateRefs or options must be '
        "specified when mode is Terminate"
    ]
    # HTTPS without tls is not rejected by the CRD (the controller reports it in status)
    _, errors = check(gateway({"name": "https", "port": 443, "protocol": "HTTPS"}))
    assert errors == []


def test_duplicate_listener_names() -> None:
    _, errors = check(gateway(dict(HTTP), {**HTTP, "port": 8080}))
    assert 'spec.listeners[1]: Duplicate value: {"name": "http"}' in errors
    assert (
        'spec.listeners: Invalid value: "array": Listener name must be unique within the Gateway'
        in errors
    )
    assert len(errors) == 2


def test_duplicate_port_protocol_hostname() -> None:
    _, errors = check(gateway(dict(HTTP), {**HTTP, "name": "other"}))
    assert errors == [
        'spec.listeners: Invalid value: "array": Combination of port, protocol and hostname must '
        "be unique for each listener"
    ]


def test_replace_prefix_match_needs_a_path_prefix_match() -> None:
    redirect = {
        "type": "RequestRedirect",
        "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}},
    }
    _, errors = check(
        route({"matches": [{"path": {"type": "Exact", "value": "/old"}}], "filters": [redirect]})
    )
    assert errors == [
        'spec.rules[0]: Invalid value: "object": When using RequestRedirect filter with '
        "path.replacePrefixMatch, "
        "exactly one PathPrefix match must be specified"
    ]
    _, errors = check(
        route(
            {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}], "filters": [redirect]}
        )
    )
    assert errors == []


def test_filter_union_and_enum() -> None:
    _, errors = check(route({"filters": [{"type": "RequestRedirect"}]}))
    assert errors == [
        'spec.rules[0].filters[0]: Invalid value: "object": filter.requestRedirect must be '
        "specified for RequestRedirect filter.type"
    ]
    _, errors = check(route({"filters": [{"type": "Teleport"}]}))
    assert len(errors) == 1
    assert errors[0].startswith(
        'spec.rules[0].filters[0].type: Unsupported value: "Teleport": supported values: '
        '"RequestHeaderModifier"'
    )


def test_timeouts_use_duration() -> None:
    _, errors = check(route({"timeouts": {"request": "1s", "backendRequest": "2s"}}))
    assert errors == [
        'spec.rules[0].timeouts: Invalid value: "object": backendRequest timeout cannot be longer '
        "than request timeout"
    ]
    _, errors = check(route({"timeouts": {"request": "2s", "backendRequest": "1500ms"}}))
    assert errors == []


def test_parent_refs_use_escaped_namespace() -> None:
    raw = route()
    raw["spec"]["parentRefs"] = [{"name": "gw", "namespace": "a"}, {"name": "gw", "namespace": "b"}]
    assert check(raw)[1] == []
    raw["spec"]["parentRefs"] = [{"name": "gw", "namespace": "a"}, {"name": "gw", "namespace": "a"}]
    errors = check(raw)[1]
    assert any("sectionName or port must be unique" in e for e in errors)


def test_wrong_types_become_errors() -> None:
    _, errors = check(gateway({**HTTP, "port": "80"}))
    assert errors == [
        'spec.listeners[0].port: Invalid value: "string": spec.listeners[0].port in body must be '
        'of type integer: "string"'
    ]
    raw = gateway()
    raw["spec"]["listeners"] = {"name": "x"}
    _, errors = check(raw)
    assert errors == [
        'spec.listeners: Invalid value: "object": spec.listeners in body must be of type array: '
        '"object"'
    ]
    _, errors = check(route({"matches": [{"path": {"type": "PathPrefix", "value": 5}}]}))
    assert errors == [
        'spec.rules[0].matches[0].path.value: Invalid value: "integer": '
        'spec.rules[0].matches[0].path.value in body must be of type string: "integer"'
    ]
    _, errors = check(gateway({**HTTP, "port": True}))
    assert "must be of type integer" in errors[0]


def test_required_and_limits() -> None:
    raw = gateway()
    del raw["spec"]["gatewayClassName"]
    _, errors = check(raw)
    assert "spec.gatewayClassName: Required value" in errors
    listeners = [{"name": f"l{i}", "port": 1000 + i, "protocol": "HTTP"} for i in range(65)]
    _, errors = check(gateway(*listeners))
    assert "spec.listeners: Too many: 65: must have at most 64 items" in errors
    _, errors = check(route(hostnames=["a" * 254 + ".com"]))
    assert any(
        e.startswith("spec.hostnames[0]: Too long: may not be more than 253") for e in errors
    )


def test_metadata() -> None:
    raw = gateway(dict(HTTP))
    raw["metadata"] = {"namespace": "ns"}
    assert check(raw)[1] == ["metadata.name: Required value: name or generateName is required"]
    raw["metadata"] = {"name": "Bad_Name", "namespace": "Bad.NS"}
    errors = check(raw)[1]
    assert errors[0].startswith(
        'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'
    )
    assert errors[1].startswith(
        'metadata.namespace: Invalid value: "Bad.NS": a lowercase RFC 1123 label'
    )
    raw["metadata"] = {"name": "a.b-c", "namespace": "ns"}
    assert check(raw)[1] == []
    raw["metadata"] = {"name": "a", "labels": {"app": "x"}, "annotations": {}}
    assert check(raw)[1] == []
    for field, value in (("labels", {"app": "x", "n": 1}), ("annotations", ["x"])):
        raw["metadata"] = {"name": "a", field: value}
        errors = check(raw)[1]
        assert len(errors) == 1 and errors[0].startswith(f"metadata.{field}: Invalid value: ")
        assert errors[0].endswith(f"metadata.{field} must be a map of string to string")


def test_the_usual_metadata_passes_as_the_full_checks_say() -> None:
    """Metadata with string labels and no annotations, and a namespace seen valid before,
    are passed without the full checks; each near miss still gets its message."""
    raw = gateway(dict(HTTP))
    long_ns = "n" * 64  # (a label by its pattern, but too long)
    assert schema._matches(schema._DNS1123_LABEL_RE, long_ns)  # (now remembered as matching)
    for meta, wanted in (
        ({"name": "a", "namespace": "ns"}, []),
        ({"name": "a", "namespace": "ns", "labels": {"a": "b"}}, []),
        ({"name": "a", "namespace": long_ns}, ["metadata.namespace"]),
        ({"name": "a", "labels": {"a": 1}}, ["metadata.labels"]),
        ({"name": "a", "labels": {"a": "b"}, "annotations": {"x": "y"}}, []),
        ({"name": "a", "labels": {"a": "b"}, "annotations": {"x": 1}}, ["metadata.annotations"]),
        (
            {"name": "a", "labels": [], "annotations": "x"},
            ["metadata.labels", "metadata.annotations"],
        ),
        ({"name": "a", "annotations": None, "labels": None}, []),
    ):
        raw["metadata"] = meta
        errors = check(raw)[1]
        assert [e.path for e in errors] == wanted, meta
    raw["metadata"] = {"name": "a", "namespace": long_ns}
    assert check(raw)[1] == [
        f'metadata.namespace: Invalid value: "{long_ns}": must be no more than 63 characters'
    ]


def test_a_model_carries_the_storage_version_and_its_raw_the_one_written() -> None:
    """The model is converted from the stored form (copied only where they differ: another
    version, a status the model leaves out), which is left as it was written."""
    for owned in (False, True):
        written = route()
        written["apiVersion"] = "gateway.networking.k8s.io/v1beta1"
        written["status"] = {"parents": []}
        before = copy.deepcopy(written)
        decoded, errors = decode(written, owned=owned)
        assert errors == [] and decoded is not None
        assert decoded.raw["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
        assert decoded.raw["status"] == {"parents": []}
        assert decoded.model.api_version == G and decoded.model.kind == "HTTPRoute"
        assert "status" not in decoded.model.__struct_fields__
        if not owned:
            assert written == before
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
    }
    decoded, errors = decode(copy.deepcopy(service), owned=True)
    assert errors == [] and decoded is not None
    assert decoded.model.status.load_balancer.ingress[0].ip == "192.0.2.1"
    assert decoded.raw["status"] == service["status"]
    for info in KINDS.values():  # (the per-kind fact the decoding reads, against the model)
        assert info.status_in_model is ("status" in info.model.__struct_fields__)
    assert [k for k, i in KINDS.items() if i.status_in_model] == ["Service"]


def test_kind_info_reads_only_an_apiversion_and_kind_of_strings() -> None:
    assert kind_info({"apiVersion": G, "kind": "HTTPRoute"}) is KINDS["HTTPRoute"]
    for api_version, kind in (
        ([G], "HTTPRoute"),  # (unhashable: no lookup raises)
        (G, {"k": "HTTPRoute"}),
        (1, "HTTPRoute"),
        (G, None),
        (None, None),
    ):
        assert kind_info({"apiVersion": api_version, "kind": kind}) is None
    assert kind_info([G, "HTTPRoute"]) is None and kind_info("x") is None


def test_core_kinds() -> None:
    svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}]},
    }
    assert check(svc)[1] == []
    svc["spec"]["ports"] = [{"port": 0}, {"port": "http"}, {}]
    assert check(svc)[1] == [
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        'spec.ports[1].port: Invalid value: "string": spec.ports[1].port in body must be of type '
        'integer: "string"',
        "spec.ports[2].port: Required value",
    ]
    eps = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "e"},
        "addressType": "IPv5",
    }
    assert check(eps)[1] == [
        'addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"'
    ]
    assert check({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})[1] == [
        "metadata.name: Required value: name or generateName is required"
    ]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


BASE = route(
    {
        "matches": [
            {"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "a", "value": "b"}]}
        ],
        "filters": [
            {
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {"set": [{"name": "x", "value": "y"}]},
            }
        ],
        "backendRefs": [{"name": "svc", "port": 80}],
    }
)


@settings(max_examples=150, deadline=None)
@given(st.data(), json_values)
def test_never_raises_on_wrong_types(data: st.DataObject, junk: Any) -> None:
    raw = copy.deepcopy(BASE)
    path = data.draw(
        st.sampled_from([p for p in _paths(raw) if p and p[0] in ("spec", "metadata")])
    )
    node: Any = raw
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = junk
    _, errors = check(raw)
    assert isinstance(errors, list) and all(isinstance(e, str) for e in errors)
    assert not any("Internal error" in e for e in errors), errors  # the catch-all was not needed


def test_self_referencing_yaml_is_an_error_not_a_crash() -> None:
    raw = yaml.safe_load("a: &x [*x]")
    doc = route()
    doc["spec"]["hostnames"] = raw["a"]
    _, errors = check(doc)
    assert errors and "nested too deeply" in errors[0]


# ---------------------------------------------------------------- schema features on small schemas


def test_schema_features() -> None:
    s = {
        "type": "object",
        "maxProperties": 3,
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "maybe": {"type": "string", "nullable": True},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "when": {"type": "string", "format": "date-time"},
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 3},
            },
        },
    }
    out, errors = schema.validate_value({"port": "http", "maybe": None, "free": {"x": {"y": 1}}}, s)
    assert errors == [] and out == {"port": "http", "maybe": None, "free": {"x": {"y": 1}}}
    assert schema.validate_value({"port": 8080}, s)[1] == []
    assert schema.validate_value({"port": 1.5}, s)[1] == [
        'port: Invalid value: "number": port in body must be of type integer or string: "number"'
    ]
    assert schema.validate_value({"tags": ["a", "b", "a"]}, s)[1] == [
        'tags[2]: Duplicate value: "a"'
    ]
    assert schema.validate_value({"when": "yesterday"}, s)[1] == [
        'when: Invalid value: "yesterday": when in body must be of type date-time: "yesterday"'
    ]
    assert schema.validate_value({"when": "2024-01-02T03:04:05Z"}, s)[1] == []
    assert schema.validate_value({"labels": {"k": "long"}}, s)[1] == [
        "labels[k]: Too long: may not be more than 3 bytes"
    ]
    assert schema.validate_value(
        {"port": 1, "maybe": "x", "tags": [], "when": "2024-01-02T03:04:05Z"}, s
    )[1] == [": Too many: 4: must have at most 3 items"]


def test_cel_rule_options() -> None:
    s = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "name": {"type": "string"},
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.a < self.b",
                "messageExpression": "'a (' + string(self.a) + ') must be below b'",
                "fieldPath": ".a",
            },
            {
                "rule": "has(self.name)",
                "message": "name is needed",
                "reason": "FieldValueRequired",
                "fieldPath": ".name",
            },
            {"rule": "self.a == oldSelf.a", "message": "immutable"},
            {"rule": "self.b != 7", "message": "no sevens", "reason": "FieldValueForbidden"},
        ],
    }
    _, errors = schema.validate_value({"a": 9, "b": 7}, s, "spec")
    assert errors == [
        'spec.a: Invalid value: "object": a (9) must be below b',
        "spec.name: Required value: name is needed",
        "spec: Forbidden: no sevens",
    ]
    assert schema.validate_value({"a": 1, "b": 2, "name": "x"}, s)[1] == []
    bad = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.missing == 1", "message": "m"}],
    }
    errors = schema.validate_value({}, bad, "spec")[1]
    assert errors == ['spec: Invalid value: "object": no such key: missing evaluating rule: m']


# ---------------------------------------------------------------- CEL library


@pytest.mark.parametrize(
    ("expr", "value", "expected"),
    [
        ("isIP(self)", "10.0.0.1", True),
        ("isIP(self)", "::1", True),
        ("isIP(self)", "010.0.0.1", False),
        ("isIP(self)", "example.com", False),
        ("ip(self).family()", "fd00::1", 6),
        ("ip(self).isLoopback()", "127.0.0.1", True),
        ("isCIDR(self)", "10.0.0.0/8", True),
        ("cidr(self).containsIP('10.1.2.3')", "10.0.0.0/8", True),
        ("cidr(self).prefixLength()", "10.0.0.0/8", 8),
        (
            "isURL(self) && url(self).getHost() == 'example.com:8080'",
            "https://example.com:8080/x",
            True,
        ),
        ("url(self).getScheme()", "https://example.com/x", "https"),
        ("self.split('/')[0].size() < 253", "a.b/c", True),
        ("self.split('.')", "a.b.c", ["a", "b", "c"]),
        ("self.lowerAscii()", "AbC", "abc"),
        ("self.upperAscii()", "abc", "ABC"),
        ("self.indexOf('b')", "abc", 1),
        ("self.lastIndexOf('b')", "abcb", 3),
        ("self.substring(2)", "*.example.com", "example.com"),
        ("self.substring(1, 3)", "abcd", "bc"),
        ("self.replace('a', 'b')", "aa", "bb"),
        ("['a', 'b'].join('-')", None, "a-b"),
        ("self.matches('^[a-z]+$')", "abc", True),
        ("self.matches('^(?i)[a-z]+$')", "ABC", True),
        ("self.startsWith('/') && self.endsWith('x') && self.contains('b')", "/abx", True),
        ("self.all(x, x > 0)", [1, 2], True),
        ("self.exists(x, x == 2)", [1, 2], True),
        ("self.exists_one(x, x > 0)", [1, 2], False),
        ("self.filter(x, x > 1).size()", [1, 2, 3], 2),
        ("self.map(x, x * 2)", [1, 2], [2, 4]),
        ("self.all(k, k.startsWith('a'))", {"ab": 1, "ac": 2}, True),
        ("size(self) == 0 || format.dns1123Label().validate(self) == null", "good-name", True),
        ("size(self) == 0 || format.dns1123Label().validate(self) == null", "Bad_Name", False),
        ("format.dns1123Subdomain().validate(self)", "a.b", None),
        ("duration(self) > duration('1m30s')", "2m", True),
        ("duration(self) < duration('1s')", "500ms", True),
        ("has(self.__namespace__)", {"namespace": "x"}, True),
        ("self.a__dash__b", {"a-b": 3}, 3),
        ("1 + 2 * 3 - 4 / 2 % 3", None, 5),
        ("-7 / 2", None, -3),
        ("'a' + 'b' in ['ab']", None, True),
        ("self == {'a': [1, 2]}", {"a": [1, 2]}, True),
        ("true == 1", None, False),
        ("self.size() > 1 ? 'many' : 'few'", [1], "few"),
        ("[1, 3, 2].max()", None, 3),
        ("[1, 2, 3].isSorted()", None, True),
        (r"self.matches(r'''^\d+$''')", "123", True),
    ],
)
def test_cel_library(expr: str, value: Any, expected: Any) -> None:
    assert cel.evaluate(expr, value) == expected


def test_cel_errors_are_absorbed_by_logical_operators() -> None:
    # false && error is false, true || error is true, whichever side errs
    assert cel.evaluate("self.missing == 1 && false", {}) is False
    assert cel.evaluate("false && self.missing == 1", {}) is False
    assert cel.evaluate("self.missing == 1 || true", {}) is True
    assert cel.evaluate("self.all(x, x.a == 1)", [{"b": 1}, {"a": 2}]) is False
    with pytest.raises(cel.CelError):
        cel.evaluate("self.missing == 1 && true", {})
    with pytest.raises(cel.CelError):
        cel.evaluate("1 + 'a'", None)
    with pytest.raises(cel.CelError):
        cel.evaluate("9223372036854775807 + 1", None)
    with pytest.raises(cel.CelError):
        cel.evaluate("ip(self)", "not-an-ip")
    with pytest.raises(cel.CelCompileError):
        cel.compile_rule("self.noSuchFunction()")
    with pytest.raises(cel.CelCompileError):
        cel.compile_rule("self ==")


def test_cel_programs_are_cached_and_transition_rules_flagged() -> None:
    p = cel.compile_rule("self == oldSelf")
    assert p is cel.compile_rule("self == oldSelf")
    assert p.uses_old_self
    assert not cel.compile_rule("self == 1").uses_old_self
