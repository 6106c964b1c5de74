"""A BackendTrafficPolicy's upstream settings in Envoy's configuration: the routes it governs
send to copies of their clusters (named after the settings) with its load balancer, circuit
breaker thresholds and connect timeout, and a consistent hash's key on the route; the routes
it does not govern keep the plain cluster; bad values are refused by name."""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.load_balancing_policies.maglev.v3 import maglev_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run

PLAIN = "ns/svc/80/http1"


def built(spec: dict[str, Any], section: str | None = "http") -> Any:
    return build(run([*base(), policy("p", section=section, spec=spec)]).xds["ns/gw"])


def targets(res: Any, port: int) -> dict[str, str]:
    return {
        r.name: r.route.cluster
        for vh in res.routes[f"ns/gw/{port}"].virtual_hosts
        for r in vh.routes
    }


def test_settings_on_a_copy_of_the_cluster_for_governed_routes_only() -> None:
    spec = {
        "loadBalancer": {"type": "LeastRequest"},
        "circuitBreaker": {
            "maxConnections": 5,
            "maxPendingRequests": 6,
            "maxParallelRequests": 7,
            "maxParallelRetries": 8,
        },
        "timeout": {"tcp": {"connectTimeout": "250ms"}},
    }
    res = built(spec)
    governed = set(targets(res, 8080).values())
    assert len(governed) == 1
    copy = governed.pop()
    assert copy.startswith(PLAIN + "/policy-")
    assert set(targets(res, 8081).values()) == {PLAIN}  # the other listener: not governed
    assert set(res.clusters) == {PLAIN, copy}
    assert copy in res.endpoints  # its own endpoints over EDS
    cluster = res.clusters[copy]
    assert cluster.lb_policy == cluster_pb2.Cluster.LEAST_REQUEST
    assert cluster.connect_timeout.ToMilliseconds() == 250
    (limits,) = cluster.circuit_breakers.thresholds
    assert (
        limits.max_connections.value,
        limits.max_pending_requests.value,
        limits.max_requests.value,
        limits.max_retries.value,
    ) == (5, 6, 7, 8)
    plain = res.clusters[PLAIN]
    assert (
        plain.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN and not plain.circuit_breakers.thresholds
    )


def test_consistent_hash_keys() -> None:
    def hashing(consistent: dict[str, Any]) -> tuple[Any, Any]:
        res = built({"loadBalancer": {"type": "ConsistentHash", "consistentHash": consistent}})
        route = next(r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes)
        return route.route.hash_policy, res.clusters[route.route.cluster]

    (source,), cluster = hashing({"type": "SourceIP"})
    assert source.connection_properties.source_ip
    assert cluster.lb_policy == cluster_pb2.Cluster.MAGLEV
    assert cluster.maglev_lb_config.table_size.value == 65537
    (header,), _ = hashing({"type": "Header", "header": {"name": "X-User"}, "tableSize": 251})
    assert header.header.header_name == "x-user"
    (cookie,), _ = hashing({"type": "Cookie", "cookie": {"name": "lb", "ttl": "1h"}})
    assert (cookie.cookie.name, cookie.cookie.ttl.seconds) == ("lb", 3600)


def test_cookie_attributes_on_the_hash_policy_validated_by_envoy() -> None:
    cookie = {"name": "lb", "ttl": "60s", "attributes": {"SameSite": "Strict", "Path": "/a"}}
    res = built(
        {
            "loadBalancer": {
                "type": "ConsistentHash",
                "consistentHash": {"type": "Cookie", "cookie": cookie},
            }
        }
    )
    route = next(r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes)
    (policy,) = route.route.hash_policy
    # sorted by name, whatever the order written
    assert [(a.name, a.value) for a in policy.cookie.attributes] == [
        ("Path", "/a"),
        ("SameSite", "Strict"),
    ]
    ok, message = validate_with_envoy(res)
    assert ok, message
    bad = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "loadBalancer": {
            "type": "ConsistentHash",
            "consistentHash": {
                "type": "Cookie",
                "cookie": {"name": "lb", "attributes": {"Same Site": "x", "Domain": "a; Secure"}},
            },
        },
    }
    stored = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=bad)
    result = translate(Snapshot.from_objects([*models(base()), stored]), TranslateOptions())
    message = only(result, "p")["Accepted"]["message"]
    at = "spec.loadBalancer.consistentHash.cookie.attributes"
    for part in (
        f"{at}: 'Same Site' is not an attribute name (a token)",
        f"{at}.Domain: 'a; Secure' has a ';', a line break or NUL",
    ):
        assert part in message, message
    assert result.xds == run(base()).xds


