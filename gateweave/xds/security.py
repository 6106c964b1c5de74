"""SecurityPolicy effects in Envoy: basic auth (the basic_auth filter), API key auth (the
api_key_auth filter), JWT (the jwt_authn filter) and authorization (the rbac filter, its
first-match matcher tree).

A JWT provider with a remote JWKS has Envoy fetch it (in the background, the listener not
waiting for it; on demand for a request that needs it first) through its cluster, and keep it
its cache duration. Each provider's verified payload goes to jwt_authn's dynamic metadata under
the provider's name (its space-delimited ``scope`` claim made a list), where authorization rules
on JWT claims and scopes read it, as Envoy Gateway does.

Each filter is in a listener's HTTP connection manager only while one of its routes uses it,
disabled there; a route governed by a policy turns it on, so every other route passes
untouched. Envoy's basic_auth filter needs its users in the chain, so every distinct user
list of a route configuration is a filter of its own, named after its value (as the
ExternalAuth filters, extauth.py), which its routes enable (with the same users: Envoy takes
no empty per-route config for it); so is every distinct JWT configuration (its providers in
the chain, a route naming its requirement). rbac is one filter, each route giving its own
rules, as api_key_auth with each route's keys.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable

import msgspec
from envoy.config.core.v3 import address_pb2, base_pb2, http_uri_pb2
from envoy.config.rbac.v3 import rbac_pb2 as rbac_config_pb2
from envoy.extensions.filters.http.api_key_auth.v3 import api_key_auth_pb2
from envoy.extensions.filters.http.basic_auth.v3 import basic_auth_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.matching.common_inputs.network.v3 import network_inputs_pb2
from envoy.extensions.matching.input_matchers.ip.v3 import ip_pb2
from envoy.extensions.matching.input_matchers.metadata.v3 import metadata_pb2
from envoy.type.matcher.v3 import http_inputs_pb2, value_pb2
from envoy.type.matcher.v3 import string_pb2 as string_matcher_pb2
from google.protobuf import any_pb2, empty_pb2, wrappers_pb2
from google.protobuf.message import Message
from xds.core.v3 import extension_pb2
from xds.type.matcher.v3 import matcher_pb2
from xds.type.matcher.v3 import regex_pb2 as xds_regex_pb2
from xds.type.matcher.v3 import string_pb2 as xds_string_pb2

from gateweave import ir
from gateweave.xds.extauth import retry_policy
from gateweave.xds.resources import duration, pack

BASIC_AUTH_FILTER = "envoy.filters.http.basic_auth"
RBAC_FILTER = "envoy.filters.http.rbac"
API_KEY_AUTH_FILTER = "envoy.filters.http.api_key_auth"
JWT_FILTER = "envoy.filters.http.jwt_authn"
_JWT_REQUIREMENT = "securitypolicy"  # the one requirement of each jwt_authn filter
_RBAC_STAT_PREFIX = "securitypolicy_"
JWKS_FETCH_TIMEOUT_S = 10  # Envoy Gateway's timeout of a remote JWKS fetch
_SCOPE_CLAIMS = ("scope", "scp")


def basic_auth_filter(auth: ir.BasicAuth) -> str:
    """The chain's basic_auth filter for ``auth`` (the same users,
    the same name, in every chain).
    """
    return _named(BASIC_AUTH_FILTER, auth)


def _named(kind: str, value: ir.BasicAuth | ir.Jwt) -> str:
    return f"{kind}/{hashlib.sha256(msgspec.json.encode(value)).hexdigest()[:16]}"


def jwt_filter(jwt: ir.Jwt) -> str:
    """The chain's jwt_authn filter for ``jwt`` (the same configuration, the same name)."""
    return _named(JWT_FILTER, jwt)


