"""Telemetry in the xDS output and its names read back: access loggers on every proxy, route
identity as metadata and stat prefix, tracing and its collector cluster (the incremental build
equal to a full one when telemetry changes), and Envoy stats named with Gateway API names."""

from __future__ import annotations

import msgspec
from envoy.config.trace.v3 import opentelemetry_pb2
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from gateweave import ir
from gateweave.api.decode import decode
from gateweave.snapshot import Snapshot
from gateweave.telemetry.prometheus import histogram
from gateweave.telemetry.stats import EnvoyStats, name_stats, parse
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.incremental import IncrementalTranslator
from gateweave.xds import telemetry
from gateweave.xds.build import build
from gateweave.xds.incremental import GatewaySnapshots
from gateweave.xds.resources import stat_name
from gateweave.xds.snapshot_cache import make_snapshot

replace = msgspec.structs.replace
TRACING = ir.Tracing(collector_host="127.0.0.1", collector_port=4317, sampling_percent=25)


def _gateway() -> ir.XdsGateway:
    backend = ir.WeightedCluster(cluster="ns/svc/80", weight=1)
    route = ir.Route(
        name="httproute/ns/app/rule/1/match/0", match=ir.RouteMatch(), backends=(backend,)
    )
    misdirected = ir.Route(
        name="ns/gw/80/misdirected/x.test", match=ir.RouteMatch(), direct_status=421
    )
    vhost = ir.VirtualHost(
        name="ns/gw/80/app.test", domains=("app.test",), routes=(route, misdirected)
    )
    http = ir.Port(
        name="ns/gw/80",
        port=80,
        protocol="HTTP",
        http=ir.RouteConfig(name="ns/gw/80", virtual_hosts=(vhost,)),
    )
    tcp = ir.Port(
        name="ns/gw/9000",
        port=9000,
        protocol="TCP",
        tcp=ir.TCPProxy(name="ns/gw/9000", backends=(backend,), route="TCPRoute/ns/echo"),
    )
    cluster = ir.Cluster(name="ns/svc/80", endpoints=(ir.Endpoint(address="127.0.0.1", port=8080),))
    return ir.XdsGateway(name="ns/gw", address="127.10.0.1", ports=(http, tcp), clusters=(cluster,))


def test_route_identity_names_gateway_api_routes_only() -> None:
    assert telemetry.route_identity("httproute/ns/app/rule/3/match/1") == ("HTTPRoute/ns/app", "3")
    assert telemetry.route_identity("grpcroute/ns/g/rule/0/match/0/backends/1") == (
        "GRPCRoute/ns/g",
        "0",
    )
    assert telemetry.route_identity("ns/gw/443/https/misdirected/a.test") is None


def test_every_proxy_logs_and_routes_carry_their_identity() -> None:
    res = build(_gateway())
    route = res.routes["ns/gw/80"].virtual_hosts[0].routes
    meta = route[0].metadata.filter_metadata[telemetry.METADATA_NAMESPACE]
    assert (meta["route"], meta["rule"]) == ("HTTPRoute/ns/app", "1")
    assert meta["stat"] == stat_name("httproute/ns/app/rule/1/match/0")
    assert not route[1].HasField("metadata")
    # no per-route statistics scope: Envoy would build one per route on every route table load
    assert not route[0].stat_prefix and not route[1].stat_prefix
    dump = str(res.listeners["ns/gw/80"]) + str(res.listeners["ns/gw/9000"])
    assert dump.count("envoy.access_loggers.file") == 2 and "TCPRoute/ns/echo" in dump
    off = build(replace(_gateway(), telemetry=ir.Telemetry(access_log=ir.ACCESS_LOG_OFF)))
    off_dump = str(off.listeners["ns/gw/80"]) + str(off.listeners["ns/gw/9000"])
    assert (
        "envoy.access_loggers.file" not in off_dump
        and "envoy.access_loggers.stdout" not in off_dump
    )
    # the per-route response counter stays: it is a statistic, not a log
    assert (
        off_dump.count("envoy.access_loggers.stats") == 1
        and "%METADATA(ROUTE:gateweave:stat)%" in off_dump
    )
    stdout = build(replace(_gateway(), telemetry=ir.Telemetry(access_log=ir.ACCESS_LOG_STDOUT)))
    assert "envoy.access_loggers.stdout" in str(stdout.listeners["ns/gw/80"])


def test_text_format_writes_the_same_fields_as_key_value_pairs() -> None:
    res = build(replace(_gateway(), telemetry=ir.Telemetry(access_log_format=ir.ACCESS_LOG_TEXT)))
    hcm = hcm_pb2.HttpConnectionManager()
    res.listeners["ns/gw/80"].filter_chains[0].filters[0].typed_config.Unpack(hcm)
    logger = file_pb2.FileAccessLog()
    hcm.access_log[0].typed_config.Unpack(logger)
    line = logger.log_format.text_format_source.inline_string
    assert not logger.log_format.HasField("json_format") and line.endswith("\n")
    pairs = dict(pair.split("=", 1) for pair in line.split())
    assert pairs["gateway"] == "ns/gw" and pairs["listener"] == "ns/gw/80"
    assert (
        pairs["response_code"] == "%RESPONSE_CODE%"
        and pairs["path"] == "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"
    )
    assert "%DURATION%" in str(res.listeners["ns/gw/9000"]) and "route=TCPRoute/ns/echo" in str(
        res.listeners["ns/gw/9000"]
    )


