"""SecurityPolicy ``backendSettings`` of an auth service (extAuth http / grpc) and of a remote
JWKS in Envoy's configuration: the service is reached through a copy of its cluster carrying the
cluster settings (load balancing, circuit breaker, connect timeout, health checks), the filter's
own requests get the retry policy (and, for a JWKS fetch, the request timeout); Envoy itself
accepts the result. Fields Envoy cannot apply to those requests are refused by name, bad values
located."""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import Result, TranslateOptions, translate
from gateweave.xds import build, extauth
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run
from tests.xds.test_policy_security import hcm_filters
from tests.xds.test_policy_security_jwt import jwt_config

SETTINGS: dict[str, Any] = {
    "loadBalancer": {"type": "Random"},
    "circuitBreaker": {"maxConnections": 7, "maxPendingRequests": 3},
    "timeout": {"tcp": {"connectTimeout": "2s"}},
    "healthCheck": {"active": {"type": "TCP", "interval": "5s", "timeout": "1s", "tcp": {}}},
    "retry": {
        "numRetries": 3,
        "retryOn": {"triggers": ["5xx", "connect-failure"]},
        "perRetry": {"backOff": {"baseInterval": "10ms", "maxInterval": "100ms"}},
    },
}
AUTH_SVC = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "auth", "namespace": "ns"},
    "spec": {"ports": [{"port": 9001}]},
}


def stored(docs: list[dict[str, Any]], spec: dict[str, Any]) -> Result:
    """The translation with a SecurityPolicy ``p`` of ``spec`` on the Gateway as stored (not
    validated against the CRD again: a file edited by hand, an object older than its rules)."""
    bad = m.SecurityPolicy(
        metadata=m.ObjectMeta(name="p", namespace="ns"),
        spec={"targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}], **spec},
    )
    return translate(Snapshot.from_objects([*models(docs), bad]), TranslateOptions())


def ext_authz(res: Any) -> ext_authz_pb2.ExtAuthz:
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(extauth.FILTER)
    ]
    config = ext_authz_pb2.ExtAuthz()
    chain_filter.typed_config.Unpack(config)
    return config


def assert_settings(cluster: cluster_pb2.Cluster) -> None:
    assert cluster.lb_policy == cluster_pb2.Cluster.RANDOM
    [threshold] = cluster.circuit_breakers.thresholds
    assert (threshold.max_connections.value, threshold.max_pending_requests.value) == (7, 3)
    assert cluster.connect_timeout.seconds == 2
    [check] = cluster.health_checks
    assert check.HasField("tcp_health_check") and check.interval.seconds == 5


def test_ext_auth_backend_settings_on_its_cluster_and_checks() -> None:
    for protocol in ("http", "grpc"):
        spec = {
            "extAuth": {
                protocol: {
                    "backendRefs": [{"name": "auth", "port": 9001}],
                    "backendSettings": SETTINGS,
                }
            }
        }
        result = run([*base(), AUTH_SVC, policy("p", "SecurityPolicy", spec=spec)])
        assert only(result, "p", "SecurityPolicy")["Accepted"]["status"] == "True"
        res = build(result.xds["ns/gw"])
        config = ext_authz(res)
        if protocol == "http":
            name = config.http_service.server_uri.cluster
            retry = config.http_service.retry_policy
        else:
            name = config.grpc_service.envoy_grpc.cluster_name
            retry = config.grpc_service.retry_policy
        # a copy of the auth service's cluster, with the settings; the plain one is not sent to
        assert name.startswith("ns/auth/9001/") and "/policy-" in name, name
        assert_settings(res.clusters[name])
        assert (retry.retry_on, retry.num_retries.value) == ("5xx,connect-failure", 3)
        back_off = retry.retry_back_off
        assert (
            back_off.base_interval.ToMilliseconds(),
            back_off.max_interval.ToMilliseconds(),
        ) == (
            10,
            100,
        )
        ok, message = validate_with_envoy(res)
        assert ok, message
    # without backendSettings: the plain cluster, no retry
    plain = {"extAuth": {"http": {"backendRefs": [{"name": "auth", "port": 9001}]}}}
    res = build(run([*base(), AUTH_SVC, policy("p", "SecurityPolicy", spec=plain)]).xds["ns/gw"])
    config = ext_authz(res)
    assert "/policy-" not in config.http_service.server_uri.cluster
    assert not config.http_service.HasField("retry_policy")


def test_remote_jwks_backend_settings_on_its_cluster_and_fetch() -> None:
    settings = {
        **SETTINGS,
        "timeout": {"tcp": {"connectTimeout": "2s"}, "http": {"requestTimeout": "3s"}},
    }
    spec = {
        "jwt": {
            "providers": [
                {
                    "name": "ip",
                    "remoteJWKS": {"uri": "http://10.1.2.3:8080/keys", "backendSettings": settings},
                }
            ]
        }
    }
    result = run([*base(), policy("p", "SecurityPolicy", spec=spec)])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    remote = jwt_config(res).providers["ip"].remote_jwks
    assert remote.http_uri.cluster.startswith("jwks:http://10.1.2.3:8080/policy-")
    assert_settings(res.clusters[remote.http_uri.cluster])
    assert remote.http_uri.timeout.seconds == 3
    assert (remote.retry_policy.retry_on, remote.retry_policy.num_retries.value) == (
        "5xx,connect-failure",
        3,
    )
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_backend_settings_refused_by_name_and_bad_values_located() -> None:
    spec = {
        "extAuth": {
            "http": {
                "backendRefs": [{"name": "auth", "port": 9001}],
                "backendSettings": {
                    "retry": {"perRetry": {"timeout": "1s"}, "retryOn": {"httpStatusCodes": [503]}},
                    "timeout": {"http": {"requestTimeout": "1s"}},
                    "http2": {"initialStreamWindowSize": "64Ki"},
                },
            }
        }
    }
    refused = run([*base(), AUTH_SVC, policy("p", "SecurityPolicy", spec=spec)])
    at = "spec.extAuth.http.backendSettings"
    assert only(refused, "p", "SecurityPolicy")["Accepted"]["message"] == (
        f"{at}.retry.perRetry.timeout, {at}.retry.retryOn.httpStatusCodes, "
        f"{at}.timeout.http, {at}.http2 are not supported by gateweave"
    )
    bad = {
        "extAuth": {
            "grpc": {
                "backendRefs": [{"name": "auth", "port": 9001}],
                "backendSettings": {
                    "timeout": {"tcp": {"connectTimeout": "soon"}},
                    "loadBalancer": {"type": "Nearest"},
                },
            }
        }
    }
    invalid = stored([*base(), AUTH_SVC], bad)
    message = only(invalid, "p", "SecurityPolicy")["Accepted"]["message"]
    assert (
        "spec.extAuth.grpc.backendSettings.timeout.tcp.connectTimeout 'soon' is not a duration"
        in (message)
    )
    assert "spec.extAuth.grpc.backendSettings.loadBalancer.type Nearest is not supported" in message
    jwks = {
        "jwt": {
            "providers": [
                {
                    "name": "ip",
                    "remoteJWKS": {
                        "uri": "http://10.1.2.3:8080/keys",
                        "backendSettings": {"timeout": {"http": {"requestTimeout": "0s"}}},
                    },
                }
            ]
        }
    }
    invalid = stored(base(), jwks)
    assert only(invalid, "p", "SecurityPolicy")["Accepted"]["message"] == (
        "spec.jwt.providers[0].remoteJWKS.backendSettings.timeout.http.requestTimeout must be more "
        "than 0"
    )