def http_filters(routes: Iterable[ir.Route]) -> list[hcm_pb2.HttpFilter]:
    """The disabled security filters some of ``routes`` turn on, in Envoy Gateway's order
    (authentication before authorization)."""
    listed = list(routes)
    out = []
    for auth in sorted(
        {r.basic_auth for r in listed if r.basic_auth is not None}, key=basic_auth_filter
    ):
        config = pack(
            basic_auth_pb2.BasicAuth(
                users=_users(auth), forward_username_header=auth.forward_username_header
            )
        )
        out.append(
            hcm_pb2.HttpFilter(name=basic_auth_filter(auth), typed_config=config, disabled=True)
        )
    for jwt in sorted({r.jwt for r in listed if r.jwt is not None}, key=jwt_filter):
        out.append(
            hcm_pb2.HttpFilter(
                name=jwt_filter(jwt), typed_config=pack(jwt_authentication(jwt)), disabled=True
            )
        )
    if any(r.api_key_auth is not None for r in listed):
        out.append(
            hcm_pb2.HttpFilter(
                name=API_KEY_AUTH_FILTER,
                typed_config=pack(api_key_auth_pb2.ApiKeyAuth()),
                disabled=True,
            )
        )
    if any(r.authorization is not None for r in listed):
        rbac = rbac_pb2.RBAC(shadow_rules_stat_prefix=_RBAC_STAT_PREFIX)
        out.append(hcm_pb2.HttpFilter(name=RBAC_FILTER, typed_config=pack(rbac), disabled=True))
    return out


def _users(auth: ir.BasicAuth) -> base_pb2.DataSource:
    return base_pb2.DataSource(inline_string=auth.users + "\n")


def per_route(r: ir.Route) -> dict[str, any_pb2.Any]:
    """The per-route configs (by filter name) that turn ``r``'s security filters on."""
    out = {}
    if r.basic_auth is not None:
        # Envoy takes no empty per-route config for it: the same users again.
        out[basic_auth_filter(r.basic_auth)] = pack(
            basic_auth_pb2.BasicAuthPerRoute(users=_users(r.basic_auth))
        )
    if r.jwt is not None:
        out[jwt_filter(r.jwt)] = pack(jwt_pb2.PerRouteConfig(requirement_name=_JWT_REQUIREMENT))
    if r.api_key_auth is not None:
        out[API_KEY_AUTH_FILTER] = pack(api_key_auth(r.api_key_auth))
    if r.authorization is not None:
        out[RBAC_FILTER] = pack(
            rbac_pb2.RBACPerRoute(
                rbac=rbac_pb2.RBAC(matcher=authorization_matcher(r.authorization))
            )
        )
    return out


def api_key_auth(auth: ir.ApiKeyAuth) -> api_key_auth_pb2.ApiKeyAuthPerRoute:
    """A route's keys, where to find them, and what goes on to the backend."""
    out = api_key_auth_pb2.ApiKeyAuthPerRoute(
        credentials=[
            api_key_auth_pb2.Credential(key=c.api_key, client=c.client) for c in auth.credentials
        ],
        key_sources=[api_key_auth_pb2.KeySource(**{kind: name}) for kind, name in auth.sources],
    )
    if auth.forward_client_id_header or auth.sanitize:
        out.forwarding.CopyFrom(
            api_key_auth_pb2.Forwarding(
                header=auth.forward_client_id_header, hide_credentials=auth.sanitize
            )
        )
    return out


def jwt_authentication(jwt: ir.Jwt) -> jwt_pb2.JwtAuthentication:
    """The providers, and the requirement a route names: a valid token of any of them (or, optional,
    none at all; fail open, anything)."""
    out = jwt_pb2.JwtAuthentication()
    for p in jwt.providers:
        provider = out.providers[p.name]
        provider.CopyFrom(
            jwt_pb2.JwtProvider(
                issuer=p.issuer,
                audiences=p.audiences,
                from_headers=[
                    jwt_pb2.JwtHeader(name=name, value_prefix=prefix) for name, prefix in p.headers
                ],
                from_params=p.params,
                from_cookies=p.cookies,
                claim_to_headers=[
                    jwt_pb2.JwtClaimToHeader(claim_name=claim, header_name=header)
                    for claim, header in p.claim_to_headers
                ],
                forward=True,
                payload_in_metadata=p.name,
                clear_route_cache=p.recompute_route,
                normalize_payload_in_metadata=jwt_pb2.JwtProvider.NormalizePayload(
                    space_delimited_claims=["scope"]
                ),
            )
        )
        if p.jwks_uri:
            provider.remote_jwks.CopyFrom(_remote_jwks(p))
        else:
            provider.local_jwks.CopyFrom(base_pb2.DataSource(inline_string=p.jwks))
    alternatives = [jwt_pb2.JwtRequirement(provider_name=p.name) for p in jwt.providers]
    if jwt.fail_open:  # the CRD allows optional or failOpen, not both
        alternatives.append(jwt_pb2.JwtRequirement(allow_missing_or_failed=empty_pb2.Empty()))
    elif jwt.optional:
        alternatives.append(jwt_pb2.JwtRequirement(allow_missing=empty_pb2.Empty()))
    requirement = (
        alternatives[0]
        if len(alternatives) == 1
        else jwt_pb2.JwtRequirement(
            requires_any=jwt_pb2.JwtRequirementOrList(requirements=alternatives)
        )
    )
    out.requirement_map[_JWT_REQUIREMENT].CopyFrom(requirement)
    return out


