"""A BackendTrafficPolicy's local rate limit in Envoy's configuration, beyond its buckets: the
draft-03 x-ratelimit-* headers (on by default, as Envoy Gateway; off by the rule without
selectors' ``xRateLimitHeaders: Off`` or a ClientTrafficPolicy's
``headers.disableRateLimitHeaders`` on the listener; per rule by ``xRateLimitHeaders``), a rule's
``shadowMode`` and ``cost``, and the route's bucket left alone by the requests a rule picks. Some
of these are fields of Envoy 1.40's API that xds-protos lacks, written by number: Envoy's own
validation of the binary configuration checks them."""

from __future__ import annotations

from typing import Any

from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from google.protobuf.message import Message

from gateweave.xds import build
from gateweave.xds.routes import LOCAL_RATELIMIT_FILTER
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import base, only, policy, run
from tests.xds.test_policy_client_traffic import stored


def rules_spec(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"rateLimit": {"type": "Local", "local": {"rules": list(rules)}}}


def user(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "clientSelectors": [{"headers": [{"name": "x-user", "value": name}]}],
        "limit": {"requests": 2, "unit": "Minute"},
        **extra,
    }


DEFAULT = {"limit": {"requests": 5, "unit": "Second"}}


def limits(
    docs: list[dict[str, Any]],
) -> dict[tuple[str, str], local_rate_limit_pb2.LocalRateLimit]:
    """Each limited route's configuration by (listener, route name), after Envoy accepted the
    whole configuration."""
    res = build(run(docs).xds["ns/gw"])
    ok, output = validate_with_envoy(res)
    assert ok, output
    out = {}
    for listener, config in res.routes.items():
        for vh in config.virtual_hosts:
            for route in vh.routes:
                if LOCAL_RATELIMIT_FILTER in route.typed_per_filter_config:
                    limit = local_rate_limit_pb2.LocalRateLimit()
                    route.typed_per_filter_config[LOCAL_RATELIMIT_FILTER].Unpack(limit)
                    out[(listener, route.name)] = limit
    return out


def unknown_varints(message: Message) -> dict[int, int]:
    """The fields of ``message`` that its proto class does not know (varints), by number."""
    rest = type(message)()
    rest.CopyFrom(message)
    for field in rest.DESCRIPTOR.fields:
        rest.ClearField(field.name)
    data, i, out = rest.SerializeToString(), 0, {}
    while i < len(data):
        values = []
        for _ in range(2):
            value = shift = 0
            while True:
                byte = data[i]
                i += 1
                value |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            values.append(value)
        tag, value = values
        assert tag & 7 == 0, data  # varints only
        out[tag >> 3] = value
    return out


R1 = ("ns/gw/8080", "httproute/ns/r1/rule/0/match/0")


def test_headers_on_by_default_and_the_route_bucket_for_the_others_only() -> None:
    limit = limits([*base(), policy("p", spec=rules_spec(DEFAULT, user("john")))])[R1]
    assert limit.enable_x_ratelimit_headers == ratelimit_pb2.DRAFT_VERSION_03
    assert limit.HasField("always_consume_default_token_bucket")
    assert not limit.always_consume_default_token_bucket.value
    (rule,) = limit.rate_limits
    assert unknown_varints(rule) == {}  # the route's setting
    assert not rule.HasField("hits_addend")
    assert unknown_varints(limit.descriptors[0]) == {}  # enforced


def test_headers_off_by_the_default_rule() -> None:
    off = {**DEFAULT, "xRateLimitHeaders": "Off"}
    limit = limits([*base(), policy("p", spec=rules_spec(off))])[R1]
    assert limit.enable_x_ratelimit_headers == ratelimit_pb2.OFF


def test_client_traffic_policy_turns_them_off_on_its_listener_only() -> None:
    ctp = policy(
        "c",
        kind="ClientTrafficPolicy",
        section="http",
        spec={"headers": {"disableRateLimitHeaders": True}},
    )
    docs = [
        *base(),
        policy("p", spec=rules_spec(DEFAULT, user("loud", xRateLimitHeaders="DraftVersion03"))),
        ctp,
    ]
    assert only(run(docs), "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    found = limits(docs)
    assert found[R1].enable_x_ratelimit_headers == ratelimit_pb2.OFF
    other = found[("ns/gw/8081", "httproute/ns/r1/rule/0/match/0")]
    assert other.enable_x_ratelimit_headers == ratelimit_pb2.DRAFT_VERSION_03
    # the rule saying DraftVersion03 keeps them on either listener (RateLimit.x_ratelimit_option)
    assert unknown_varints(found[R1].rate_limits[0]) == {7: 2}
    assert unknown_varints(other.rate_limits[0]) == {7: 2}
    # without the policy, the listener's routes are as on the other listener
    assert limits(docs[:-1])[R1] == other


def test_rule_options_shadow_mode_and_cost() -> None:
    spec = rules_spec(
        DEFAULT,
        user("silent", xRateLimitHeaders="Off"),
        user("shadow", shadowMode=True),
        user("heavy", cost={"request": {"from": "Number", "number": 3}}),
        user("free", cost={"request": {"from": "Number", "number": 0}}),
    )
    limit = limits([*base(), policy("p", spec=spec)])[R1]
    silent, shadow, heavy, free = limit.rate_limits
    assert unknown_varints(silent) == {7: 1}  # OFF
    assert unknown_varints(limit.descriptors[1]) == {3: 1}  # shadow_mode
    assert [unknown_varints(d) for d in (limit.descriptors[0], *limit.descriptors[2:])] == [{}] * 3
    assert heavy.hits_addend.number.value == 3
    assert free.hits_addend.HasField("number") and free.hits_addend.number.value == 0
    assert not shadow.HasField("hits_addend")


def message(spec: dict[str, Any]) -> str:
    acc = only(run([*base(), policy("p", spec=spec)]), "p")["Accepted"]
    assert acc["reason"] == "Invalid"
    return str(acc["message"])


def test_what_a_local_rate_limit_cannot_express_is_named() -> None:
    assert message(rules_spec({**DEFAULT, "shadowMode": True})) == (
        "spec.rateLimit.local.rules[0].shadowMode: gateweave supports shadowMode on rules with "
        "clientSelectors only"
    )
    cost = {"request": {"from": "Number", "number": 2}}
    assert message(rules_spec({**DEFAULT, "cost": cost})) == (
        "spec.rateLimit.local.rules[0].cost: gateweave supports a cost on rules with "
        "clientSelectors only"
    )
    metadata = {"request": {"from": "Metadata", "metadata": {"namespace": "n", "key": "k"}}}
    assert message(rules_spec(user("a", cost=metadata))) == (
        "spec.rateLimit.local.rules[0].cost.request.metadata is not supported by gateweave; "
        "spec.rateLimit.local.rules[0].cost.request: gateweave supports from: Number with a "
        "number only"
    )
    assert message(rules_spec(user("a", cost={"request": {"from": "Metadata"}}))) == (
        "spec.rateLimit.local.rules[0].cost.request: gateweave supports from: Number with a "
        "number only"
    )


def test_bad_disable_rate_limit_headers_value_is_located() -> None:
    result = stored({"headers": {"disableRateLimitHeaders": 1}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == "spec.headers.disableRateLimitHeaders: 1 is not true or false"
