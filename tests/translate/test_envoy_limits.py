"""Envoy's own limits, applied by translate: what valid Gateway API objects can say and Envoy
refuses.

Each case shows both halves: the Envoy resource the object would have become is refused by Envoy
itself (``envoy --mode validate``, the same check as a NACK), and translate now refuses the object
instead, with a condition that says why (the rule is dropped; a route with no rule left is
Accepted=False/UnsupportedValue), so the rest of the route table still reaches Envoy.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateweave import ir
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.regex import ENVOY_MAX_PROGRAM_SIZE, re2_error, re2_escape
from gateweave.xds.build import build
from gateweave.xds.validate import validate_with_envoy
from tests.support.quarantine import GW, NS, gateway_objects
from tests.support.specletter_objects import models

# Program sizes (RE2's count, as Envoy computes it).
ISSUE_REGEX = "/api/v[0-9]+/items/[a-z0-9-]{1,64}"  # 274: the kind of path regex the issue found
AT_LIMIT = "/" + "x" * 95  # exactly 100: Envoy takes it
OVER_LIMIT = "/" + "x" * 96  # 101
_ENVOY_SIZE = re.compile(r"RE2 program size of (\d+) > max program size of (\d+)")


def _objects(*routes: dict[str, Any]) -> list[Any]:
    return models([*gateway_objects(), *routes])


def _http_route(name: str, rule: dict[str, Any]) -> dict[str, Any]:
    rule = {"backendRefs": [{"name": "svc", "port": 80}], **rule}
    return {
        "apiVersion": GW,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [rule]},
    }


def _grpc_route(name: str, method: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "GRPCRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {"matches": [{"method": method}], "backendRefs": [{"name": "svc", "port": 80}]}
            ],
        },
    }


_GOOD = _http_route("good", {"matches": [{"path": {"type": "PathPrefix", "value": "/good"}}]})


def _accepted(route: dict[str, Any]) -> dict[str, str]:
    """The route's Accepted condition, translated beside a good route (which must stay served)."""
    res = translate(Snapshot.from_objects(_objects(route, _GOOD)))
    statuses: dict[tuple[str, str], Any] = {(k[0], k[2]): s for k, s in res.statuses.items()}
    (parent,) = statuses[(route["kind"], route["metadata"]["name"])]["parents"]
    (good,) = statuses[("HTTPRoute", "good")]["parents"]
    assert [c["status"] for c in good["conditions"] if c["type"] == "Accepted"] == ["True"]
    (gw,) = res.xds.values()
    names = [r.name for p in gw.ports if p.http for vh in p.http.virtual_hosts for r in vh.routes]
    assert f"httproute/{NS}/good/rule/0/match/0" in names
    (accepted,) = [c for c in parent["conditions"] if c["type"] == "Accepted"]
    served = any(n.split("/")[2] == route["metadata"]["name"] for n in names)
    assert served == (accepted["status"] == "True")  # a refused rule is left out
    ok, message = validate_with_envoy(build(gw))
    assert ok, message  # what translate publishes, Envoy takes
    return dict(accepted)


def _gateway(route: ir.Route) -> ir.XdsGateway:
    """A Gateway whose one route table holds ``route`` (as a translation would have made it)."""
    config = ir.RouteConfig(
        name="rc", virtual_hosts=(ir.VirtualHost(name="vh", domains=("*",), routes=(route,)),)
    )
    return ir.XdsGateway(
        name=f"{NS}/gw",
        address="127.0.0.1",
        ports=(ir.Port(name=f"{NS}/gw/8080", port=8080, protocol="HTTP", http=config),),
        clusters=(ir.Cluster(name="c", endpoints=(ir.Endpoint(address="127.0.0.1", port=1),)),),
    )


def _envoy_refuses(route: ir.Route) -> str:
    """Envoy's message refusing a route table that holds ``route``."""
    ok, message = validate_with_envoy(build(_gateway(route)))
    assert not ok, "Envoy took it: translate must not refuse it"
    return message


def _to_c(match: ir.RouteMatch, **kw: Any) -> ir.Route:
    return ir.Route(
        name="r", match=match, backends=(ir.WeightedCluster(cluster="c", weight=1),), **kw
    )


def _sizes_agree(envoy_message: str, condition_message: str) -> None:
    """The program size translate reports is the one Envoy computed, against the same limit."""
    found = _ENVOY_SIZE.search(envoy_message)
    assert found, envoy_message
    size, limit = found.groups()
    assert int(limit) == ENVOY_MAX_PROGRAM_SIZE
    assert f"RE2 program size {size} is over Envoy's limit of {limit}" in condition_message


# ---------------------------------------------------------------- regex program size


