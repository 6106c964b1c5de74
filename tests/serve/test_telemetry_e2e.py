"""Seeing the traffic end to end: ``serve`` with a real Envoy, requests and a TCP session
through it, read back from the access log (each field), ``gateweave logs`` (and ``-f``),
``/metrics`` and ``/api/traffic``; and OpenTelemetry spans arriving at an in-test collector."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from gateweave import ir
from gateweave.infra.host import free_port
from gateweave.telemetry import EnvoyId
from gateweave_bench import harness as h
from tests.support.cli import invoke
from tests.support.echo import echo_through
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import samples

pytestmark = pytest.mark.timeout(90)

T = TypeVar("T")
GATEWAY = "default/gw"


async def until(probe: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        got = await probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


def manifests(
    ip: str, http_port: int, tcp_port: int, backends: dict[str, Any]
) -> list[dict[str, Any]]:
    listeners = [h.listener("http", "HTTP", http_port), h.listener("tcp", "TCP", tcp_port)]
    return [
        h.gateway_class(),
        h.gateway("gw", ip, listeners),
        *h.service("svc-a", 80, backends["A"].port),
        *h.service("svc-b", 80, backends["B"].port),
        *h.service("svc-echo", 9000, backends["echo"].port),
        # "ready" takes the readiness probes, so "app" counts exactly what the test sends
        h.http_route("ready", "gw", ["ready.test"], [h.rule("/", [h.backend_ref("svc-a", 80)])]),
        h.http_route(
            "app",
            "gw",
            ["app.test"],
            [
                h.rule("/a", [h.backend_ref("svc-a", 80)]),
                h.rule("/b", [h.backend_ref("svc-b", 80)]),
            ],
        ),
        h.tcp_route("echo", "gw", "tcp", [h.backend_ref("svc-echo", 9000)]),
        # answered by Envoy itself: a missing backend's 500 and a redirect
        h.http_route(
            "direct",
            "gw",
            ["direct.test"],
            [
                h.rule("/broken", [h.backend_ref("svc-missing", 80)]),
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
                    "filters": [
                        {
                            "type": "RequestRedirect",
                            "requestRedirect": {"hostname": "elsewhere.test", "statusCode": 302},
                        }
                    ],
                },
            ],
        ),
    ]


def log_lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


async def test_access_log_metrics_traffic_and_logs(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, backends: dict[str, Any]
) -> None:
    ip = "127.40.2.1"
    http_port, tcp_port = free_port(ip), free_port(ip)
    h.write_manifests(tmp_path / "all.yaml", manifests(ip, http_port, tcp_port, backends))
    payload = os.urandom(8).hex().encode() * 8
    state = tmp_path_factory.mktemp("state")
    async with h.running_serve(
        tmp_path, check_incremental=CHECK_INCREMENTAL, state_dir=state
    ) as served:
        admin = served.admin.url

        async def ready() -> bool:
            reply = await h.fetch(ip, http_port, "/", "ready.test")
            return reply is not None and reply.status == 200

        await until(ready, 15, "the Gateway answers")
        async with httpx.AsyncClient(timeout=10, headers=served.admin.headers) as client:
            before = (await client.get(f"{admin}/api/traffic")).json()
            assert "HTTPRoute/default/app" not in before["routes"]

            statuses = [(await h.fetch(ip, http_port, "/a", "app.test")) for _ in range(5)]
            statuses += [(await h.fetch(ip, http_port, "/b?q=1", "app.test")) for _ in range(2)]
            missing = await h.fetch(ip, http_port, "/nowhere", "app.test")
            direct = [(await h.fetch(ip, http_port, "/broken", "direct.test")) for _ in range(4)]
            direct += [(await h.fetch(ip, http_port, "/moved", "direct.test")) for _ in range(3)]
            assert [r.status if r else None for r in direct] == [500] * 4 + [302] * 3
            assert [r.status if r else None for r in statuses] == [200] * 7
            assert missing is not None and missing.status == 404
            assert await echo_through(ip, tcp_port, payload) == payload

            # ---- the access log, read back field by field
            envoys = served.admin.envoys
            assert envoys is not None
            path = envoys.access_log(GATEWAY)
            assert (
                path == state / "envoys" / "default_gw" / "access.log"
            )  # the Gateway's file in the state directory

            async def all_logged() -> list[dict[str, Any]] | None:
                lines = log_lines(path)
                app_lines = [line for line in lines if line.get("authority") == "app.test"]
                tcp_lines = [line for line in lines if line.get("protocol") == "TCP"]
                return lines if len(app_lines) == 8 and tcp_lines else None

            lines = await until(all_logged, 15, "8 requests and a TCP session in the access log")
            first = next(line for line in lines if line.get("path") == "/a")
            assert first["gateway"] == GATEWAY
            assert first["listener"] == f"{GATEWAY}/{http_port}"
            assert (first["route"], first["rule"]) == ("HTTPRoute/default/app", "0")
            assert (first["method"], first["authority"], first["protocol"]) == (
                "GET",
                "app.test",
                "HTTP/1.1",
            )
            assert (first["response_code"], first["response_flags"]) == (200, "-")
            assert first["upstream_host"] == f"127.0.0.1:{backends['A'].port}"
            assert first["backend"]  # the IR's cluster name of svc-a:80
            assert isinstance(first["duration_ms"], int)
            assert first["bytes_received"] == 0 and first["bytes_sent"] == len("A")
            assert len(first["request_id"]) >= 32
            assert first["start_time"].startswith(time.strftime("%Y-", time.gmtime()))
            b_line = next(line for line in lines if line.get("path") == "/b?q=1")
            assert (b_line["route"], b_line["rule"], b_line["upstream_host"]) == (
                "HTTPRoute/default/app",
                "1",
                f"127.0.0.1:{backends['B'].port}",
            )
            nr = next(line for line in lines if line.get("path") == "/nowhere")
            assert (
                nr["response_code"],
                nr["response_flags"],
                nr["route"],
                nr["upstream_host"],
            ) == (404, "NR", None, None)
            tcp = next(line for line in lines if line.get("protocol") == "TCP")
            assert tcp["gateway"] == GATEWAY and tcp["listener"] == f"{GATEWAY}/{tcp_port}"
            assert tcp["route"] == "TCPRoute/default/echo"
            assert tcp["upstream_host"] == f"127.0.0.1:{backends['echo'].port}"
            assert tcp["bytes_received"] == len(payload) and tcp["bytes_sent"] == len(payload)

            # ---- /metrics: exactly the requests each rule took, by response class
            text = (await client.get(f"{admin}/metrics")).text
            routes = samples(text, "gateweave_route_requests_total")
            labels = {
                "gateway": GATEWAY,
                "listener": f"{GATEWAY}/{http_port}",
                "route": "HTTPRoute/default/app",
            }
            assert (
                routes[tuple(sorted({**labels, "rule": "0", "response_class": "2xx"}.items()))] == 5
            )
            assert (
                routes[tuple(sorted({**labels, "rule": "1", "response_class": "2xx"}.items()))] == 2
            )
            assert not [
                k
                for k in routes
                if dict(k)["route"] == "HTTPRoute/default/app"
                and dict(k)["response_class"] != "2xx"
            ]
            # responses Envoy answers itself count for their route too
            direct_labels = {**labels, "route": "HTTPRoute/default/direct"}
            assert (
                routes[
                    tuple(sorted({**direct_labels, "rule": "0", "response_class": "5xx"}.items()))
                ]
                == 4
            )
            assert (
                routes[
                    tuple(sorted({**direct_labels, "rule": "1", "response_class": "3xx"}.items()))
                ]
                == 3
            )
            assert len([k for k in routes if dict(k)["route"] == "HTTPRoute/default/direct"]) == 2

            async def timed(route_labels: dict[str, str]) -> float | None:
                # Envoy merges its histograms on its stats flush (every 5 s)
                text = (await client.get(f"{admin}/metrics")).text
                counts = samples(text, "gateweave_route_request_duration_seconds_count")
                return counts.get(tuple(sorted(route_labels.items())))

            assert await until(lambda: timed({**labels, "rule": "0"}), 15, "rule 0's times") == 5
            # what Envoy answers itself is timed for its route too (the 4 direct 500s)
            direct_timed = await until(
                lambda: timed({**direct_labels, "rule": "0"}), 15, "the direct rule's times"
            )
            assert direct_timed == 4
            # every Envoy statistic passed through, its generated names relabelled
            upstream = samples(text, "envoy_cluster_upstream_rq_total")
            b_labels = {
                "gateway": GATEWAY,
                "backend": b_line["backend"],
                "envoy_response_code": "200",
            }
            assert upstream[tuple(sorted(b_labels.items()))] == 2
            assert not [
                k
                for k in upstream
                if "envoy_cluster_name" in dict(k)
                and dict(k)["envoy_cluster_name"] != "xds_cluster"
            ]
            listener = samples(text, "gateweave_listener_requests_total")
            assert (
                listener[
                    (
                        ("gateway", GATEWAY),
                        ("listener", f"{GATEWAY}/{http_port}"),
                        ("response_class", "4xx"),
                    )
                ]
                == 1
            )
            assert (
                listener[
                    (
                        ("gateway", GATEWAY),
                        ("listener", f"{GATEWAY}/{http_port}"),
                        ("response_class", "5xx"),
                    )
                ]
                == 4
            )
            assert "envoy_gateweave_route_rq" not in text  # named above, not passed through

            # ---- /api/traffic: counts and a rate since the reading before the traffic
            traffic = (await client.get(f"{admin}/api/traffic")).json()
            app = traffic["routes"]["HTTPRoute/default/app"]
            assert (app["requests"], app["errors"]) == (7, 0)
            assert app["rules"]["0"]["requests"] == 5 and app["rules"]["1"]["requests"] == 2
            assert app["rate"] > 0 and app["error_rate"] == 0
            broken = traffic["routes"]["HTTPRoute/default/direct"]
            assert (broken["requests"], broken["errors"]) == (7, 4) and broken["error_rate"] > 0
            assert (broken["rules"]["0"]["errors"], broken["rules"]["1"]["requests"]) == (4, 3)
            assert traffic["window_s"] > 0
            assert traffic["gateways"][GATEWAY]["requests"] >= 15
            async with client.stream("GET", f"{admin}/api/traffic/stream") as stream:
                event = ""
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        event = line[len("data: ") :]
                        break
            assert json.loads(event)["routes"]["HTTPRoute/default/app"]["requests"] == 7

        # ---- gateweave status: each route's rates from the running server
        code, out, _ = await asyncio.to_thread(
            invoke,
            "status",
            "--admin-address",
            admin.removeprefix("http://"),
            "--admin-token-file",
            str(state / "admin-token"),
        )
        assert code == 0 and "REQ/S" in out and "ERR/S" in out

        # ---- gateweave logs: the file as written, then followed
        code, out, _ = await asyncio.to_thread(
            invoke,
            "logs",
            GATEWAY,
            "--admin-address",
            admin.removeprefix("http://"),
            "--state-dir",
            str(state),
        )
        assert code == 0
        assert out.encode() == path.read_bytes()
        follower = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from gateweave.cli import main; main()",
            "logs",
            GATEWAY,
            "-f",
            "--admin-address",
            admin.removeprefix("http://"),
            "--state-dir",
            str(state),
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert follower.stdout is not None
            for _ in lines:  # what was written already
                await asyncio.wait_for(follower.stdout.readline(), 20)
            reply = await h.fetch(ip, http_port, "/a/followed", "app.test")
            assert reply is not None and reply.status == 200
            followed = json.loads(await asyncio.wait_for(follower.stdout.readline(), 20))
            assert (followed["path"], followed["route"]) == ("/a/followed", "HTTPRoute/default/app")
        finally:
            follower.kill()
            await follower.wait()
        code, _, err = await asyncio.to_thread(
            invoke,
            "logs",
            "default/nope",
            "--admin-address",
            admin.removeprefix("http://"),
            "--state-dir",
            str(state),
        )
        assert code == 1 and "no access log for Gateway default/nope" in err


# ---------------------------------------------------------------- tracing


class Collector:
    """An OTLP/gRPC trace collector: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.services: set[str] = set()  # the service.name of every resource that sent spans
        self.server = grpc.aio.server()

        async def export(request: Any, context: Any) -> Any:
            # xds-protos ships OTLP's messages of before "scope_spans" was renamed from
            # "instrumentation_library_spans" (same field number: the wire is the same).
            for resource_spans in request.resource_spans:
                self.services.update(
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                )
                for scope_spans in resource_spans.instrumentation_library_spans:
                    self.spans.extend(scope_spans.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

        handler = grpc.unary_unary_rpc_method_handler(
            export,
            request_deserializer=trace_service_pb2.ExportTraceServiceRequest.FromString,
            response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}
                )
            ]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")