def test_tracing_adds_the_tracer_and_its_collector_cluster() -> None:
    plain = build(_gateway())
    assert telemetry.TRACING_CLUSTER not in plain.clusters
    traced = build(replace(_gateway(), telemetry=ir.Telemetry(tracing=TRACING)))
    assert telemetry.TRACING_CLUSTER in traced.clusters
    assert traced.clusters[telemetry.TRACING_CLUSTER].load_assignment.endpoints  # resolved by Envoy
    hcm = hcm_pb2.HttpConnectionManager()
    assert traced.listeners["ns/gw/80"].filter_chains[0].filters[0].typed_config.Unpack(hcm)
    assert hcm.tracing.provider.name == "envoy.tracers.opentelemetry"
    assert hcm.tracing.random_sampling.value == 25
    otel = opentelemetry_pb2.OpenTelemetryConfig()
    assert hcm.tracing.provider.typed_config.Unpack(otel)
    assert otel.grpc_service.envoy_grpc.cluster_name == telemetry.TRACING_CLUSTER


def test_incremental_build_follows_a_telemetry_change() -> None:
    gw = _gateway()
    builder = GatewaySnapshots()
    for telem in (
        ir.Telemetry(),
        ir.Telemetry(tracing=TRACING),
        ir.Telemetry(access_log=ir.ACCESS_LOG_OFF),
        ir.Telemetry(access_log_format=ir.ACCESS_LOG_TEXT),
    ):
        changed = replace(gw, telemetry=telem)  # the same Port instances: only telemetry differs
        assert builder.snapshot(changed) == make_snapshot(build(changed).by_type())


def test_translate_hands_every_gateway_the_options_telemetry() -> None:
    objects = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "c"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {
                "gatewayClassName": "c",
                "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}],
            },
        },
    ]
    telem = ir.Telemetry(access_log=ir.ACCESS_LOG_STDOUT, tracing=TRACING)
    snapshot = Snapshot.from_objects(decode(raw)[0].model for raw in objects)  # type: ignore[union-attr]
    result = translate(snapshot, TranslateOptions(telemetry=telem))
    assert result.xds["ns/gw"].telemetry == telem
    assert IncrementalTranslator()(snapshot, TranslateOptions(telemetry=telem)).xds == result.xds


def test_envoy_stats_are_named_with_gateway_api_names() -> None:
    prefix = stat_name("httproute/ns/app/rule/1/match/0")
    body = msgspec.json.encode(
        {
            "stats": [
                # responses by route and code (the listener's stats access logger), whoever answered
                {
                    "name": f"gateweave.route_rq.listener.ns_gw_80.route.{prefix}.code.200",
                    "value": 3,
                },
                {
                    "name": f"gateweave.route_rq.listener.ns_gw_80.route.{prefix}.code.204",
                    "value": 1,
                },
                {
                    "name": f"gateweave.route_rq.listener.ns_gw_80.route.{prefix}.code.500",
                    "value": 1,
                },
                {
                    "name": "gateweave.route_rq.listener.ns_gw_80.route..code.404",
                    "value": 2,
                },  # no route: the listener's
                {
                    "name": f"gateweave.route_rq.listener.ns_gw_80.route.{prefix}.code.0",
                    "value": 1,
                },  # no response
                {
                    "name": f"gateweave.route_rq.listener.ns_gw_80.route.{prefix}_unknown.code.200",
                    "value": 1,
                },
                # the route's own stats count only what went upstream: not read for counts
                {"name": f"vhost.ns/gw/80/app.test.route.{prefix}.upstream_rq_2xx", "value": 9},
                {"name": "http.ns_gw_80.downstream_rq_4xx", "value": 2},
                {"name": "cluster.ns_svc_80.upstream_rq_2xx", "value": 4},
                {"name": "cluster.xds_cluster.upstream_rq_2xx", "value": 9},
                {"name": "server.state", "value": 0},
                {
                    "histograms": {
                        "details": [
                            {
                                "name": f"gateweave.route_rq_time.listener.ns_gw_80.route.{prefix}",
                                "totals": [
                                    {"lower_bound": 2, "width": 1, "count": 3},
                                    {"lower_bound": 40, "width": 5, "count": 2},
                                ],
                            },
                            {  # requests without route: the listener's, not a route's
                                "name": "gateweave.route_rq_time.listener.ns_gw_80.route.",
                                "totals": [{"lower_bound": 1, "width": 1, "count": 7}],
                            },
                        ]
                    }
                },
            ]
        }
    )
    traffic = name_stats(
        {"ns/gw": parse(body), "ns/gone": EnvoyStats({}, {})}, {"ns/gw": _gateway()}
    )
    key = ("ns/gw", "ns/gw/80", "HTTPRoute/ns/app", "1")
    assert traffic.routes == {key: {"2xx": 4, "5xx": 1}}
    assert traffic.listeners == {("ns/gw", "ns/gw/80"): {"4xx": 2}}
    assert traffic.backends == {("ns/gw", "ns/svc/80"): {"2xx": 4}}
    buckets, total = histogram(traffic.route_times[key])
    by_le = dict(buckets)
    assert (by_le["0.001"], by_le["0.005"], by_le["0.05"], by_le["+Inf"]) == (0, 3, 5, 5)
    assert abs(total - (3 * 2.5 + 2 * 42.5) / 1000) < 1e-9
