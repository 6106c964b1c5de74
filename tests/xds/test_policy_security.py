"""SecurityPolicy in Envoy's configuration: basic auth and authorization filters in a
listener's HCM (disabled) only while one of its routes uses them, each governed route turning
them on with its own config; CORS on the governed routes; Envoy itself accepts the result."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from envoy.extensions.filters.http.api_key_auth.v3 import api_key_auth_pb2
from envoy.extensions.filters.http.basic_auth.v3 import basic_auth_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from gateweave import ir
from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build, extauth
from gateweave.xds.routes import CORS_FILTER
from gateweave.xds.security import API_KEY_AUTH_FILTER, JWT_FILTER, RBAC_FILTER, basic_auth_filter
from gateweave.xds.validate import validate_with_envoy
from tests.support.jwts import ec_key, rsa_key
from tests.translate.test_policies import GW, base, models, only, policy, run


def sha_line(user: str, password: str) -> str:
    return f"{user}:{{SHA}}{base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()}"


def users_secret(name: str, text: str, namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {".htpasswd": base64.b64encode(text.encode()).decode()},
    }


BASIC = {"basicAuth": {"users": {"name": "users"}}}
AUTHZ = {
    "authorization": {
        "defaultAction": "Allow",
        "rules": [
            {"action": "Deny", "principal": {"clientCIDRs": ["10.0.0.0/8", "192.168.1.7/24"]}},
            {
                "action": "Allow",
                "principal": {
                    "headers": [{"name": "X-Team", "values": ["a", "b"]}],
                    "clientCIDRs": ["::1/128"],
                },
            },
        ],
    }
}


def hcm_filters(listener: Any) -> list[hcm_pb2.HttpFilter]:
    hcm = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    return list(hcm.http_filters)


def routes_of(res: Any, name: str) -> dict[str, Any]:
    return {r.name: r for vh in res.routes[name].virtual_hosts for r in vh.routes}


def test_basic_auth_and_authorization_on_the_governed_routes_only() -> None:
    docs = [
        *base(),
        users_secret("users", sha_line("alice", "pw") + "\n\n" + sha_line("bob", "pw2") + "\n"),
        policy("p", "SecurityPolicy", section="http", spec={**BASIC, **AUTHZ}),
    ]
    res = build(run(docs).xds["ns/gw"])
    basic = basic_auth_filter(
        ir.BasicAuth(users=sha_line("alice", "pw") + "\n" + sha_line("bob", "pw2"))
    )
    filters = {f.name: f for f in hcm_filters(res.listeners["ns/gw/8080"])}
    assert filters[basic].disabled and filters[RBAC_FILTER].disabled
    users = basic_auth_pb2.BasicAuth()
    filters[basic].typed_config.Unpack(users)
    assert users.users.inline_string.split() == [
        sha_line("alice", "pw"),
        sha_line("bob", "pw2"),
    ]  # blank lines dropped
    names = [f.name for f in hcm_filters(res.listeners["ns/gw/8080"])]
    assert names.index(basic) < names.index(RBAC_FILTER) < names.index("envoy.filters.http.router")
    assert not {basic, RBAC_FILTER} & {f.name for f in hcm_filters(res.listeners["ns/gw/8081"])}
    governed = routes_of(res, "ns/gw/8080")
    assert set(governed) == {"httproute/ns/r1/rule/0/match/0", "httproute/ns/r2/rule/0/match/0"}
    for route in governed.values():
        assert basic in route.typed_per_filter_config
        rbac = rbac_pb2.RBACPerRoute()
        route.typed_per_filter_config[RBAC_FILTER].Unpack(rbac)
        matchers = rbac.rbac.matcher.matcher_list.matchers
        assert len(matchers) == 2
        assert "192.168.1.0" in str(matchers[0].predicate)  # host bits masked, as a network
        assert len(matchers[1].predicate.and_matcher.predicate) == 2  # the CIDR and the header
        assert (
            len(matchers[1].predicate.and_matcher.predicate[1].or_matcher.predicate) == 2
        )  # either value
    assert all(not r.typed_per_filter_config for r in routes_of(res, "ns/gw/8081").values())
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_deny_by_default_with_no_rules_validates() -> None:
    res = build(
        run([*base(), policy("p", "SecurityPolicy", spec={"authorization": {}})]).xds["ns/gw"]
    )
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_refused_or_unresolvable_policy_changes_nothing() -> None:
    plain = run(base()).xds
    missing = run([*base(), policy("p", "SecurityPolicy", spec=BASIC)])
    assert missing.xds == plain
    bad = run(
        [
            *base(),
            users_secret("users", "alice:$apr1$xyz$abc\n"),
            policy("p", "SecurityPolicy", spec=BASIC),
        ]
    )
    assert bad.xds == plain


def test_cors_on_the_governed_routes() -> None:
    cors = {
        "cors": {
            "allowOrigins": ["https://*.a.example", "https://b.example"],
            "allowMethods": ["GET", "PUT"],
            "allowHeaders": ["x-a"],
            "exposeHeaders": ["x-b"],
            "maxAge": "1h",
            "allowCredentials": True,
        }
    }
    res = build(
        run([*base(), policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=cors)]).xds[
            "ns/gw"
        ]
    )
    got = cors_pb2.CorsPolicy()
    routes_of(res, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config[
        CORS_FILTER
    ].Unpack(got)
    assert [m.safe_regex.regex or m.exact for m in got.allow_origin_string_match] == [
        r"^https://[^/]+\.a\.example$",
        "https://b.example",
    ]
    assert (got.allow_methods, got.allow_headers, got.expose_headers, got.max_age) == (
        "GET, PUT",
        "x-a",
        "x-b",
        "3600",
    )
    assert got.allow_credentials.value
    assert (
        CORS_FILTER
        not in routes_of(res, "ns/gw/8080")[
            "httproute/ns/r2/rule/0/match/0"
        ].typed_per_filter_config
    )
    unset = build(
        run([*base(), policy("p", "SecurityPolicy", spec={"cors": {"allowOrigins": ["*"]}})]).xds[
            "ns/gw"
        ]
    )
    unset_routes = routes_of(unset, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"]
    unset_routes.typed_per_filter_config[CORS_FILTER].Unpack(got)
    assert got.max_age == ""  # no maxAge: no Access-Control-Max-Age
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_api_key_auth_on_the_governed_routes() -> None:
    keys = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "keys", "namespace": "ns"},
        "stringData": {"client-a": "key-a", "client-b": "key-b"},
    }
    spec = {
        "apiKeyAuth": {
            "credentialRefs": [{"name": "keys"}],
            "forwardClientIDHeader": "x-client",
            "sanitize": True,
            "extractFrom": [{"headers": ["x-api-key"]}, {"params": ["key"]}, {"cookies": ["k"]}],
        }
    }
    res = build(
        run([*base(), keys, policy("p", "SecurityPolicy", section="http", spec=spec)]).xds["ns/gw"]
    )
    assert API_KEY_AUTH_FILTER in {
        f.name for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.disabled
    }
    got = api_key_auth_pb2.ApiKeyAuthPerRoute()
    routes_of(res, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config[
        API_KEY_AUTH_FILTER
    ].Unpack(got)
    assert [(c.client, c.key) for c in got.credentials] == [
        ("client-a", "key-a"),
        ("client-b", "key-b"),
    ]
    assert [(s.header, s.query, s.cookie) for s in got.key_sources] == [
        ("x-api-key", "", ""),
        ("", "key", ""),
        ("", "", "k"),
    ]
    assert (got.forwarding.header, got.forwarding.hide_credentials) == ("x-client", True)
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_jwt_providers_on_the_governed_routes() -> None:
    key = rsa_key()
    jwks_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "jwks", "namespace": "ns"},
        "data": {"jwks": ec_key().jwks()},
    }
    spec = {
        "jwt": {
            "optional": True,
            "providers": [
                {
                    "name": "a",
                    "issuer": "https://a.example",
                    "audiences": ["api"],
                    "localJWKS": {"type": "Inline", "inline": key.jwks()},
                    "claimToHeaders": [{"claim": "sub", "header": "x-sub"}],
                    "extractFrom": {
                        "headers": [{"name": "x-token", "valuePrefix": "JWT "}],
                        "params": ["t"],
                        "cookies": ["c"],
                    },
                },
                {
                    "name": "b",
                    "localJWKS": {
                        "type": "ValueRef",
                        "valueRef": {"group": "", "kind": "ConfigMap", "name": "jwks"},
                    },
                },
            ],
        }
    }
    result = run(
        [*base(), jwks_map, policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec)]
    )
    res = build(result.xds["ns/gw"])
    route = routes_of(res, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"]
    [name] = [n for n in route.typed_per_filter_config if n.startswith(JWT_FILTER)]
    [chain_filter] = [f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name == name]
    assert chain_filter.disabled
    config = jwt_pb2.JwtAuthentication()
    chain_filter.typed_config.Unpack(config)
    a = config.providers["a"]
    assert (a.issuer, list(a.audiences), a.local_jwks.inline_string) == (
        "https://a.example",
        ["api"],
        key.jwks(),
    )
    assert [(h.name, h.value_prefix) for h in a.from_headers] == [("x-token", "JWT ")]
    assert (list(a.from_params), list(a.from_cookies)) == (["t"], ["c"])
    assert [(c.claim_name, c.header_name) for c in a.claim_to_headers] == [("sub", "x-sub")]
    assert "EC" in config.providers["b"].local_jwks.inline_string
    [requirement] = config.requirement_map.values()
    kinds = [r.WhichOneof("requires_type") for r in requirement.requires_any.requirements]
    assert kinds == [
        "provider_name",
        "provider_name",
        "allow_missing",
    ]  # optional: no token passes too
    assert "httproute/ns/r2/rule/0/match/0" not in {
        r for r, v in routes_of(res, "ns/gw/8080").items() if v.typed_per_filter_config
    }
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_ext_auth_service_and_its_cluster() -> None:
    auth_svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "auth", "namespace": "ns"},
        "spec": {"ports": [{"port": 9001}]},
    }
    spec = {
        "extAuth": {
            "grpc": {"backendRefs": [{"name": "auth", "port": 9001}]},
            "failOpen": True,
            "headersToExtAuth": ["x-a"],
        }
    }
    res = build(
        run(
            [
                *base(),
                auth_svc,
                policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec),
            ]
        ).xds["ns/gw"]
    )
    [name] = [
        f.name
        for f in hcm_filters(res.listeners["ns/gw/8080"])
        if f.name.startswith(extauth.FILTER)
    ]
    assert (
        name
        in routes_of(res, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config
    )
    [chain_filter] = [f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name == name]
    config = ext_authz_pb2.ExtAuthz()
    chain_filter.typed_config.Unpack(config)
    cluster = config.grpc_service.envoy_grpc.cluster_name
    assert cluster in res.clusters  # the auth service's cluster comes with the policy
    assert config.failure_mode_allow and [p.exact for p in config.allowed_headers.patterns] == [
        "x-a"
    ]
    http = {"extAuth": {"http": {"backendRef": {"name": "svc", "port": 80}, "path": "/auth"}}}
    res = build(run([*base(), policy("p", "SecurityPolicy", spec=http)]).xds["ns/gw"])
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(extauth.FILTER)
    ]
    chain_filter.typed_config.Unpack(config)
    assert config.http_service.path_prefix == "/auth" and not config.failure_mode_allow
    assert (
        not config.http_service.authorization_response.allowed_upstream_headers.patterns
    )  # none listed: none
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_ext_auth_path_override_by_field_number_validated_by_envoy() -> None:
    """``pathOverride`` is Envoy's HttpService.path_override (field 10), which the pinned
    xds-protos lacks: written by number, kept as an unknown field, checked by Envoy."""
    http = {"backendRef": {"name": "svc", "port": 80}, "pathOverride": "/check"}
    result = run([*base(), policy("p", "SecurityPolicy", spec={"extAuth": {"http": http}})])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(extauth.FILTER)
    ]
    config = ext_authz_pb2.ExtAuthz()
    chain_filter.typed_config.Unpack(config)
    assert not config.http_service.path_prefix
    # field 10, length-delimited: its key, its length, the path
    assert config.http_service.SerializeToString().endswith(b"\x52\x06/check")
    ok, message = validate_with_envoy(res)
    assert ok, message
    for bad, part in (
        (
            {**http, "path": "/auth"},
            "spec.extAuth.http: only one of path, pathOverride can be set",
        ),
        (
            {**http, "pathOverride": "check me"},
            "spec.extAuth.http.pathOverride: 'check me' is not a path (starting with /)",
        ),
    ):
        message = only(stored_policy({"extAuth": {"http": bad}}), "p", "SecurityPolicy")[
            "Accepted"
        ]["message"]
        assert part in message, message


def stored_policy(spec: dict[str, Any]) -> Any:
    """The translation with a SecurityPolicy ``p`` of ``spec`` on the Gateway as stored (not
    validated against the CRD again: a file edited by hand, an object older than its rules)."""
    bad = m.SecurityPolicy(
        metadata=m.ObjectMeta(name="p", namespace="ns"),
        spec={"targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}], **spec},
    )
    return translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())


def test_ext_auth_timeout_status_on_error_and_body() -> None:
    spec = {
        "extAuth": {
            "http": {"backendRef": {"name": "svc", "port": 80}},
            "timeout": "250ms",
            "statusOnError": 503,
            "bodyToExtAuth": {"maxRequestBytes": 1024},
            "recomputeRoute": True,
        }
    }
    result = run([*base(), policy("p", "SecurityPolicy", spec=spec)])
    res = build(result.xds["ns/gw"])
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(extauth.FILTER)
    ]
    config = ext_authz_pb2.ExtAuthz()
    chain_filter.typed_config.Unpack(config)
    assert config.http_service.server_uri.timeout.ToMilliseconds() == 250
    assert config.status_on_error.code == 503 and config.clear_route_cache
    assert (config.with_request_body.max_request_bytes, config.with_request_body.pack_as_bytes) == (
        1024,
        True,
    )
    ok, message = validate_with_envoy(res)
    assert ok, message
    unset = {"extAuth": {"grpc": {"backendRef": {"name": "svc", "port": 80}}}}
    res = build(run([*base(), policy("p", "SecurityPolicy", spec=unset)]).xds["ns/gw"])
    [chain_filter] = [
        f for f in hcm_filters(res.listeners["ns/gw/8080"]) if f.name.startswith(extauth.FILTER)
    ]
    chain_filter.typed_config.Unpack(config)
    assert config.grpc_service.timeout.seconds == extauth.CHECK_TIMEOUT_S  # 10 s
    assert not config.HasField("status_on_error") and not config.HasField("with_request_body")
    assert not config.clear_route_cache
    zero = {"extAuth": {**unset["extAuth"], "timeout": "0s"}}
    refused = run([*base(), policy("p", "SecurityPolicy", spec=zero)])
    assert only(refused, "p", "SecurityPolicy")["Accepted"]["message"] == (
        "spec.extAuth.timeout '0s' is not above 0"
    )


def test_basic_auth_forwards_the_user_name_in_a_header() -> None:
    def basic(header: str) -> list[dict[str, Any]]:
        spec = {"basicAuth": {"users": {"name": "users"}, "forwardUsernameHeader": header}}
        return [
            *base(),
            users_secret("users", sha_line("alice", "pw")),
            policy("p", "SecurityPolicy", spec=spec),
        ]

    res = build(run(basic("x-user")).xds["ns/gw"])
    [chain_filter] = [
        f
        for f in hcm_filters(res.listeners["ns/gw/8080"])
        if f.name.startswith("envoy.filters.http.basic_auth")
    ]
    config = basic_auth_pb2.BasicAuth()
    chain_filter.typed_config.Unpack(config)
    assert config.forward_username_header == "x-user"
    ok, message = validate_with_envoy(res)
    assert ok, message
    assert only(run(basic("x user")), "p", "SecurityPolicy")["Accepted"]["message"] == (
        "spec.basicAuth.forwardUsernameHeader: 'x user' is not a header name"
    )


def test_ext_auth_context_extensions_on_the_governed_routes() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        "stringData": {"k": "from-secret"},
    }

    def docs(extensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        spec = {
            "extAuth": {
                "grpc": {"backendRef": {"name": "svc", "port": 80}},
                "contextExtensions": extensions,
            }
        }
        return [
            *base(),
            secret,
            policy("p", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec),
        ]

    ref = {"group": "", "kind": "Secret", "name": "s", "key": "k"}
    res = build(
        run(
            docs([{"name": "a", "value": "1"}, {"name": "b", "type": "ValueRef", "valueRef": ref}])
        ).xds["ns/gw"]
    )
    route = routes_of(res, "ns/gw/8080")["httproute/ns/r1/rule/0/match/0"]
    [name] = [n for n in route.typed_per_filter_config if n.startswith(extauth.FILTER)]
    per_route = ext_authz_pb2.ExtAuthzPerRoute()
    route.typed_per_filter_config[name].Unpack(per_route)
    assert dict(per_route.check_settings.context_extensions) == {"a": "1", "b": "from-secret"}
    ok, message = validate_with_envoy(res)
    assert ok, message
    missing = {**ref, "key": "nope"}
    refused = run(docs([{"name": "b", "type": "ValueRef", "valueRef": missing}]))
    assert only(refused, "p", "SecurityPolicy")["Accepted"]["message"] == (
        "spec.extAuth.contextExtensions[0].valueRef: Secret ns/s has no key nope (UTF-8 text)"
    )