async def test_traces_reach_the_collector(tmp_path: Path, backends: dict[str, Any]) -> None:
    ip = "127.40.2.2"
    http_port, tcp_port = free_port(ip), free_port(ip)
    h.write_manifests(tmp_path / "all.yaml", manifests(ip, http_port, tcp_port, backends))
    collector = Collector()
    await collector.server.start()
    tracing = ir.Tracing(
        collector_host="127.0.0.1", collector_port=collector.port, sampling_percent=100
    )
    try:
        async with h.running_serve(
            tmp_path, check_incremental=CHECK_INCREMENTAL, telemetry=ir.Telemetry(tracing=tracing)
        ) as served:

            async def traced() -> bool:
                reply = await h.fetch(ip, http_port, "/a/traced", "app.test")
                return reply is not None and reply.status == 200

            await until(traced, 15, "the Gateway answers")
            assert served.admin.envoys is not None

            async def span() -> Any:
                return next(
                    (
                        s
                        for s in collector.spans
                        if any(
                            a.key == "http.url" and "/a/traced" in a.value.string_value
                            for a in s.attributes
                        )
                    ),
                    None,
                )

            got = await until(span, 30, "a span for /a/traced at the collector")
            assert len(got.trace_id) == 16 and got.name
    finally:
        await collector.server.stop(0)