def _remote_jwks(p: ir.JwtProvider) -> jwt_pb2.RemoteJwks:
    fetch = jwt_pb2.JwksAsyncFetch(fast_listener=True)
    if p.jwks_refetch_s is not None:
        fetch.failed_refetch_duration.CopyFrom(duration(p.jwks_refetch_s))
    timeout = p.jwks_timeout_s if p.jwks_timeout_s is not None else JWKS_FETCH_TIMEOUT_S
    out = jwt_pb2.RemoteJwks(
        http_uri=http_uri_pb2.HttpUri(
            uri=p.jwks_uri, cluster=p.jwks_cluster, timeout=duration(timeout)
        ),
        cache_duration=duration(p.jwks_cache_s),
        async_fetch=fetch,
    )
    if p.jwks_retry is not None:
        out.retry_policy.CopyFrom(retry_policy(p.jwks_retry))
    return out


# ---------------------------------------------------------------- authorization


def _extension(name: str, msg: Message) -> extension_pb2.TypedExtensionConfig:
    return extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(msg))


def _action(allow: bool, name: str) -> matcher_pb2.Matcher.OnMatch:
    action = rbac_config_pb2.Action(
        name=name, action=rbac_config_pb2.RBAC.ALLOW if allow else rbac_config_pb2.RBAC.DENY
    )
    return matcher_pb2.Matcher.OnMatch(action=_extension("action", action))


def _any_of(
    predicates: list[matcher_pb2.Matcher.MatcherList.Predicate],
) -> matcher_pb2.Matcher.MatcherList.Predicate:
    if len(predicates) == 1:
        return predicates[0]
    return matcher_pb2.Matcher.MatcherList.Predicate(
        or_matcher=matcher_pb2.Matcher.MatcherList.Predicate.PredicateList(predicate=predicates)
    )


def _all_of(
    predicates: list[matcher_pb2.Matcher.MatcherList.Predicate],
) -> matcher_pb2.Matcher.MatcherList.Predicate:
    if len(predicates) == 1:
        return predicates[0]
    return matcher_pb2.Matcher.MatcherList.Predicate(
        and_matcher=matcher_pb2.Matcher.MatcherList.Predicate.PredicateList(predicate=predicates)
    )


def _source_in(cidrs: tuple[str, ...]) -> matcher_pb2.Matcher.MatcherList.Predicate:
    ranges = []
    for cidr in cidrs:
        net = ipaddress.ip_network(cidr, strict=False)
        ranges.append(
            address_pb2.CidrRange(
                address_prefix=str(net.network_address),
                prefix_len=wrappers_pb2.UInt32Value(value=net.prefixlen),
            )
        )
    single = matcher_pb2.Matcher.MatcherList.Predicate.SinglePredicate(
        input=_extension("source_ip", network_inputs_pb2.SourceIPInput()),
        custom_match=_extension(
            "ip", ip_pb2.Ip(cidr_ranges=ranges, stat_prefix="securitypolicy_client_cidrs")
        ),
    )
    return matcher_pb2.Matcher.MatcherList.Predicate(single_predicate=single)


