"""A BackendTrafficPolicy's local rate limit rules selecting requests by method, path and query
parameter, in Envoy's configuration (validated by Envoy); bad values refused with their
place."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.policies.ratelimit import path_regex
from gateweave.translate.regex import re2_error
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run
from tests.xds.test_policy_rate_limit import route_limit


def local(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rateLimit": {"type": "Local", "local": {"rules": rules}}}


RULES: list[dict[str, Any]] = [
    {
        "clientSelectors": [
            {
                "methods": [{"value": "POST"}, {"value": "PUT"}],
                "path": {"type": "PathPrefix", "value": "/api/"},
            }
        ],
        "limit": {"requests": 2, "unit": "Minute"},
    },
    {
        "clientSelectors": [
            {"queryParams": [{"name": "user", "type": "Distinct"}]},
            {
                "queryParams": [
                    {"name": "plan", "value": "free"},
                    {"name": "bot", "type": "RegularExpression", "value": "y.*", "invert": True},
                ],
                "methods": [{"value": "GET", "invert": True}],
            },
        ],
        "limit": {"requests": 3, "unit": "Hour"},
    },
]


def test_methods_path_and_query_parameters_are_descriptor_entries() -> None:
    config = route_limit(local(RULES))
    first, second = config.descriptors
    assert [(e.key, e.value) for e in first.entries] == [
        ("rule-0-header-0", "1"),
        ("rule-0-header-1", "1"),
    ]
    method, path = config.rate_limits[0].actions
    assert method.header_value_match.headers[0].name == ":method"
    assert method.header_value_match.headers[0].string_match.safe_regex.regex == "POST|PUT"
    assert not method.header_value_match.headers[0].invert_match
    assert path.header_value_match.headers[0].name == ":path"
    assert [(e.key, e.value) for e in second.entries] == [
        ("rule-1-header-0", "1"),  # the inverted method
        ("rule-1-query-0", ""),  # a wildcard: a bucket per value
        ("rule-1-query-1", "1"),
        ("rule-1-query-2", "1"),
    ]
    not_get, user, plan, bot = config.rate_limits[1].actions
    assert not_get.header_value_match.headers[0].invert_match
    assert user.query_parameters.query_parameter_name == "user"
    assert user.query_parameters.descriptor_key == "rule-1-query-0"
    match = plan.query_parameter_value_match
    assert match.expect_match.value
    assert (match.query_parameters[0].name, match.query_parameters[0].string_match.exact) == (
        "plan",
        "free",
    )
    match = bot.query_parameter_value_match
    assert not match.expect_match.value  # inverted: the parameter must not match
    assert match.query_parameters[0].string_match.safe_regex.regex == "y.*"
    res = build(run([*base(), policy("p", spec=local(RULES))]).xds["ns/gw"])
    ok, message = validate_with_envoy(res)
    assert ok, message


@pytest.mark.parametrize(
    ("path_type", "value", "matching", "other"),
    [
        ("Exact", "/a.b", ["/a.b", "/a.b?x=1"], ["/a.bc", "/axb", "/a.b/", "/a.b/c"]),
        ("PathPrefix", "/api/", ["/api", "/api/", "/api/x/y?q", "/api?q=1"], ["/apis", "/ap"]),
        ("PathPrefix", "/", ["/", "/x", "/x/y?z"], []),
        ("RegularExpression", "/v[0-9]+/.*", ["/v1/a", "/v2/b?c"], ["/v/a", "/x/v1/a"]),
    ],
)
def test_path_selectors_as_route_matches(
    path_type: str, value: str, matching: list[str], other: list[str]
) -> None:
    """Envoy matches the expression against the whole ``:path`` (RE2, full match)."""
    pattern = path_regex(path_type, value)
    assert re2_error(pattern) is None  # Envoy's RE2 takes it
    for path in matching:
        assert re.fullmatch(pattern, path), (pattern, path)
    for path in other:
        assert not re.fullmatch(pattern, path), (pattern, path)


def test_bad_request_selectors_are_refused_with_their_place() -> None:
    selectors = [
        {"methods": [{"value": "BREW"}]},
        {"methods": [{"value": "GET"}, {"value": "POST", "invert": True}]},
        {"path": {"type": "Exact", "value": "api"}},
        {"path": {"type": "RegularExpression", "value": "(a"}},
        {"queryParams": [{"name": "q", "type": "Distinct", "value": "v"}]},
        {"queryParams": [{"name": "q"}]},
    ]
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        **local([{"clientSelectors": selectors, "limit": {"requests": 1, "unit": "Hour"}}]),
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    acc = only(result, "p")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    at = "spec.rateLimit.local.rules[0].clientSelectors"
    problems = acc["message"].split("; ")
    assert problems[:5] == [
        f"{at}[0].methods[0].value 'BREW' is not one of GET, HEAD, POST, PUT, DELETE, CONNECT, "
        "OPTIONS, TRACE, PATCH",
        f"{at}[1].methods: gateweave supports methods all inverted or none (a request meets one "
        "of them)",
        f"{at}[2].path.value 'api' is not a path (starting with /)",
        f"{at}[3].path.value '(a' is not a valid regular expression: missing ): (a",
        f"{at}[4].queryParams[0]: a Distinct match takes neither value nor invert",
    ]
    assert problems[5] == f"{at}[5].queryParams[0].value is required for type Exact"
    assert result.xds == run(base()).xds
