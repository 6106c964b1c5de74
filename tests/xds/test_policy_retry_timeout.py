"""A BackendTrafficPolicy's retry and request timeout in Envoy's configuration: the retry
policy of each route it governs (Envoy Gateway's default triggers when ``retryOn`` is unset,
``retriable-status-codes`` added for status codes), and the route's timeout; bad values are
refused by name with the policy unapplied."""

from __future__ import annotations

from typing import Any

from envoy.config.route.v3 import route_components_pb2 as rc

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build
from tests.translate.test_policies import GW, base, models, only, policy, run


def r1(spec: dict[str, Any]) -> rc.Route:
    res = build(run([*base(), policy("p", spec=spec)]).xds["ns/gw"])
    return next(
        r
        for vh in res.routes["ns/gw/8080"].virtual_hosts
        for r in vh.routes
        if r.name == "httproute/ns/r1/rule/0/match/0"
    )


def test_retry_as_written() -> None:
    spec = {
        "retry": {
            "numRetries": 3,
            "retryOn": {"triggers": ["5xx", "reset"], "httpStatusCodes": [429, 500]},
            "perRetry": {
                "timeout": "250ms",
                "backOff": {"baseInterval": "100ms", "maxInterval": "1s"},
            },
        }
    }
    policy_ = r1(spec).route.retry_policy
    assert policy_.retry_on == "5xx,reset,retriable-status-codes"
    assert list(policy_.retriable_status_codes) == [429, 500]
    assert policy_.num_retries.value == 3
    assert policy_.per_try_timeout.ToMilliseconds() == 250
    assert policy_.retry_back_off.base_interval.ToMilliseconds() == 100
    assert policy_.retry_back_off.max_interval.ToMilliseconds() == 1000


def test_retry_defaults_as_envoy_gateways() -> None:
    policy_ = r1({"retry": {"numRetries": 2}}).route.retry_policy
    assert (
        policy_.retry_on
        == "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
    )
    assert list(policy_.retriable_status_codes) == [503]
    assert policy_.num_retries.value == 2
    assert not policy_.HasField("retry_back_off")
    assert not r1({}).route.HasField("retry_policy")


def test_request_timeout() -> None:
    assert r1({"timeout": {"http": {"requestTimeout": "1m30s"}}}).route.timeout.seconds == 90
    assert not r1({}).route.HasField("timeout")


def test_bad_values_refused_by_name() -> None:
    """A stored object is not validated again: translate refuses what the CRD would."""
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "retry": {
            "numRetries": 1,
            "retryOn": {"httpStatusCodes": [42]},
            "perRetry": {"timeout": "soon", "backOff": {"baseInterval": "2s", "maxInterval": "1s"}},
        },
        "timeout": {"http": {"requestTimeout": "1d"}},
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    message = only(result, "p")["Accepted"]["message"]
    for part in (
        "spec.retry.retryOn.httpStatusCodes: 42 is not an HTTP status code",
        "spec.retry.perRetry.backOff.maxInterval must not be less than baseInterval",
        "spec.retry.perRetry.timeout 'soon' is not a duration",
        "spec.timeout.http.requestTimeout '1d' is not a duration",
    ):
        assert part in message
    assert result.xds == run(base()).xds
    other = run([*base(), policy("p", spec={"timeout": {"http": {"streamIdleTimeout": "1s"}}})])
    assert (
        only(other, "p")["Accepted"]["message"]
        == "spec.timeout.http.streamIdleTimeout is not supported by gateweave"
    )