def test_serve_refuses_a_bad_telemetry_option(tmp_path: Path) -> None:
    assert invoke("serve", "--config-dir", str(tmp_path), "--access-log", "syslog")[0] == 2
    assert invoke("serve", "--config-dir", str(tmp_path), "--tracing-endpoint", "collector")[0] == 2
    assert (
        invoke(
            "serve",
            "--config-dir",
            str(tmp_path),
            "--tracing-endpoint",
            "c:4317",
            "--tracing-sampling",
            "101",
        )[0]
        == 2
    )


# ---------------------------------------------------------------- per Gateway, through
# GatewayParameters


def telemetry_params(name: str, telemetry: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": h.meta(name),
        "spec": {"telemetry": telemetry},
    }


def gateway_with(name: str, ip: str, port: int, params: str | None) -> dict[str, Any]:
    gw = h.gateway(name, ip, [h.listener("http", "HTTP", port)])
    if params is not None:
        gw["spec"]["infrastructure"] = {
            "parametersRef": {"group": "gateweave.io", "kind": "GatewayParameters", "name": params}
        }
    return gw


def text_lines(path: Path) -> list[dict[str, str]]:
    """A text access log's lines, each as its key=value pairs."""
    try:
        return [
            dict(pair.split("=", 1) for pair in line.split())
            for line in path.read_text().splitlines()
        ]
    except FileNotFoundError:
        return []


