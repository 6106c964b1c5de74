"""What Envoy reports about traffic: access logs, per-route stats, OpenTelemetry tracing.

* **Access logs**: one JSON object (or, ``text``, ``key=value`` pairs) per line, per HTTP request
(the HCM's logger) and per TCP
  connection or UDP session (the proxies' loggers), with the Gateway API names of what served
  it: the Gateway, the Envoy listener (``ns/gateway/port``; an HTTPS or TLS listener's filter
  chain ``ns/gateway/port/listener[/...]``), the route (``kind/ns/name``) and its rule. HTTP
  routes carry their identity as route metadata (``filter_metadata["gateweave"]``) which the
  log format reads with ``%METADATA(ROUTE:...)%``. Where a Gateway's log goes is its
  :class:`~gateweave.ir.Telemetry`: ``file`` writes :data:`ACCESS_LOG_FILE` relative to the
  Envoy's working directory (the host data plane runs each Envoy in its Gateway's own
  directory), ``stdout`` Envoy's standard output, ``off`` nothing.
* **Per-route stats**: every HTTP connection manager counts its responses by route and code,
  and times them by route, with a stats access logger (``gateweave.route_rq...`` and
  ``gateweave.route_rq_time...``), direct responses and redirects included (read back by
  :mod:`gateweave.telemetry`). Routes get no ``stat_prefix``: Envoy would create a scope of
  statistics for every route on every load of a route table, which made a route table of 1,000
  routes several times slower for Envoy to take (docs/benchmarks.md); the logger's statistics
  exist only for routes that answered.
* **Tracing**: the HCM's OpenTelemetry tracer, sending spans over gRPC to the collector
  cluster :data:`TRACING_CLUSTER`, sampled at the configured percentage.
"""

from __future__ import annotations

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.core.v3 import base_pb2, grpc_service_pb2, substitution_format_string_pb2
from envoy.config.trace.v3 import http_tracer_pb2, opentelemetry_pb2
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.access_loggers.stats.v3 import stats_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.type.v3 import percent_pb2
from google.protobuf import struct_pb2, wrappers_pb2

from gateweave import ir
from gateweave.xds.resources import pack, stat_name

ACCESS_LOG_FILE = "access.log"  # relative to the Envoy's working directory
# route metadata: {"route": "<kind>/<ns>/<name>", "rule": "<i>", "stat": <the route's IR name,
# stat-safe>}
METADATA_NAMESPACE = "gateweave"
# The per-route response counter every HTTP connection manager keeps (its stats access logger):
# <prefix>.<counter>.listener.<listener, stat-safe>.route.<route, stat-safe>.code.<response code>
ROUTE_COUNTER_PREFIX = "gateweave"
ROUTE_COUNTER = "route_rq"
# ... and its histogram of response times (ms): <prefix>.<this>.listener.<l>.route.<r>
ROUTE_TIMER = "route_rq_time"
TRACING_CLUSTER = "gateweave/tracing-collector"
TRACING_SERVICE = "gateweave"
_FILE_LOGGER = "envoy.access_loggers.file"
_STDOUT_LOGGER = "envoy.access_loggers.stdout"
_STATS_LOGGER = "envoy.access_loggers.stats"
_OTEL_TRACER = "envoy.tracers.opentelemetry"

# The fields of an access log line: a connection's (TCP and UDP sessions too, where "-"
# stands for what does not apply), and an HTTP request's besides.
_SESSION_FIELDS = {
    "start_time": "%START_TIME%",
    "response_flags": "%RESPONSE_FLAGS%",
    "upstream_host": "%UPSTREAM_HOST%",
    "backend": "%UPSTREAM_CLUSTER_RAW%",
    "duration_ms": "%DURATION%",
    "bytes_received": "%BYTES_RECEIVED%",
    "bytes_sent": "%BYTES_SENT%",
    "downstream_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
}
_HTTP_FIELDS = {
    **_SESSION_FIELDS,
    "route": f"%METADATA(ROUTE:{METADATA_NAMESPACE}:route)%",
    "rule": f"%METADATA(ROUTE:{METADATA_NAMESPACE}:rule)%",
    "method": "%REQ(:METHOD)%",
    "authority": "%REQ(:AUTHORITY)%",
    "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    "protocol": "%PROTOCOL%",
    "response_code": "%RESPONSE_CODE%",
    "request_id": "%REQ(X-REQUEST-ID)%",
}


# The IR names a route's Envoy routes "<kind, lower case>/<ns>/<name>/rule/<i>/match/<j>".
_KINDS = {"httproute": "HTTPRoute", "grpcroute": "GRPCRoute"}


def route_identity(route_name: str) -> tuple[str, str] | None:
    """``("<Kind>/<ns>/<name>", "<rule>")`` of an IR route name
    (``<kind>/<ns>/<name>/rule/<i>/match/<j>[/backends/<k>]``); ``None`` for routes no
    Gateway API route stands behind (a misdirected request's 421)."""
    route, sep, rest = route_name.partition("/rule/")
    kind, slash, namespaced = route.partition("/")
    if not sep or not slash or kind not in _KINDS or namespaced.count("/") != 1:
        return None
    return f"{_KINDS[kind]}/{namespaced}", rest.split("/", 1)[0]


def route_metadata(out: base_pb2.Metadata, route_name: str) -> None:
    """The route's identity as Envoy route metadata, for the access log, set in ``out`` (a
    route's own); nothing for a route no Gateway API route stands behind."""
    identity = route_identity(route_name)
    if identity is None:
        return
    fields = out.filter_metadata[METADATA_NAMESPACE].fields
    fields["route"].string_value = identity[0]
    fields["rule"].string_value = identity[1]
    fields["stat"].string_value = stat_name(route_name)


