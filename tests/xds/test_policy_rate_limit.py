"""A BackendTrafficPolicy's local rate limit in Envoy's configuration: the local_ratelimit
filter in the HCM of a listener only while one of its routes has a limit, and each limited
route's own token bucket; nothing changes for a listener without one."""

from __future__ import annotations

from typing import Any

from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from gateweave.xds import build
from gateweave.xds.routes import LOCAL_RATELIMIT_FILTER
from tests.translate.test_policies import base, policy, run

LIMIT = {
    "rateLimit": {
        "type": "Local",
        "local": {"rules": [{"limit": {"requests": 3, "unit": "Minute"}}]},
    }
}


def hcm_filters(listener: Any) -> list[str]:
    hcm = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    return [f.name for f in hcm.http_filters]


def test_limited_route_and_its_listener_only() -> None:
    # The policy on listener "http": r1 (through the whole Gateway) and r2 (through "http")
    # are limited there; on "other", r1 is not.
    res = build(run([*base(), policy("p", section="http", spec=LIMIT)]).xds["ns/gw"])
    assert LOCAL_RATELIMIT_FILTER in hcm_filters(res.listeners["ns/gw/8080"])
    assert hcm_filters(res.listeners["ns/gw/8080"])[-1] == "envoy.filters.http.router"
    assert LOCAL_RATELIMIT_FILTER not in hcm_filters(res.listeners["ns/gw/8081"])
    limited = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    assert set(limited) == {"httproute/ns/r1/rule/0/match/0", "httproute/ns/r2/rule/0/match/0"}
    for route in limited.values():
        config = local_rate_limit_pb2.LocalRateLimit()
        route.typed_per_filter_config[LOCAL_RATELIMIT_FILTER].Unpack(config)
        assert config.token_bucket.max_tokens == 3
        assert config.token_bucket.tokens_per_fill.value == 3
        assert config.token_bucket.fill_interval.seconds == 60
        assert config.filter_enforced.default_value.numerator == 100
    other = [r for vh in res.routes["ns/gw/8081"].virtual_hosts for r in vh.routes]
    assert other and all(LOCAL_RATELIMIT_FILTER not in r.typed_per_filter_config for r in other)


def test_refused_policy_changes_nothing() -> None:
    refused = {
        "rateLimit": {
            "type": "Local",
            "local": {"rules": [{"limit": {"requests": 3, "unit": "Minute"}}]},
        },
        "useClientProtocol": True,
    }
    assert run([*base(), policy("p", spec=refused)]).xds == run(base()).xds


def route_limit(spec: dict[str, Any]) -> local_rate_limit_pb2.LocalRateLimit:
    res = build(run([*base(), policy("p", spec=spec)]).xds["ns/gw"])
    route = next(
        r
        for vh in res.routes["ns/gw/8080"].virtual_hosts
        for r in vh.routes
        if r.name == "httproute/ns/r1/rule/0/match/0"
    )
    config = local_rate_limit_pb2.LocalRateLimit()
    route.typed_per_filter_config[LOCAL_RATELIMIT_FILTER].Unpack(config)
    return config


def test_client_selector_rules_are_descriptors_with_their_own_buckets() -> None:
    rules = [
        {"limit": {"requests": 10, "unit": "Second"}},
        {
            "clientSelectors": [
                {
                    "headers": [
                        {"name": "X-Plan", "value": "free"},
                        {"name": "x-user", "type": "Distinct"},
                    ]
                },
                {"sourceCIDR": {"value": "10.1.2.3/16", "type": "Distinct"}},
            ],
            "limit": {"requests": 2, "unit": "Minute"},
        },
        {
            "clientSelectors": [
                {
                    "headers": [
                        {
                            "name": "x-bot",
                            "type": "RegularExpression",
                            "value": "crawl.*",
                            "invert": True,
                        }
                    ]
                },
                {"sourceCIDR": {"value": "2001:db8::/32"}},
            ],
            "limit": {"requests": 3, "unit": "Hour"},
        },
    ]
    config = route_limit({"rateLimit": {"type": "Local", "local": {"rules": rules}}})
    assert (
        config.token_bucket.max_tokens == 10
    )  # the rule without selectors: the route's own bucket
    assert config.token_bucket.fill_interval.seconds == 1
    assert [d.token_bucket.max_tokens for d in config.descriptors] == [2, 3]
    assert [d.token_bucket.fill_interval.seconds for d in config.descriptors] == [60, 3600]
    first, second = config.descriptors
    assert [(e.key, e.value) for e in first.entries] == [
        ("rule-0-header-0", "1"),
        ("rule-0-header-1", ""),  # a wildcard: a bucket per value
        ("masked_remote_address", "10.1.0.0/16"),
        ("remote_address", ""),
    ]
    assert [(e.key, e.value) for e in second.entries] == [
        ("rule-1-header-0", "1"),
        ("masked_remote_address", "2001:db8::/32"),
    ]
    plan, user, masked, remote = config.rate_limits[0].actions
    assert plan.header_value_match.headers[0].name == "x-plan"
    assert plan.header_value_match.headers[0].string_match.exact == "free"
    assert user.request_headers.header_name == "x-user"
    assert user.request_headers.descriptor_key == "rule-0-header-1"
    assert masked.masked_remote_address.v4_prefix_mask_len.value == 16
    assert remote.HasField("remote_address")
    bot, v6 = config.rate_limits[1].actions
    assert bot.header_value_match.headers[0].invert_match
    assert bot.header_value_match.headers[0].string_match.safe_regex.regex == "crawl.*"
    assert v6.masked_remote_address.v6_prefix_mask_len.value == 32
    assert not v6.masked_remote_address.HasField("v4_prefix_mask_len")
    assert config.max_dynamic_descriptors.value > 0


def test_only_selector_rules_leave_the_route_bucket_unlimited() -> None:
    rules = [
        {
            "clientSelectors": [{"sourceCIDR": {"value": "10.0.0.0/8"}}],
            "limit": {"requests": 2, "unit": "Minute"},
        }
    ]
    config = route_limit({"rateLimit": {"type": "Local", "local": {"rules": rules}}})
    assert config.token_bucket.max_tokens == (1 << 32) - 1
    assert len(config.descriptors) == 1
    assert not config.HasField("max_dynamic_descriptors")  # nothing distinct