async def test_parameters_set_each_gateways_access_log_and_tracing(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    """Three Gateways of one class: "loud" logs JSON (serve's default), "texty"'s parameters log
    text, "quiet"'s turn its access log off and trace to the collector; then parameters with
    invalid values are refused at their field and the Gateway naming them is InvalidParameters;
    at last texty's parameters change to JSON, which its running Envoy follows."""
    ips = {"loud": "127.40.2.3", "texty": "127.40.2.4", "quiet": "127.40.2.5"}
    ports = {name: free_port(ip) for name, ip in ips.items()}
    collector = Collector()
    await collector.server.start()
    docs = [
        h.gateway_class(),
        *h.service("svc-a", 80, backends["A"].port),
        telemetry_params("texty", {"accessLog": {"format": "text"}}),
        telemetry_params(
            "quiet",
            {
                "accessLog": {"sink": "off"},
                "tracing": {"endpoint": f"127.0.0.1:{collector.port}", "samplingRate": 100},
            },
        ),
        gateway_with("loud", ips["loud"], ports["loud"], None),
        gateway_with("texty", ips["texty"], ports["texty"], "texty"),
        gateway_with("quiet", ips["quiet"], ports["quiet"], "quiet"),
        *(
            h.http_route(name, name, [f"{name}.test"], [h.rule("/", [h.backend_ref("svc-a", 80)])])
            for name in ips
        ),
    ]
    h.write_manifests(tmp_path / "all.yaml", docs)
    try:
        async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
            for name, ip in ips.items():

                async def ready(name: str = name, ip: str = ip) -> bool:
                    reply = await h.fetch(ip, ports[name], "/ready", f"{name}.test")
                    return reply is not None and reply.status == 200

                await until(ready, 20, f"Gateway {name} answers")
            for name, ip in ips.items():
                for _ in range(3):
                    reply = await h.fetch(ip, ports[name], f"/{name}", f"{name}.test")
                    assert reply is not None and reply.status == 200
            envoys = served.admin.envoys
            assert envoys is not None
            found = {name: envoys.access_log(f"default/{name}") for name in ips}
            paths = {name: path for name, path in found.items() if path is not None}
            assert paths.keys() == ips.keys()

            async def loud_logged() -> list[dict[str, Any]] | None:
                lines = [line for line in log_lines(paths["loud"]) if line.get("path") == "/loud"]
                return lines if len(lines) == 3 else None

            async def texty_logged() -> list[dict[str, str]] | None:
                lines = [
                    line for line in text_lines(paths["texty"]) if line.get("path") == "/texty"
                ]
                return lines if len(lines) == 3 else None

            loud = (await until(loud_logged, 15, "3 JSON lines of loud"))[0]
            assert (loud["gateway"], loud["route"], loud["response_code"]) == (
                "default/loud",
                "HTTPRoute/default/loud",
                200,
            )
            texty = (await until(texty_logged, 15, "3 text lines of texty"))[0]
            assert (texty["gateway"], texty["listener"]) == (
                "default/texty",
                f"default/texty/{ports['texty']}",
            )
            assert (texty["route"], texty["rule"], texty["method"]) == (
                "HTTPRoute/default/texty",
                "0",
                "GET",
            )
            assert (texty["response_code"], texty["response_flags"]) == ("200", "-")
            assert texty["upstream_host"] == f"127.0.0.1:{backends['A'].port}"
            with pytest.raises(json.JSONDecodeError):
                json.loads(paths["texty"].read_text().splitlines()[0])

            # quiet traces (and only quiet: the others have no tracer), and logs nothing
            async def quiet_span() -> Any:
                return next(
                    (
                        s
                        for s in collector.spans
                        if any(
                            a.key == "http.url" and "/quiet" in a.value.string_value
                            for a in s.attributes
                        )
                    ),
                    None,
                )

            await until(quiet_span, 30, "a span of quiet's request at the collector")
            urls = [
                a.value.string_value
                for s in collector.spans
                for a in s.attributes
                if a.key == "http.url"
            ]
            assert not [u for u in urls if "/loud" in u or "/texty" in u], urls
            assert collector.services == {"gateweave/default/quiet"}
            assert not paths["quiet"].exists()
            admins = envoys.stats_addresses()  # a host Envoy's: its admin
            async with httpx.AsyncClient(timeout=5) as client:
                for name in ips:
                    dump = (
                        await client.get(
                            f"http://{admins[EnvoyId(f'default/{name}')]}/config_dump?resource=dynamic_listeners"
                        )
                    ).text
                    assert ("envoy.tracers.opentelemetry" in dump) == (name == "quiet"), name

            # invalid values: refused at their field (the last accepted state stays); a Gateway
            # naming parameters never accepted is InvalidParameters
            bad = telemetry_params(
                "bad", {"tracing": {"endpoint": "collector", "samplingRate": 150}}
            )
            h.write_manifests(
                tmp_path / "all.yaml", [*docs, bad, gateway_with("late", "127.40.2.6", 8080, "bad")]
            )
            text = (tmp_path / "all.yaml").read_text()

            async def errors() -> str | None:
                async with httpx.AsyncClient(timeout=5, headers=served.admin.headers) as client:
                    items = (await client.get(f"{served.admin.url}/api/errors")).json()["items"]
                return json.dumps(items) if items else None

            listed = await until(errors, 10, "the refused parameters are listed")
            for field, needle in (
                ("spec.telemetry.tracing.endpoint", "endpoint: collector"),
                ("spec.telemetry.tracing.samplingRate", "samplingRate: 150"),
            ):
                line = text[: text.index(needle)].count("\n") + 1
                assert f"all.yaml:{line}" in listed and field in listed, listed

            async def late_accepted() -> Mapping[str, Any] | None:
                obj = await served.get("Gateway", "late")
                return h.condition(obj, "Accepted") if obj else None

            accepted = await until(late_accepted, 10, "late has a status")
            assert (accepted["status"], accepted["reason"]) == ("False", "InvalidParameters")
            assert "default/bad does not exist" in accepted["message"]
            reply = await h.fetch(ips["quiet"], ports["quiet"], "/quiet", "quiet.test")
            assert reply is not None and reply.status == 200

            # a change of the parameters reaches the running Envoy: texty now writes JSON
            docs = [
                d
                for d in docs
                if (d["kind"], d["metadata"]["name"]) != ("GatewayParameters", "texty")
            ]
            h.write_manifests(
                tmp_path / "all.yaml",
                [*docs, telemetry_params("texty", {"accessLog": {"format": "json"}})],
            )

            async def texty_json() -> dict[str, Any] | None:
                await h.fetch(ips["texty"], ports["texty"], "/texty/json", "texty.test")
                for line in paths["texty"].read_text().splitlines():
                    if line.startswith("{") and json.loads(line).get("path") == "/texty/json":
                        return json.loads(line)
                return None

            assert (await until(texty_json, 15, "texty's JSON line"))["gateway"] == "default/texty"
    finally:
        await collector.server.stop(0)
