"""SecurityPolicy JWT providers with a remote JWKS, and authorization by JWT claims, scopes and
methods, in Envoy's configuration: the jwt_authn providers fetch their JWKS through a cluster of
their own (by the URI's host, TLS for https) or their backendRef's, the rbac matcher reads the
verified payload from jwt_authn's metadata; Envoy itself accepts the result. Bad values make the
policy Invalid, located."""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.matching.common_inputs.network.v3 import network_inputs_pb2
from envoy.extensions.matching.input_matchers.metadata.v3 import metadata_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from gateweave.xds import build
from gateweave.xds.security import JWT_FILTER, RBAC_FILTER
from gateweave.xds.validate import validate_with_envoy
from tests.support.jwts import rsa_key
from tests.translate.test_policies import base, only, policy, run
from tests.xds.test_policy_security import hcm_filters, routes_of

ROUTE = "httproute/ns/r1/rule/0/match/0"


def jwt_config(res: Any) -> jwt_pb2.JwtAuthentication:
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(JWT_FILTER)
    ]
    config = jwt_pb2.JwtAuthentication()
    chain_filter.typed_config.Unpack(config)
    return config


def test_remote_jwks_by_uri_or_backend_ref() -> None:
    spec = {
        "jwt": {
            "providers": [
                {
                    "name": "dns",
                    "issuer": "https://issuer.example",
                    "remoteJWKS": {
                        "uri": "https://issuer.example/.well-known/jwks.json",
                        "cacheDuration": "10m",
                        "failedRefetchDuration": "5s",
                    },
                },
                {
                    "name": "ip",
                    "remoteJWKS": {"uri": "http://10.1.2.3:8080/keys"},
                    "claimToHeaders": [{"claim": "role", "header": "x-role"}],
                    "recomputeRoute": True,
                },
                {
                    "name": "svc",
                    "remoteJWKS": {
                        "uri": "http://keys.ns/jwks",
                        "backendRefs": [{"name": "svc", "port": 80}],
                    },
                },
            ]
        }
    }
    result = run([*base(), policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec)])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    config = jwt_config(res)
    dns = config.providers["dns"].remote_jwks
    assert (dns.http_uri.uri, dns.http_uri.cluster) == (
        "https://issuer.example/.well-known/jwks.json",
        "jwks:https://issuer.example:443",
    )
    assert (dns.cache_duration.seconds, dns.async_fetch.failed_refetch_duration.seconds) == (
        600,
        5,
    )
    assert dns.async_fetch.fast_listener  # the listener does not wait for the fetch
    cluster = res.clusters["jwks:https://issuer.example:443"]
    assert cluster.type == cluster_pb2.Cluster.STRICT_DNS  # the host resolved by DNS
    tls = tls_pb2.UpstreamTlsContext()
    cluster.transport_socket.typed_config.Unpack(tls)
    assert tls.sni == "issuer.example"
    assert tls.common_tls_context.validation_context.trusted_ca.filename  # the system's store
    ip = config.providers["ip"].remote_jwks
    assert (ip.http_uri.cluster, ip.cache_duration.seconds) == ("jwks:http://10.1.2.3:8080", 300)
    assert not res.clusters["jwks:http://10.1.2.3:8080"].HasField("transport_socket")
    assert (
        config.providers["ip"].clear_route_cache and not config.providers["dns"].clear_route_cache
    )
    svc = config.providers["svc"].remote_jwks
    assert svc.http_uri.cluster in res.clusters and svc.http_uri.cluster.startswith("ns/svc/80/")
    # the verified payload under the provider's name, for authorization rules
    assert config.providers["dns"].payload_in_metadata == "dns"
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_remote_jwks_values_refused_with_their_place() -> None:
    def message(remote: dict[str, Any]) -> str:
        spec = {"jwt": {"providers": [{"name": "a", "remoteJWKS": remote}]}}
        result = run([*base(), policy("s", "SecurityPolicy", spec=spec)])
        acc = only(result, "s", "SecurityPolicy")["Accepted"]
        if acc["status"] == "False":
            assert result.xds == run(base()).xds  # nothing applied
        return str(acc["message"]) if acc["status"] == "False" else ""

    at = "spec.jwt.providers[0].remoteJWKS"
    assert message({"uri": "http://keys.example/jwks"}) == ""
    assert message({"uri": "ftp://keys.example/jwks"}) == (
        f"{at}.uri 'ftp://keys.example/jwks': not an http or https URI"
    )
    assert message({"uri": "https://user:pw@keys.example/"}) == (
        f"{at}.uri 'https://user:pw@keys.example/': a URI with user information is not supported"
    )
    assert message({"uri": "https://Keys_Example/"}) == (
        f"{at}.uri 'https://Keys_Example/': keys_example is neither an IP address nor a host name"
    )
    assert message({"uri": "http://keys.example/", "cacheDuration": "0s"}) == (
        f"{at}.cacheDuration '0s' is not above 0"
    )
    assert message(
        {"uri": "http://keys.example/", "backendRefs": [{"name": "nowhere", "port": 80}]}
    ) == (f"{at}.backendRefs[0]: Service ns/nowhere not found")
    two = [{"name": "svc", "port": 80}, {"name": "svc", "port": 80}]
    assert message({"uri": "http://keys.example/", "backendRefs": two}) == (
        f"{at}.backendRefs: gateweave supports at most one backendRef"
    )
    assert (
        message({"uri": "http://keys.example/", "backendSettings": {"retry": {"numRetries": 1}}})
        == ""
    )  # tests/xds/test_policy_security_backend_settings.py
    http2 = {"http2": {"initialStreamWindowSize": "64Ki"}}
    assert message({"uri": "http://keys.example/", "backendSettings": http2}) == (
        f"{at}.backendSettings.http2 is not supported by gateweave"
    )


