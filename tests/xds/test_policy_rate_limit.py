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

LIMIT = {"rateLimit": {"type": "Local", "local": {"rules": [{"limit": {"requests": 3, "unit": "Minute"}}]}}}


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
    refused = {"rateLimit": {"type": "Local", "local": {"rules": [{"limit": {"requests": 3, "unit": "Minute"}}]}},
               "retry": {"numRetries": 2}}
    assert run([*base(), policy("p", spec=refused)]).xds == run(base()).xds
