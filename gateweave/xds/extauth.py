"""ExternalAuth filters (GEP-1494) as Envoy ext_authz filters.

Envoy's ext_authz takes which request headers go to the auth service, and which of its answer's
headers go on, from the filter in the HTTP connection manager, not from a route. So every distinct
:class:`ir.ExtAuth` of a route configuration is a filter of its own in the chain, named after its
value, disabled; a route whose rule has that ExternalAuth enables it (an empty per-route config),
and every other route leaves it off.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec
from envoy.config.core.v3 import base_pb2, config_source_pb2, grpc_service_pb2, http_uri_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf import any_pb2, duration_pb2

from gateweave import ir
from gateweave.xds.resources import duration, pack, string_field

# HttpService.path_override (Envoy 1.40; not in the pinned xds-protos yet): written by number
_PATH_OVERRIDE = 10

FILTER = "envoy.filters.http.ext_authz"
# How long a request waits for the auth service's verdict (no verdict: 403, as a denial).
CHECK_TIMEOUT_S = 10


# An HTTP auth service's answer's headers that describe that answer itself: never the request's.
_OWN_HEADERS = (
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "date",
    "server",
)


def filter_name(ext: ir.ExtAuth) -> str:
    """The chain's filter for ``ext`` (the same value, the same name, in every chain)."""
    return f"{FILTER}/{hashlib.sha256(msgspec.json.encode(ext)).hexdigest()[:16]}"


def used(routes: Iterable[ir.Route]) -> list[ir.ExtAuth]:
    """The distinct ExternalAuth filters of ``routes``, in filter name order."""
    distinct = {r.ext_auth for r in routes if r.ext_auth is not None}
    return sorted(distinct, key=filter_name)


def _headers(names: Iterable[str]) -> string_pb2.ListStringMatcher:
    return string_pb2.ListStringMatcher(
        patterns=[string_pb2.StringMatcher(exact=n.lower(), ignore_case=True) for n in names]
    )


def _timeout(ext: ir.ExtAuth) -> duration_pb2.Duration:
    return duration(ext.timeout_s if ext.timeout_s is not None else CHECK_TIMEOUT_S)


def retry_policy(retry: ir.Retry) -> base_pb2.RetryPolicy:
    """The retry of a filter's own requests (an auth check, a JWKS fetch): Envoy's ``retry_on``
    conditions, the number of retries and the back-off (such requests have no per-try timeout
    nor retriable status codes)."""
    out = base_pb2.RetryPolicy(retry_on=",".join(retry.triggers or ()))
    if retry.attempts is not None:
        out.num_retries.value = retry.attempts
    if retry.backoff_s is not None:
        out.retry_back_off.base_interval.CopyFrom(duration(retry.backoff_s))
        if retry.max_backoff_s is not None:
            out.retry_back_off.max_interval.CopyFrom(duration(retry.max_backoff_s))
    return out


def config(ext: ir.ExtAuth) -> ext_authz_pb2.ExtAuthz:
    """The ext_authz filter of one ExternalAuth. A denial (or no answer) stops the request: an HTTP
    service's answer goes to the client as it is, status, body and headers."""
    out = ext_authz_pb2.ExtAuthz(
        transport_api_version=config_source_pb2.V3, stat_prefix=filter_name(ext).rsplit("/", 1)[1]
    )
    if ext.protocol == "GRPC":
        out.grpc_service.CopyFrom(
            grpc_service_pb2.GrpcService(
                envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=ext.cluster),
                timeout=_timeout(ext),
            )
        )
        if ext.retry is not None:
            out.grpc_service.retry_policy.CopyFrom(retry_policy(ext.retry))
    else:
        service = ext_authz_pb2.HttpService(
            server_uri=http_uri_pb2.HttpUri(
                uri=f"http://{ext.cluster}", cluster=ext.cluster, timeout=_timeout(ext)
            ),
            path_prefix=ext.path,
        )
        if ext.path_override:
            # the check's path, in place of the request's (as Envoy Gateway writes it)
            service.MergeFromString(string_field(_PATH_OVERRIDE, ext.path_override))
        if ext.retry is not None:
            service.retry_policy.CopyFrom(retry_policy(ext.retry))
        # Envoy sends Host, Method, Path, Content-Length and Authorization anyway.
        response = service.authorization_response
        if ext.allowed_response_headers:
            response.allowed_upstream_headers.CopyFrom(_headers(ext.allowed_response_headers))
        elif not ext.only_listed_response_headers:
            # none listed: all, but those about the answer itself
            every = string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=".*"))
            response.allowed_upstream_headers.patterns.append(every)
            out.decoder_header_mutation_rules.disallow_expression.regex = (
                "(?i)^(" + "|".join(_OWN_HEADERS) + ")$"
            )
        out.http_service.CopyFrom(service)
    if ext.allowed_headers:
        out.allowed_headers.CopyFrom(_headers(ext.allowed_headers))
    out.failure_mode_allow = ext.fail_open
    out.clear_route_cache = ext.recompute_route
    if ext.status_on_error:
        out.status_on_error.code = ext.status_on_error
    if ext.max_body_bytes > 0:
        out.with_request_body.CopyFrom(
            ext_authz_pb2.BufferSettings(max_request_bytes=ext.max_body_bytes, pack_as_bytes=True)
        )
    return out


def http_filter(ext: ir.ExtAuth) -> hcm_pb2.HttpFilter:
    return hcm_pb2.HttpFilter(name=filter_name(ext), typed_config=pack(config(ext)), disabled=True)


def enable(ext: ir.ExtAuth) -> any_pb2.Any:
    """A route's per-filter config that turns ``ext``'s filter on (with its context extensions,
    which Envoy takes per route only)."""
    settings = ext_authz_pb2.CheckSettings(context_extensions=dict(ext.context))
    return pack(ext_authz_pb2.ExtAuthzPerRoute(check_settings=settings))