def test_the_issues_path_regex_is_refused_with_its_program_size_and_the_limit() -> None:
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="RegularExpression", path=ISSUE_REGEX)))
    route = _http_route(
        "big", {"matches": [{"path": {"type": "RegularExpression", "value": ISSUE_REGEX}}]}
    )
    accepted = _accepted(route)
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert f"invalid path regular expression {ISSUE_REGEX!r}" in accepted["message"]
    _sizes_agree(envoy, accepted["message"])
    assert "RE2 program size 274 is over Envoy's limit of 100" in accepted["message"]


def test_the_limit_is_envoys_exactly() -> None:
    # 100 is taken by Envoy and by translate; 101 is refused by both.
    ok, message = validate_with_envoy(
        build(_gateway(_to_c(ir.RouteMatch(path_type="RegularExpression", path=AT_LIMIT))))
    )
    assert ok, message
    assert re2_error(AT_LIMIT) is None
    accepted = _accepted(
        _http_route(
            "edge", {"matches": [{"path": {"type": "RegularExpression", "value": AT_LIMIT}}]}
        )
    )
    assert accepted["status"] == "True"
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="RegularExpression", path=OVER_LIMIT)))
    _sizes_agree(envoy, re2_error(OVER_LIMIT) or "")


@pytest.mark.parametrize("where", ["headers", "queryParams"])
def test_header_and_query_param_regexes_are_held_to_the_limit(where: str) -> None:
    value = "[0-9a-f]{64}"  # a SHA-256 digest: program size 132
    entry = ir.StringMatch(name="x-commit", type="RegularExpression", value=value)
    envoy = _envoy_refuses(
        _to_c(
            ir.RouteMatch(headers=(entry,))
            if where == "headers"
            else ir.RouteMatch(query_params=(entry,))
        )
    )
    match = {where: [{"name": "x-commit", "type": "RegularExpression", "value": value}]}
    accepted = _accepted(_http_route("commit", {"matches": [match]}))
    what = "header" if where == "headers" else "query param"
    assert (
        accepted["status"] == "False"
        and f"invalid {what} regular expression {value!r}" in accepted["message"]
    )
    _sizes_agree(envoy, accepted["message"])


def test_a_grpc_method_regex_is_held_to_the_limit_as_the_path_regex_it_becomes() -> None:
    # Each part is within the limit; the path regex gateweave makes of them is not.
    service = (
        "(inventory|catalog|orders|payments|shipping|billing)\\.v[0-9]+\\.[A-Z][a-z]+Service"  # 66
    )
    method = "(Get|List|Watch|Create|Update|Delete|Patch)[A-Z][a-z]+(s|es)?"  # 50
    assert re2_error(service) is None and re2_error(method) is None
    path = f"/{service}/{method}"
    envoy = _envoy_refuses(
        _to_c(ir.RouteMatch(path_type="RegularExpression", path=path, grpc=True))
    )
    accepted = _accepted(
        _grpc_route("rpc", {"type": "RegularExpression", "service": service, "method": method})
    )
    assert (
        accepted["status"] == "False" and f"path regular expression {path!r}" in accepted["message"]
    )
    _sizes_agree(envoy, accepted["message"])


def test_a_long_exact_grpc_service_alone_becomes_a_regex_and_is_held_to_the_limit() -> None:
    service = "com.example." + "inventory" * 10 + ".ItemService"  # any method: a regex
    path = f"/{re2_escape(service)}/[^/]+"
    envoy = _envoy_refuses(
        _to_c(ir.RouteMatch(path_type="RegularExpression", path=path, grpc=True))
    )
    accepted = _accepted(_grpc_route("svc-only", {"type": "Exact", "service": service}))
    assert accepted["status"] == "False"
    _sizes_agree(envoy, accepted["message"])


def test_a_wildcard_cors_origin_is_held_to_the_limit_as_the_regex_it_becomes() -> None:
    origin = "https://*." + "shop" * 21 + ".example.com"  # 104
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(), cors=ir.CORS(allow_origins=(origin,))))
    accepted = _accepted(
        _http_route("cors", {"filters": [{"type": "CORS", "cors": {"allowOrigins": [origin]}}]})
    )
    assert accepted["status"] == "False" and f"CORS allowOrigin {origin!r}" in accepted["message"]
    _sizes_agree(envoy, accepted["message"])


# Regexes whose cost differs between RE2's UTF-8 and Latin-1 modes, or that only one of them takes.
_COMPILED_AS_ENVOY = ["[^/]+", ".*", "[^a]", "[à-ÿ]", "\\pL", "(?i)é", "ü{3}", "\\w+\\s\\d"]


@pytest.mark.parametrize("construct", _COMPILED_AS_ENVOY)
def test_translate_counts_a_regex_as_envoy_compiles_it(construct: str) -> None:
    # Padded over the limit so that Envoy states its count; translate's is the same.
    pattern = "/" + "q" * 100 + construct
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="RegularExpression", path=pattern)))
    _sizes_agree(envoy, re2_error(pattern) or "")