def _format(
    telemetry: ir.Telemetry, fields: dict[str, str]
) -> substitution_format_string_pb2.SubstitutionFormatString:
    """One JSON object per line, or (text) the same fields as ``key=value`` pairs separated by
    spaces, in the same order; Envoy writes ``-`` for a value it does not have. The literal
    values are Kubernetes names (DNS labels and subdomains): no spaces, no ``%``."""
    if telemetry.access_log_format == ir.ACCESS_LOG_TEXT:
        line = " ".join(f"{key}={value}" for key, value in fields.items()) + "\n"
        return substitution_format_string_pb2.SubstitutionFormatString(
            text_format_source=base_pb2.DataSource(inline_string=line)
        )
    body = struct_pb2.Struct()
    body.update(fields)
    return substitution_format_string_pb2.SubstitutionFormatString(json_format=body)


def _access_log(telemetry: ir.Telemetry, fields: dict[str, str]) -> list[accesslog_pb2.AccessLog]:
    if telemetry.access_log == ir.ACCESS_LOG_FILE:
        packed = pack(
            file_pb2.FileAccessLog(path=ACCESS_LOG_FILE, log_format=_format(telemetry, fields))
        )
        return [accesslog_pb2.AccessLog(name=_FILE_LOGGER, typed_config=packed)]
    if telemetry.access_log == ir.ACCESS_LOG_STDOUT:
        packed = pack(stream_pb2.StdoutAccessLog(log_format=_format(telemetry, fields)))
        return [accesslog_pb2.AccessLog(name=_STDOUT_LOGGER, typed_config=packed)]
    return []


def http_access_logs(gw: ir.XdsGateway, listener: str) -> list[accesslog_pb2.AccessLog]:
    """The HCM's access loggers for requests on ``listener`` of ``gw``: its access log as its
    telemetry says, and always the per-route response counter."""
    return [
        *_access_log(gw.telemetry, {"gateway": gw.name, "listener": listener, **_HTTP_FIELDS}),
        _route_counter(listener),
    ]


def _route_counter(listener: str) -> accesslog_pb2.AccessLog:
    """Counts every response by listener, route and code, and times it (from the first byte
    received to the last sent) by listener and route, whoever answered it: an upstream, or
    Envoy itself (a redirect, a direct response, a filter's denial; a request that matched no
    route has an empty route)."""
    tag = stats_pb2.Config.Tag
    where = [
        tag(name="listener", value_format=stat_name(listener)),
        tag(name="route", value_format=f"%METADATA(ROUTE:{METADATA_NAMESPACE}:stat)%"),
    ]
    counter = stats_pb2.Config.Counter(
        stat=stats_pb2.Config.Stat(
            name=ROUTE_COUNTER, tags=[*where, tag(name="code", value_format="%RESPONSE_CODE%")]
        ),
        value_fixed=wrappers_pb2.UInt64Value(value=1),
    )
    timer = stats_pb2.Config.Histogram(
        stat=stats_pb2.Config.Stat(name=ROUTE_TIMER, tags=where),
        unit=stats_pb2.Config.Histogram.Milliseconds,
        value_format="%DURATION%",
    )
    # stat_prefix is deprecated in Envoy in favour of stats_scope, which xds-protos does not have
    # yet
    packed = pack(
        stats_pb2.Config(stat_prefix=ROUTE_COUNTER_PREFIX, counters=[counter], histograms=[timer])
    )
    return accesslog_pb2.AccessLog(name=_STATS_LOGGER, typed_config=packed)


def session_access_logs(
    gw: ir.XdsGateway, listener: str, proxy: ir.TCPProxy, protocol: str
) -> list[accesslog_pb2.AccessLog]:
    """A TCP or UDP proxy's access loggers: one line per connection or session."""
    fields = {
        "gateway": gw.name,
        "listener": listener,
        "route": proxy.route or "-",
        "protocol": protocol,
        **_SESSION_FIELDS,
    }
    return _access_log(gw.telemetry, fields)


def tracing(gw: ir.XdsGateway) -> hcm_pb2.HttpConnectionManager.Tracing | None:
    """The HCM's OpenTelemetry tracing of ``gw``, if it has any."""
    config = gw.telemetry.tracing
    if config is None:
        return None
    provider = opentelemetry_pb2.OpenTelemetryConfig(
        grpc_service=grpc_service_pb2.GrpcService(
            envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=TRACING_CLUSTER)
        ),
        service_name=f"{TRACING_SERVICE}/{gw.name}",
    )
    packed = pack(provider)
    return hcm_pb2.HttpConnectionManager.Tracing(
        random_sampling=percent_pb2.Percent(value=config.sampling_percent),
        provider=http_tracer_pb2.Tracing.Http(name=_OTEL_TRACER, typed_config=packed),
    )


def tracing_cluster(config: ir.Tracing) -> ir.Cluster:
    """The collector's cluster (gRPC: HTTP/2 without TLS), resolved by Envoy (a DNS cluster:
    an IP address resolves to itself)."""
    endpoint = ir.Endpoint(
        address=config.collector_host, port=config.collector_port, type=ir.ENDPOINT_FQDN
    )
    return ir.Cluster(name=TRACING_CLUSTER, protocol="H2C", endpoints=(endpoint,))


def gateway_clusters(gw: ir.XdsGateway) -> tuple[ir.Cluster, ...]:
    """Every cluster ``gw``'s Envoy needs: its routes' and, when tracing, the collector's."""
    tracing_config = gw.telemetry.tracing
    if tracing_config is None:
        return gw.clusters
    return (*gw.clusters, tracing_cluster(tracing_config))
