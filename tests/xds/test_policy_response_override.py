"""A BackendTrafficPolicy's responseOverride in Envoy's configuration: the custom_response filter
(disabled, before the router) in the HCM of a listener only while one of its routes overrides
answers, turned on by each governed route with a matcher from the upstream status to the first
override matching it; a missing ConfigMap or a bad value makes the policy Invalid, unapplied;
Envoy accepts the configuration."""

from __future__ import annotations

from typing import Any

from envoy.extensions.filters.http.custom_response.v3 import custom_response_pb2
from envoy.extensions.http.custom_response.local_response_policy.v3 import (
    local_response_policy_pb2,
)
from envoy.extensions.http.custom_response.redirect_policy.v3 import redirect_policy_pb2
from envoy.type.matcher.v3 import http_inputs_pb2, status_code_input_pb2

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.policies import responseoverride
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run
from tests.xds.test_policy_compression import hcm

FILTER = "envoy.filters.http.custom_response"

SPEC: dict[str, Any] = {
    "responseOverride": [
        {
            "match": {"statusCodes": [{"type": "Value", "value": 500}]},
            "response": {
                "contentType": "application/json",
                "body": {"type": "Inline", "inline": '{"error": "100% down"}'},
                "statusCode": 503,
            },
        },
        {
            "match": {"statusCodes": [{"type": "Range", "range": {"start": 500, "end": 503}}]},
            "response": {
                "body": {
                    "type": "ValueRef",
                    "valueRef": {"group": "", "kind": "ConfigMap", "name": "pages"},
                }
            },
        },
    ]
}

PAGES = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "pages", "namespace": "ns"},
    "data": {"response.body": "try again later"},
}


def _policies(route: Any) -> dict[str, local_response_policy_pb2.LocalResponsePolicy]:
    config = custom_response_pb2.CustomResponse()
    route.typed_per_filter_config[FILTER].Unpack(config)
    tree = config.custom_response_matcher.matcher_tree
    assert tree.input.typed_config.Is(
        status_code_input_pb2.HttpResponseStatusCodeMatchInput.DESCRIPTOR
    )
    out = {}
    for code, on_match in tree.exact_match_map.map.items():
        policy = local_response_policy_pb2.LocalResponsePolicy()
        on_match.action.typed_config.Unpack(policy)
        out[code] = policy
    return out


