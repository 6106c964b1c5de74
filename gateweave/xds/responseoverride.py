"""BackendTrafficPolicy responseOverride in Envoy: the custom_response filter in a listener's
HTTP connection manager while one of its routes overrides answers, disabled there; a governed
route turns it on with its own matcher (the upstream status, exactly, to the first override
matching it), whose action is a local response policy (the body as it is, never read as a
format string; the content type as a header; the headers added and set; the status).
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.custom_response.v3 import custom_response_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.custom_response.local_response_policy.v3 import (
    local_response_policy_pb2,
)
from envoy.type.matcher.v3 import status_code_input_pb2
from google.protobuf import any_pb2, wrappers_pb2
from xds.core.v3 import extension_pb2
from xds.type.matcher.v3 import matcher_pb2

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


def _policy(i: int, override: ir.ResponseOverride) -> extension_pb2.TypedExtensionConfig:
    policy = local_response_policy_pb2.LocalResponsePolicy()
    if override.body is not None:
        policy.body.inline_string = override.body
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
    """The per-route config (by filter name) that turns ``r``'s overrides on."""
    if not r.response_overrides:
        return {}
    tree = matcher_pb2.Matcher.MatcherTree(input=_STATUS_INPUT)
    for i, override in enumerate(r.response_overrides):
        action = matcher_pb2.Matcher.OnMatch(action=_policy(i, override))
        for start, end in override.codes:
            for code in range(start, end + 1):
                if str(code) not in tree.exact_match_map.map:  # the first override answers
                    tree.exact_match_map.map[str(code)].CopyFrom(action)
    config = custom_response_pb2.CustomResponse(
        custom_response_matcher=matcher_pb2.Matcher(matcher_tree=tree)
    )
    return {CUSTOM_RESPONSE_FILTER: pack(config)}