def _header_is(name: str, value: str) -> matcher_pb2.Matcher.MatcherList.Predicate:
    single = matcher_pb2.Matcher.MatcherList.Predicate.SinglePredicate(
        input=_extension(
            "request_header", http_inputs_pb2.HttpRequestHeaderMatchInput(header_name=name.lower())
        ),
        value_match=xds_string_pb2.StringMatcher(exact=value),
    )
    return matcher_pb2.Matcher.MatcherList.Predicate(single_predicate=single)


def _method_is(method: str) -> matcher_pb2.Matcher.MatcherList.Predicate:
    single = matcher_pb2.Matcher.MatcherList.Predicate.SinglePredicate(
        input=_extension(
            "request_header", http_inputs_pb2.HttpRequestHeaderMatchInput(header_name=":method")
        ),
        value_match=xds_string_pb2.StringMatcher(exact=method, ignore_case=True),
    )
    return matcher_pb2.Matcher.MatcherList.Predicate(single_predicate=single)


def _payload_is(
    provider: str, path: tuple[str, ...], value: str, in_list: bool
) -> matcher_pb2.Matcher.MatcherList.Predicate:
    """The verified payload of ``provider`` has ``value`` at ``path`` (``in_list``: in the list
    there)."""
    exact = value_pb2.ValueMatcher(string_match=string_matcher_pb2.StringMatcher(exact=value))
    wanted = (
        value_pb2.ValueMatcher(list_match=value_pb2.ListMatcher(one_of=exact)) if in_list else exact
    )
    segments = [
        network_inputs_pb2.DynamicMetadataInput.PathSegment(key=key) for key in (provider, *path)
    ]
    single = matcher_pb2.Matcher.MatcherList.Predicate.SinglePredicate(
        input=_extension(
            "jwt_payload",
            network_inputs_pb2.DynamicMetadataInput(filter=JWT_FILTER, path=segments),
        ),
        custom_match=_extension("jwt_claim", metadata_pb2.Metadata(value=wanted)),
    )
    return matcher_pb2.Matcher.MatcherList.Predicate(single_predicate=single)


def _path_matches(regex: str, invert: bool) -> matcher_pb2.Matcher.MatcherList.Predicate:
    single = matcher_pb2.Matcher.MatcherList.Predicate.SinglePredicate(
        input=_extension(
            "request_header", http_inputs_pb2.HttpRequestHeaderMatchInput(header_name=":path")
        ),
        value_match=xds_string_pb2.StringMatcher(
            safe_regex=xds_regex_pb2.RegexMatcher(
                regex=regex, google_re2=xds_regex_pb2.RegexMatcher.GoogleRE2()
            )
        ),
    )
    out = matcher_pb2.Matcher.MatcherList.Predicate(single_predicate=single)
    return matcher_pb2.Matcher.MatcherList.Predicate(not_matcher=out) if invert else out


def _rule_predicate(rule: ir.AuthzRule) -> matcher_pb2.Matcher.MatcherList.Predicate:
    parts = []
    if rule.methods:
        parts.append(_any_of([_method_is(m) for m in rule.methods]))
    if rule.path_regex:
        parts.append(_path_matches(rule.path_regex, rule.path_invert))
    if rule.cidrs:
        parts.append(_source_in(rule.cidrs))
    for scope in rule.scopes:
        parts.append(
            _any_of([_payload_is(rule.jwt_provider, (c,), scope, True) for c in _SCOPE_CLAIMS])
        )
    for claim in rule.claims:
        parts.append(
            _any_of(
                [_payload_is(rule.jwt_provider, claim.path, v, claim.array) for v in claim.values]
            )
        )
    for name, values in rule.headers:
        parts.append(_any_of([_header_is(name, v) for v in values]))
    return _all_of(parts)


def authorization_matcher(authz: ir.Authorization) -> matcher_pb2.Matcher:
    """The rules in order, the first matching one deciding; none: the default action."""
    matchers = [
        matcher_pb2.Matcher.MatcherList.FieldMatcher(
            predicate=_rule_predicate(rule), on_match=_action(rule.allow, f"rule-{i}")
        )
        for i, rule in enumerate(authz.rules)
    ]
    out = matcher_pb2.Matcher(on_no_match=_action(authz.default_allow, "default"))
    if matchers:
        out.matcher_list.CopyFrom(matcher_pb2.Matcher.MatcherList(matchers=matchers))
    return out