def test_overrides_on_governed_routes_only() -> None:
    docs = [*base(), PAGES, policy("p", target=("HTTPRoute", "r1"), spec=SPEC)]
    result = run(docs)
    assert only(result, "p")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    filters = hcm(res.listeners["ns/gw/8080"]).http_filters
    assert [f.name for f in filters][-2:] == [FILTER, "envoy.filters.http.router"]
    assert filters[-2].disabled
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    assert FILTER not in routes["httproute/ns/r2/rule/0/match/0"].typed_per_filter_config
    policies = _policies(routes["httproute/ns/r1/rule/0/match/0"])
    assert sorted(policies) == ["500", "501", "502", "503"]
    first = policies["500"]  # the first override matching 500 answers it
    # the body as Envoy Gateway's format string: a % that starts no operator stands for itself
    assert first.body_format.text_format_source.inline_string == '{"error": "100%% down"}'
    [header] = first.response_headers_to_add
    assert (header.header.key, header.header.value) == ("content-type", "application/json")
    assert header.append_action == header.OVERWRITE_IF_EXISTS_OR_ADD
    assert first.status_code.value == 503
    for code in ("501", "502", "503"):
        second = policies[code]
        assert second.body_format.text_format_source.inline_string == "try again later"
        assert not second.HasField("status_code") and not second.response_headers_to_add
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_headers_added_and_set_on_the_override() -> None:
    header = {
        "add": [{"name": "X-Why", "value": "50% off"}],
        "set": [{"name": "Retry-After", "value": "30"}],
    }
    spec: dict[str, Any] = {
        "responseOverride": [
            {
                "match": {"statusCodes": [{"type": "Value", "value": 500}]},
                "response": {"contentType": "text/plain", "header": header},
            }
        ]
    }
    result = run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec)])
    assert only(result, "p")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    added = _policies(routes["httproute/ns/r1/rule/0/match/0"])["500"].response_headers_to_add
    assert [(h.header.key, h.header.value, h.append_action) for h in added] == [
        ("content-type", "text/plain", added[0].OVERWRITE_IF_EXISTS_OR_ADD),
        ("X-Why", "50%% off", added[0].APPEND_IF_EXISTS_OR_ADD),  # a % stands for itself
        ("Retry-After", "30", added[0].OVERWRITE_IF_EXISTS_OR_ADD),
    ]
    ok, message = validate_with_envoy(res)
    assert ok, message
    bad = {"add": [{"name": "X Why", "value": "a\nb"}]}
    spec["responseOverride"][0]["response"]["header"] = bad
    stored = m.BackendTrafficPolicy(
        metadata=m.ObjectMeta(name="p", namespace="ns"),
        spec={"targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}], **spec},
    )
    result = translate(Snapshot.from_objects([*models(base()), stored]), TranslateOptions())
    acc = only(result, "p")["Accepted"]
    assert acc["message"] == (
        "spec.responseOverride[0].response.header.add[0].name: 'X Why' is not a header name; "
        "spec.responseOverride[0].response.header.add[0].value: 'a\\nb' has a line break or NUL"
    )
    assert result.xds == run(base()).xds


def test_no_override_no_filter() -> None:
    res = build(run(base()).xds["ns/gw"])
    assert FILTER not in [f.name for f in hcm(res.listeners["ns/gw/8080"]).http_filters]


def test_missing_config_map_and_bad_values_make_the_policy_invalid() -> None:
    spec: dict[str, Any] = {
        "responseOverride": [
            *SPEC["responseOverride"],
            {
                "match": {"statusCodes": [{"type": "Range", "range": {"start": 504, "end": 504}}]},
                "response": {"body": {"type": "Inline"}, "statusCode": 42},
            },
            {
                "match": {"statusCodes": [{"type": "Value", "value": 700}]},
                "response": {"contentType": "text/plain"},
            },
        ]
    }
    # A stored object is not validated again: translate refuses what the CRD would too.
    spec["targetRefs"] = [{"group": GW, "kind": "HTTPRoute", "name": "r1"}]
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    accepted = only(result, "p")["Accepted"]
    assert (accepted["status"], accepted["reason"]) == ("False", "Invalid")
    for part in (
        "spec.responseOverride[1].response.body.valueRef: ConfigMap ns/pages does not exist",
        "spec.responseOverride[2].match.statusCodes[0].range: end must be greater than start",
        "spec.responseOverride[2].response.body.inline: needed with type Inline",
        "spec.responseOverride[2].response.statusCode: 42 is not an HTTP status (100-599)",
        "spec.responseOverride[3].match.statusCodes[0]: 700-700 is outside the HTTP statuses",
    ):
        assert part in accepted["message"], accepted["message"]
    res = build(result.xds["ns/gw"])
    assert FILTER not in [f.name for f in hcm(res.listeners["ns/gw/8080"]).http_filters]
    # A ConfigMap without the key is named too.
    pages = {**PAGES, "data": {"other": "x"}}
    result = run([*base(), pages, policy("p", target=("HTTPRoute", "r1"), spec=SPEC)])
    assert (
        "spec.responseOverride[1].response.body.valueRef: ConfigMap ns/pages has no key "
        "response.body" in only(result, "p")["Accepted"]["message"]
    )


def test_unimplemented_override_fields_refused_by_name() -> None:
    spec = {
        "responseOverride": [
            {
                "match": {
                    "statusCodes": [{"type": "Value", "value": 500}],
                    "responseHeaders": [{"name": "x", "value": {"value": "y"}}],
                },
                "redirect": {"hostname": "example.com"},
                "source": "Local",
            }
        ]
    }
    accepted = only(run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec)]), "p")[
        "Accepted"
    ]
    assert accepted["status"] == "False"
    assert accepted["message"].startswith(
        "spec.responseOverride[0].source is not supported by gateweave"
    ), accepted["message"]


REDIRECT: dict[str, Any] = {
    "responseOverride": [
        {
            "match": {"statusCodes": [{"type": "Value", "value": 401}]},
            "redirect": {
                "scheme": "https",
                "hostname": "www.redirect.com",
                "port": 8443,
                "statusCode": 301,
                "path": {"type": "ReplaceFullPath", "replaceFullPath": "/status/301"},
            },
        },
        {
            "match": {"statusCodes": [{"type": "Value", "value": 404}]},
            "redirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/missing"}},
        },
    ]
}