def test_a_regex_envoy_cannot_compile_is_refused_though_utf8_re2_takes_it() -> None:
    pattern = "/\\x{100}"  # a code point over 255: an error where patterns are Latin-1
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="RegularExpression", path=pattern)))
    assert envoy == "invalid escape sequence: \\x{100"
    accepted = _accepted(
        _http_route(
            "wide", {"matches": [{"path": {"type": "RegularExpression", "value": pattern}}]}
        )
    )
    assert accepted["status"] == "False" and accepted["message"].endswith(envoy)


# ---------------------------------------------------------------- other values Envoy refuses


def test_an_empty_path_regex_is_refused() -> None:
    # The CRD allows an empty value; Envoy's RegexMatcher needs at least one character.
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="RegularExpression", path="")))
    assert "RegexMatcherValidationError.Regex: value length must be at least 1" in envoy
    accepted = _accepted(
        _http_route("empty", {"matches": [{"path": {"type": "RegularExpression", "value": ""}}]})
    )
    assert (
        accepted["status"] == "False"
        and "Envoy does not take an empty regular expression" in accepted["message"]
    )


_REWRITES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # The CRD allows any character in a path modifier; Envoy none of NUL, CR, LF.
    "rewrite-full": (
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/a\nb"}},
        },
        {"url_rewrite": ir.URLRewrite(path_type="ReplaceFullPath", path="/a\nb")},
    ),
    "rewrite-prefix": (
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/a\rb"}},
        },
        {"url_rewrite": ir.URLRewrite(path_type="ReplacePrefixMatch", path="/a\rb")},
    ),
    "redirect-full": (
        {
            "type": "RequestRedirect",
            "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/a\x00b"}},
        },
        {"redirect": ir.Redirect(path_type="ReplaceFullPath", path="/a\x00b"), "backends": ()},
    ),
}


@pytest.mark.parametrize("case", sorted(_REWRITES))
def test_a_path_modifier_with_a_control_character_envoy_refuses_is_refused(case: str) -> None:
    rule_filter, ir_fields = _REWRITES[case]
    prefix = ir.RouteMatch(path_type="PathPrefix", path="/p")
    envoy = _envoy_refuses(
        ir.Route(
            name="r",
            match=prefix,
            **{"backends": (ir.WeightedCluster(cluster="c", weight=1),), **ir_fields},
        )
    )
    assert "value does not match regex pattern" in envoy
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/p"}}],
        "filters": [rule_filter],
    }
    if "redirect" in ir_fields:
        rule["backendRefs"] = []
    accepted = _accepted(_http_route(case, rule))
    assert (
        accepted["status"] == "False"
        and "Envoy refuses NUL, CR and LF in a path" in accepted["message"]
    )


_HEADER_MODIFIERS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    # (the filter, the IR it would have become, what Envoy says). The CRD's patterns hold the
    # names and values of set and add; nothing holds the names to remove, and nothing keeps a
    # response modifier off ``host``.
    "remove-crlf": (
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["x-a\r\nx-b"]}},
        {"request_headers": ir.HeaderMods(remove=("x-a\r\nx-b",))},
        "value does not match regex pattern",
    ),
    "remove-empty": (
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": [""]}},
        {"response_headers": ir.HeaderMods(remove=("",))},
        "value length must be at least 1",
    ),
    "response-remove-host": (
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": ["Host"]}},
        {"response_headers": ir.HeaderMods(remove=("Host",))},
        ":-prefixed or host headers may not be removed",
    ),
    "response-set-host": (
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"set": [{"name": "host", "value": "a"}]},
        },
        {"response_headers": ir.HeaderMods(set=(("host", "a"),))},
        ":-prefixed or host headers may not be modified",
    ),
}


@pytest.mark.parametrize("case", sorted(_HEADER_MODIFIERS))
def test_a_header_modifier_envoy_refuses_is_refused(case: str) -> None:
    rule_filter, ir_fields, envoy_says = _HEADER_MODIFIERS[case]
    envoy = _envoy_refuses(_to_c(ir.RouteMatch(path_type="PathPrefix", path="/h"), **ir_fields))
    assert envoy_says in envoy
    rule = {"matches": [{"path": {"type": "PathPrefix", "value": "/h"}}], "filters": [rule_filter]}
    accepted = _accepted(_http_route(case, rule))
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert "Envoy" in accepted["message"] and "header" in accepted["message"]


def test_a_backend_refs_response_modifier_on_host_is_refused_too() -> None:
    ref = {
        "name": "svc",
        "port": 80,
        "filters": [
            {
                "type": "ResponseHeaderModifier",
                "responseHeaderModifier": {"add": [{"name": "HOST", "value": "a"}]},
            }
        ],
    }
    accepted = _accepted(_http_route("ref-host", {"backendRefs": [ref]}))
    assert accepted["status"] == "False" and "response header 'HOST'" in accepted["message"]