def test_endpoint_override_with_the_policy_balancer_as_fallback_validated_by_envoy() -> None:
    def balancing(lb: dict[str, Any]) -> tuple[Any, Any, Any]:
        res = built({"loadBalancer": lb})
        (copy,) = set(targets(res, 8080).values())
        cluster = res.clusters[copy]
        (policy,) = cluster.load_balancing_policy.policies
        config = override_host_pb2.OverrideHost()
        assert policy.typed_extension_config.typed_config.Unpack(config)
        (fallback,) = config.fallback_policy.policies
        return res, config, fallback.typed_extension_config

    override = {"extractFrom": [{"header": "X-Custom-Host"}, {"header": "x-other"}]}
    res, config, fallback = balancing({"type": "RoundRobin", "endpointOverride": override})
    assert [s.header for s in config.override_host_sources] == ["x-custom-host", "x-other"]
    assert fallback.name == "envoy.load_balancing_policies.round_robin"
    ok, message = validate_with_envoy(res)
    assert ok, message
    hashed = {
        "type": "ConsistentHash",
        "consistentHash": {"type": "SourceIP", "tableSize": 251},
        "endpointOverride": override,
    }
    res, _, fallback = balancing(hashed)
    maglev = maglev_pb2.Maglev()
    assert fallback.typed_config.Unpack(maglev) and maglev.table_size.value == 251
    ok, message = validate_with_envoy(res)
    assert ok, message
    bad = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "loadBalancer": {"type": "Random", "endpointOverride": {"extractFrom": [{}]}},
    }
    stored = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=bad)
    result = translate(Snapshot.from_objects([*models(base()), stored]), TranslateOptions())
    message = only(result, "p")["Accepted"]["message"]
    assert (
        "spec.loadBalancer.endpointOverride.extractFrom[0].header: None is not a header name"
        in message
    ), message


def test_bad_values_refused_by_name() -> None:
    """A stored object is not validated again: translate refuses what Envoy would not take."""
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "loadBalancer": {
            "type": "ConsistentHash",
            "consistentHash": {"type": "QueryParams", "tableSize": 100},
        },
        "timeout": {"tcp": {"connectTimeout": "0s"}},
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    message = only(result, "p")["Accepted"]["message"]
    for part in (
        "spec.loadBalancer.consistentHash.type QueryParams: gateweave supports SourceIP",
        "spec.loadBalancer.consistentHash.tableSize 100 must be a prime up to 5000011",
        "spec.timeout.tcp.connectTimeout must be more than 0",
    ):
        assert part in message
    assert result.xds == run(base()).xds
    other = run([*base(), policy("p", spec={"circuitBreaker": {"maxRequestsPerConnection": 3}})])
    # the CRD's defaults come with it (implemented); the field itself is not
    assert (
        only(other, "p")["Accepted"]["message"]
        == "spec.circuitBreaker.maxRequestsPerConnection is not supported by gateweave"
    )


def test_health_checks_on_the_copy() -> None:
    spec = {
        "healthCheck": {
            "active": {
                "type": "HTTP",
                "interval": "2s",
                "timeout": "500ms",
                "healthyThreshold": 2,
                "unhealthyThreshold": 4,
                "http": {
                    "path": "/healthz",
                    "hostname": "probe.example",
                    "expectedStatuses": [200, 204],
                },
            },
            "passive": {
                "consecutive5XxErrors": 3,
                "consecutiveGatewayErrors": 2,
                "interval": "1s",
                "baseEjectionTime": "10s",
                "maxEjectionPercent": 50,
            },
        }
    }
    res = built(spec)
    (copy,) = set(targets(res, 8080).values())
    cluster = res.clusters[copy]
    (check,) = cluster.health_checks
    assert (check.interval.seconds, check.timeout.ToMilliseconds()) == (2, 500)
    assert check.no_traffic_interval.seconds == 2
    assert (check.healthy_threshold.value, check.unhealthy_threshold.value) == (2, 4)
    assert (check.http_health_check.path, check.http_health_check.host) == (
        "/healthz",
        "probe.example",
    )
    assert [(r.start, r.end) for r in check.http_health_check.expected_statuses] == [
        (200, 201),
        (204, 205),
    ]
    od = cluster.outlier_detection
    assert (od.consecutive_5xx.value, od.consecutive_gateway_failure.value) == (3, 2)
    assert (od.interval.seconds, od.base_ejection_time.seconds, od.max_ejection_percent.value) == (
        1,
        10,
        50,
    )
    tcp = built({"healthCheck": {"active": {"type": "TCP", "tcp": {}}}})
    (copy,) = set(targets(tcp, 8080).values())
    (check,) = tcp.clusters[copy].health_checks
    assert (
        check.HasField("tcp_health_check") and check.interval.seconds == 3
    )  # the CRD's default interval
