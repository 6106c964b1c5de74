"""BackendTrafficPolicy responseOverride in Envoy: the custom_response filter in a listener's
HTTP connection manager while one of its routes overrides answers, disabled there; a governed
route turns it on with its own matcher (the upstream status, exactly, and the response headers,
to the first override matching them), whose action is a local response policy (the body's format
string, as Envoy Gateway's; the content type as a header; the headers added and set; the status)
or, for a redirect, a redirect policy (the request sent again inside Envoy to the URL its redirect
action makes, answered with the redirect's status), as Envoy Gateway writes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.filters.http.custom_response.v3 import custom_response_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.custom_response.local_response_policy.v3 import (
    local_response_policy_pb2,
)
from envoy.extensions.http.custom_response.redirect_policy.v3 import redirect_policy_pb2
from envoy.type.matcher.v3 import http_inputs_pb2, status_code_input_pb2
from google.protobuf import any_pb2, wrappers_pb2
from xds.core.v3 import extension_pb2
from xds.type.matcher.v3 import matcher_pb2
from xds.type.matcher.v3 import regex_pb2 as xds_regex_pb2
from xds.type.matcher.v3 import string_pb2 as xds_string_pb2

from gateweave import ir
from gateweave.xds.resources import pack

CUSTOM_RESPONSE_FILTER = "envoy.filters.http.custom_response"
_STATUS_INPUT = extension_pb2.TypedExtensionConfig(
    name="status", typed_config=pack(status_code_input_pb2.HttpResponseStatusCodeMatchInput())
)


def http_filters(routes: Iterable[ir.Route]) -> list[hcm_pb2.HttpFilter]:
    """The disabled custom_response filter, when some of ``routes`` turn it on."""
    if not any(r.response_overrides for r in routes):
        return []
    return [
        hcm_pb2.HttpFilter(
            name=CUSTOM_RESPONSE_FILTER,
            typed_config=pack(custom_response_pb2.CustomResponse()),
            disabled=True,
        )
    ]


def _redirect_policy(redirect: ir.Redirect) -> redirect_policy_pb2.RedirectPolicy:
    """Envoy Gateway's: the parts of the URL the redirect sets (the others the request's), its
    status on the answer."""
    action = rc.RedirectAction()
    if redirect.scheme is not None:
        action.scheme_redirect = redirect.scheme
    if redirect.hostname is not None:
        action.host_redirect = redirect.hostname
    if redirect.port is not None:
        action.port_redirect = redirect.port
    if redirect.path_type == "ReplaceFullPath" and redirect.path is not None:
        action.path_redirect = redirect.path
    policy = redirect_policy_pb2.RedirectPolicy(redirect_action=action)
    policy.status_code.value = redirect.status_code
    return policy


def _policy(i: int, override: ir.ResponseOverride) -> extension_pb2.TypedExtensionConfig:
    if override.redirect is not None:
        return extension_pb2.TypedExtensionConfig(
            name=f"override-{i}", typed_config=pack(_redirect_policy(override.redirect))
        )
    policy = local_response_policy_pb2.LocalResponsePolicy()
    if override.body:
        policy.body_format.text_format_source.inline_string = override.body
    elif override.body is not None:  # empty
        policy.body.inline_string = ""
    if override.content_type is not None:
        # Envoy's local reply is text/plain: the content type replaces it.
        policy.response_headers_to_add.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key="content-type", value=override.content_type),
                append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
            )
        )
    if override.headers is not None:
        for pairs, action in (
            (override.headers.add, base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD),
            (override.headers.set, base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD),
        ):
            policy.response_headers_to_add.extend(
                base_pb2.HeaderValueOption(
                    # Envoy reads a header value as a format string: a % stands for itself
                    header=base_pb2.HeaderValue(key=name, value=value.replace("%", "%%")),
                    append_action=action,
                )
                for name, value in pairs
            )
    if override.status is not None:
        policy.status_code.CopyFrom(wrappers_pb2.UInt32Value(value=override.status))
    return extension_pb2.TypedExtensionConfig(name=f"override-{i}", typed_config=pack(policy))


def per_route(r: ir.Route) -> dict[str, any_pb2.Any]:
    """The per-route config (by filter name) that turns ``r``'s overrides on: a tree from the
    upstream status to the overrides that may answer it, in order (those of the status, and
    those of any status); of these the first whose response headers match answers."""
    overrides = list(enumerate(r.response_overrides))
    if not overrides:
        return {}
    codes = sorted(
        {code for _, o in overrides for start, end in o.codes for code in range(start, end + 1)}
    )
    tree = matcher_pb2.Matcher.MatcherTree(input=_STATUS_INPUT)
    for code in codes:
        candidates = [(i, o) for i, o in overrides if not o.codes or _covers(o, code)]
        tree.exact_match_map.map[str(code)].CopyFrom(_first_matching(candidates))
    any_status = [(i, o) for i, o in overrides if not o.codes]
    if not codes:  # no tree (Envoy refuses an empty one): the overrides of any status
        matcher = _first_matching(any_status).matcher
    else:
        matcher = matcher_pb2.Matcher(matcher_tree=tree)
        if any_status:
            matcher.on_no_match.CopyFrom(_first_matching(any_status))
    config = custom_response_pb2.CustomResponse(custom_response_matcher=matcher)
    return {CUSTOM_RESPONSE_FILTER: pack(config)}


def _covers(override: ir.ResponseOverride, code: int) -> bool:
    return any(start <= code <= end for start, end in override.codes)


def _first_matching(
    candidates: list[tuple[int, ir.ResponseOverride]],
) -> matcher_pb2.Matcher.OnMatch:
    """The first of ``candidates`` whose response headers match (one without any always does);
    none: no override."""
    matchers: list[matcher_pb2.Matcher.MatcherList.FieldMatcher] = []
    for i, override in candidates:
        action = matcher_pb2.Matcher.OnMatch(action=_policy(i, override))
        if not override.response_headers:
            if not matchers:
                return action
            return _list(matchers, action)
        matchers.append(
            matcher_pb2.Matcher.MatcherList.FieldMatcher(
                predicate=_headers_match(override.response_headers), on_match=action
            )
        )
    return _list(matchers, None)


def _list(
    matchers: list[matcher_pb2.Matcher.MatcherList.FieldMatcher],
    otherwise: matcher_pb2.Matcher.OnMatch | None,
) -> matcher_pb2.Matcher.OnMatch:
    nested = matcher_pb2.Matcher(matcher_list=matcher_pb2.Matcher.MatcherList(matchers=matchers))
    if otherwise is not None:
        nested.on_no_match.CopyFrom(otherwise)
    return matcher_pb2.Matcher.OnMatch(matcher=nested)


def _headers_match(
    matches: tuple[ir.StringMatch, ...],
) -> matcher_pb2.Matcher.MatcherList.Predicate:
    """All of ``matches`` on the upstream response's headers."""
    Predicate = matcher_pb2.Matcher.MatcherList.Predicate
    singles = [
        Predicate(
            single_predicate=Predicate.SinglePredicate(
                input=extension_pb2.TypedExtensionConfig(
                    name="response_header",
                    typed_config=pack(
                        http_inputs_pb2.HttpResponseHeaderMatchInput(header_name=match.name)
                    ),
                ),
                value_match=_value(match),
            )
        )
        for match in matches
    ]
    if len(singles) == 1:
        return singles[0]
    return Predicate(and_matcher=Predicate.PredicateList(predicate=singles))


def _value(match: ir.StringMatch) -> xds_string_pb2.StringMatcher:
    if match.type == "Prefix":
        return xds_string_pb2.StringMatcher(prefix=match.value)
    if match.type == "Suffix":
        return xds_string_pb2.StringMatcher(suffix=match.value)
    if match.type == "RegularExpression":
        regex = xds_regex_pb2.RegexMatcher(
            regex=match.value, google_re2=xds_regex_pb2.RegexMatcher.GoogleRE2()
        )
        return xds_string_pb2.StringMatcher(safe_regex=regex)
    return xds_string_pb2.StringMatcher(exact=match.value)