def test_jwt_fail_open_lets_any_request_through() -> None:
    spec = {
        "jwt": {
            "failOpen": True,
            "providers": [{"name": "a", "localJWKS": {"inline": rsa_key().jwks()}}],
        }
    }
    res = build(run([*base(), policy("p", "SecurityPolicy", spec=spec)]).xds["ns/gw"])
    [requirement] = jwt_config(res).requirement_map.values()
    kinds = [r.WhichOneof("requires_type") for r in requirement.requires_any.requirements]
    assert kinds == ["provider_name", "allow_missing_or_failed"]
    ok, message = validate_with_envoy(res)
    assert ok, message


def _payload_path(single: Any) -> list[str]:
    dyn = network_inputs_pb2.DynamicMetadataInput()
    single.input.typed_config.Unpack(dyn)
    assert dyn.filter == JWT_FILTER
    return [segment.key for segment in dyn.path]


def test_authorization_by_jwt_claims_scopes_and_methods() -> None:
    key = rsa_key()
    spec = {
        "jwt": {"providers": [{"name": "a", "localJWKS": {"inline": key.jwks()}}]},
        "authorization": {
            "defaultAction": "Deny",
            "rules": [
                {
                    "action": "Allow",
                    "operation": {"methods": ["GET", "POST"]},
                    "principal": {
                        "jwt": {
                            "provider": "a",
                            "claims": [
                                {"name": "org.team", "values": ["x", "y"]},
                                {"name": "groups", "valueType": "StringArray", "values": ["ops"]},
                            ],
                            "scopes": ["read"],
                        }
                    },
                }
            ],
        },
    }
    result = run([*base(), policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec)])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    provider = jwt_config(res).providers["a"]
    assert provider.payload_in_metadata == "a"
    assert list(provider.normalize_payload_in_metadata.space_delimited_claims) == ["scope"]
    rbac = rbac_pb2.RBACPerRoute()
    routes_of(res, "ns/gw/8080")[ROUTE].typed_per_filter_config[RBAC_FILTER].Unpack(rbac)
    [rule] = rbac.rbac.matcher.matcher_list.matchers
    methods, scope, team, groups = rule.predicate.and_matcher.predicate
    assert [
        (p.single_predicate.value_match.exact, p.single_predicate.value_match.ignore_case)
        for p in methods.or_matcher.predicate
    ] == [("GET", True), ("POST", True)]
    assert [_payload_path(p.single_predicate) for p in scope.or_matcher.predicate] == [
        ["a", "scope"],
        ["a", "scp"],
    ]
    assert [_payload_path(p.single_predicate) for p in team.or_matcher.predicate] == [
        ["a", "org", "team"]
    ] * 2
    wanted = metadata_pb2.Metadata()
    team.or_matcher.predicate[1].single_predicate.custom_match.typed_config.Unpack(wanted)
    assert wanted.value.string_match.exact == "y"
    groups.single_predicate.custom_match.typed_config.Unpack(wanted)
    assert wanted.value.list_match.one_of.string_match.exact == "ops"  # a list holding it
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_jwt_principal_values_refused_with_their_place() -> None:
    def message(principal_jwt: dict[str, Any]) -> str:
        spec = {
            "jwt": {"providers": [{"name": "a", "localJWKS": {"inline": rsa_key().jwks()}}]},
            "authorization": {"rules": [{"action": "Allow", "principal": {"jwt": principal_jwt}}]},
        }
        acc = only(run([*base(), policy("s", "SecurityPolicy", spec=spec)]), "s", "SecurityPolicy")[
            "Accepted"
        ]
        return str(acc["message"]) if acc["status"] == "False" else ""

    at = "spec.authorization.rules[0].principal.jwt"
    assert message({"provider": "a", "scopes": ["read"]}) == ""
    assert message({"provider": "b", "scopes": ["read"]}) == (
        f"{at}.provider b is not a provider of the policy's jwt"
    )
    assert message({"provider": "a", "claims": [{"name": "org..team", "values": ["x"]}]}) == (
        f"{at}.claims[0].name 'org..team' is not a claim name"
    )