def test_redirect_override_as_envoy_gateway_writes_it_validated_by_envoy() -> None:
    result = run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=REDIRECT)])
    assert only(result, "p")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    config = custom_response_pb2.CustomResponse()
    routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config[FILTER].Unpack(config)
    actions = config.custom_response_matcher.matcher_tree.exact_match_map.map
    redirects = {}
    for code in ("401", "404"):
        policy_ = redirect_policy_pb2.RedirectPolicy()
        assert actions[code].action.typed_config.Unpack(policy_)
        redirects[code] = policy_
    full = redirects["401"]
    assert (
        full.redirect_action.scheme_redirect,
        full.redirect_action.host_redirect,
        full.redirect_action.port_redirect,
        full.redirect_action.path_redirect,
        full.status_code.value,
    ) == ("https", "www.redirect.com", 8443, "/status/301", 301)
    path_only = redirects["404"]  # the rest of the URL the request's; the CRD's default 302
    assert not path_only.redirect_action.host_redirect
    assert not path_only.redirect_action.scheme_redirect
    assert (path_only.redirect_action.path_redirect, path_only.status_code.value) == (
        "/missing",
        302,
    )
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_bad_redirects_located() -> None:
    spec: dict[str, Any] = {
        "targetRefs": [{"group": GW, "kind": "HTTPRoute", "name": "r1"}],
        "responseOverride": [
            {
                "match": {"statusCodes": [{"type": "Value", "value": 401}]},
                "redirect": {
                    "scheme": "ftp",
                    "hostname": "*.example.com",
                    "port": 70000,
                    "statusCode": 307,
                    "path": {"type": "ReplaceFullPath", "replaceFullPath": "status"},
                },
            },
            {
                "match": {"statusCodes": [{"type": "Value", "value": 404}]},
                "redirect": {"path": {"type": "ReplacePrefixMatch"}},
                "response": {"statusCode": 200},
            },
        ],
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    accepted = only(result, "p")["Accepted"]
    assert (accepted["status"], accepted["reason"]) == ("False", "Invalid")
    at = "spec.responseOverride[0].redirect"
    for part in (
        f"{at}.scheme: 'ftp' is not one of http, https",
        f"{at}.hostname: '*.example.com' is not a host name",
        f"{at}.port: 70000 is not a port number (1-65535)",
        f"{at}.statusCode: 307 is not one of 301, 302",
        f"{at}.path.replaceFullPath: 'status' is not a path (starting with /)",
        "spec.responseOverride[1]: response and redirect are both set (one only)",
        "spec.responseOverride[1].redirect.path.type: 'ReplacePrefixMatch': only ReplaceFullPath",
    ):
        assert part in accepted["message"], accepted["message"]
    assert result.xds == run(base()).xds


def _on_match(on_match: Any) -> Any:
    """An OnMatch as (override name, or [(header predicates, override name)...], fallback)."""
    if on_match.HasField("action"):
        return on_match.action.name
    rows = []
    for field in on_match.matcher.matcher_list.matchers:
        predicate = field.predicate
        singles = (
            [p.single_predicate for p in predicate.and_matcher.predicate]
            if predicate.HasField("and_matcher")
            else [predicate.single_predicate]
        )
        headers = []
        for single in singles:
            header = http_inputs_pb2.HttpResponseHeaderMatchInput()
            single.input.typed_config.Unpack(header)
            kind = single.value_match.WhichOneof("match_pattern")
            value = getattr(single.value_match, kind)
            headers.append(
                (header.header_name, kind, value if kind != "safe_regex" else value.regex)
            )
        rows.append((headers, field.on_match.action.name))
    fallback = on_match.matcher.on_no_match
    return rows, (fallback.action.name if fallback.HasField("action") else None)


def test_overrides_matching_response_headers() -> None:
    def override(match: dict[str, Any], body: str) -> dict[str, Any]:
        return {"match": match, "response": {"body": {"type": "Inline", "inline": body}}}

    degraded = {"name": "X-State", "value": {"value": "degraded"}}
    spec = {
        "responseOverride": [
            override(
                {"statusCodes": [{"type": "Value", "value": 500}], "responseHeaders": [degraded]},
                "a",
            ),
            override(
                {
                    "responseHeaders": [
                        {"name": "x-state", "value": {"type": "Prefix", "value": "maint"}},
                        {
                            "name": "x-until",
                            "value": {"type": "RegularExpression", "value": "[0-9]+"},
                        },
                    ]
                },
                "b",
            ),
            override(
                {"statusCodes": [{"type": "Range", "range": {"start": 500, "end": 501}}]}, "c"
            ),
        ]
    }
    result = run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec)])
    assert only(result, "p")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    config = custom_response_pb2.CustomResponse()
    routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config[FILTER].Unpack(config)
    matcher = config.custom_response_matcher
    b = [("x-state", "prefix", "maint"), ("x-until", "safe_regex", "[0-9]+")]
    by_code = {code: _on_match(m) for code, m in matcher.matcher_tree.exact_match_map.map.items()}
    assert by_code == {
        "500": (
            [([("x-state", "exact", "degraded")], "override-0"), (b, "override-1")],
            "override-2",
        ),
        "501": ([(b, "override-1")], "override-2"),
    }
    # another status: the overrides of any status
    assert _on_match(matcher_on_no_match := matcher.on_no_match) == ([(b, "override-1")], None)
    assert matcher_on_no_match.matcher.matcher_list.matchers
    ok, message = validate_with_envoy(res)
    assert ok, message
    # headers only: no status tree at all
    only_headers = {"responseOverride": [spec["responseOverride"][1]]}
    res = build(
        run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=only_headers)]).xds["ns/gw"]
    )
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_bad_response_header_matches_are_refused_with_their_place() -> None:
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "responseOverride": [
            {
                "match": {
                    "responseHeaders": [
                        {"name": "x state", "value": {"value": "v"}},
                        {"name": "x", "value": {"type": "RegularExpression", "value": "(a"}},
                        {"name": "y", "value": {"type": "Contains", "value": "v"}},
                    ]
                },
                "response": {"statusCode": 503},
            },
            {"match": {}, "response": {"statusCode": 503}},
        ],
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    acc = only(result, "p")["Accepted"]
    at = "spec.responseOverride[0].match.responseHeaders"
    assert acc["message"] == (
        f"{at}[0].name: 'x state' is not a header name; "
        f"{at}[1].value.value: '(a' is not a valid regular expression: missing ): (a; "
        f"{at}[2].value.type: 'Contains' is not one of Exact, Prefix, Suffix, RegularExpression; "
        "spec.responseOverride[1].match: at least one of statusCodes, responseHeaders is needed"
    )
    assert result.xds == run(base()).xds