def test_authorization_by_path() -> None:
    def rule(path: dict[str, Any]) -> dict[str, Any]:
        return {
            "action": "Deny",
            "principal": {"clientCIDRs": ["0.0.0.0/0"]},
            "operation": {"path": path},
        }

    spec = {
        "authorization": {
            "defaultAction": "Allow",
            "rules": [
                rule({"type": "PathPrefix", "value": "/admin/"}),
                rule({"type": "Exact", "value": "/a.b"}),
                rule({"type": "RegularExpression", "value": "/v[0-9]+/.*", "invert": True}),
                rule({"value": "/"}),
            ],
        }
    }
    result = run([*base(), policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec)])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    rbac = rbac_pb2.RBACPerRoute()
    routes_of(res, "ns/gw/8080")[ROUTE].typed_per_filter_config[RBAC_FILTER].Unpack(rbac)
    paths = []
    for matcher in rbac.rbac.matcher.matcher_list.matchers:
        path, _ = matcher.predicate.and_matcher.predicate  # the path, then the CIDRs
        inverted = path.HasField("not_matcher")
        single = (path.not_matcher if inverted else path).single_predicate
        paths.append((single.value_match.safe_regex.regex, inverted))
    assert paths == [
        (r"/admin([/?].*)?", False),  # whole segments, with or without a query
        (r"/a\.b(\?.*)?", False),
        ("/v[0-9]+/.*", True),
        ("/.*", False),
    ]
    ok, message = validate_with_envoy(res)
    assert ok, message

    def refusal(path: dict[str, Any]) -> str:
        bad = {"authorization": {"rules": [rule(path)]}}
        acc = only(run([*base(), policy("s", "SecurityPolicy", spec=bad)]), "s", "SecurityPolicy")[
            "Accepted"
        ]
        return str(acc["message"]) if acc["status"] == "False" else ""

    at = "spec.authorization.rules[0].operation.path"
    assert refusal({"value": "admin"}) == f"{at}.value 'admin' is not a path"
    assert refusal({"type": "RegularExpression", "value": "/(a"}).startswith(
        f"{at}.value '/(a' is not an RE2 regular expression: "
    )