def test_body_is_a_format_string_as_envoy_gateway_writes_it() -> None:
    """A body's Envoy format operators are replaced in each answer (Envoy Gateway's
    ``%RESPONSE_CODE% Oops!``), ``%%`` is a %, another % stands for itself; Envoy accepts every
    operator gateweave lets through, and one it does not know is named."""
    operators = [f"%{name}%" for name in sorted(responseoverride._PLAIN_OPERATORS)]
    operators += ["%REQ(:path)%", "%RESP(x-a?x-b):10%", "%TRAILER(grpc-status)%"]
    operators += ["%START_TIME%", "%START_TIME(%s.%3f)%", "%EMIT_TIME%"]

    def spec(body: str) -> dict[str, Any]:
        return {
            "responseOverride": [
                {
                    "match": {"statusCodes": [{"type": "Value", "value": 404}]},
                    "response": {"body": {"type": "Inline", "inline": body}},
                }
            ]
        }

    body = "%RESPONSE_CODE% Oops! 100% sure, 5%% off; " + " ".join(operators)
    result = run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec(body))])
    assert only(result, "p")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    text = _policies(routes["httproute/ns/r1/rule/0/match/0"])[
        "404"
    ].body_format.text_format_source.inline_string
    assert text == "%RESPONSE_CODE% Oops! 100%% sure, 5%% off; " + " ".join(operators)
    ok, message = validate_with_envoy(res)
    assert ok, message
    for bad in ("%UNKNOWN_THING%", "%RESPONSE_CODE(x)%", "%RESPONSE_CODE:3%", "%REQ()%"):
        acc = only(
            run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec(f"a {bad} b"))]), "p"
        )
        assert acc["Accepted"]["message"] == (
            f"spec.responseOverride[0].response.body: {bad!r} is not a format operator gateweave "
            "supports (%% writes a %)"
        )
