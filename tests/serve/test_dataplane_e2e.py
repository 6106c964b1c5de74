"""The data plane end to end: ``serve`` on a directory, real Envoys, real backends, real clients.

Every change is made by writing files; every check goes through Envoy on a fresh
connection (or through the admin API for status). Each test's Gateway has its own
loopback address (127.40.1.x), so ports never collide between tests.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.echo import echo_through
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import programmed, until

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
STEP_LIMIT = 1.0  # seconds from a file write to Envoy serving the change


def base(
    address: str, listeners: list[dict[str, Any]], backends: dict[str, Any]
) -> list[dict[str, Any]]:
    return [
        h.gateway_class(),
        h.gateway("gw", address, listeners),
        *h.service("svc-a", 80, backends["A"].port),
        *h.service("svc-b", 80, backends["B"].port),
        *h.service("svc-echo", 9000, backends["echo"].port),
    ]


def answers(
    address: str,
    port: int,
    path: str,
    host: str,
    *,
    status: int = 200,
    body: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> Callable[[], Awaitable[h.Reply | None]]:
    async def probe() -> h.Reply | None:
        reply = await h.fetch(address, port, path, host, tls=tls)
        if reply is None or reply.status != status or (body is not None and reply.body != body):
            return None
        return reply

    return probe


def assert_gone(pids: set[int]) -> None:
    assert pids, "no Envoy was seen running"
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state != "Z":
            alive.append(pid)
    assert not alive, f"Envoy still running after serve stopped: {alive}"


# ---------------------------------------------------------------- routes


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_route_appears_changes_and_disappears_within_a_second(
    tmp_path: Path, backends: dict[str, Any], delta: bool
) -> None:
    ip = "127.40.1.11" if delta else "127.40.1.1"
    port = free_port(ip)
    h.write_manifests(
        tmp_path / "base.yaml", base(ip, [h.listener("http", "HTTP", port)], backends)
    )
    route = tmp_path / "route.yaml"
    steps: dict[str, float] = {}
    async with h.running_serve(
        tmp_path, delta=delta, check_incremental=CHECK_INCREMENTAL
    ) as served:
        await until(programmed(served, "True"), 10, "the Gateway is programmed")
        await until(answers(ip, port, "/a", "app.test", status=404), 2, "no route: 404")

        h.write_manifests(
            route,
            [h.http_route("app", "gw", ["app.test"], [h.rule("/a", [h.backend_ref("svc-a", 80)])])],
        )
        _, steps["appears"] = await until(
            answers(ip, port, "/a", "app.test", body="A"), 5, "route to A"
        )

        h.write_manifests(
            route,
            [h.http_route("app", "gw", ["app.test"], [h.rule("/a", [h.backend_ref("svc-b", 80)])])],
        )
        _, steps["backend changes"] = await until(
            answers(ip, port, "/a", "app.test", body="B"), 5, "route to B"
        )

        h.write_manifests(
            route,
            [h.http_route("app", "gw", ["app.test"], [h.rule("/b", [h.backend_ref("svc-b", 80)])])],
        )
        _, steps["path changes"] = await until(
            answers(ip, port, "/b", "app.test", body="B"), 5, "/b to B"
        )
        assert await answers(ip, port, "/a", "app.test", status=404)() is not None

        route.unlink()
        _, steps["disappears"] = await until(
            answers(ip, port, "/b", "app.test", status=404), 5, "route gone"
        )
        served.envoy_pids()
    print(
        "file write -> Envoy serving",
        "(delta):" if delta else "(sotw):",
        {k: f"{v * 1000:.0f} ms" for k, v in steps.items()},
    )
    assert all(v < STEP_LIMIT for v in steps.values()), steps
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- HTTPS


def self_signed(hostname: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


async def test_https_terminates_with_the_secret_certificate_by_sni(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    ip = "127.40.1.2"
    port = free_port(ip)
    cert, key = self_signed("secure.test")
    https = h.listener(
        "https",
        "HTTPS",
        port,
        hostname="secure.test",
        tls={"mode": "Terminate", "certificateRefs": [{"name": "tls-cert"}]},
    )
    h.write_manifests(
        tmp_path / "base.yaml", [*base(ip, [https], backends), h.tls_secret("tls-cert", cert, key)]
    )
    h.write_manifests(
        tmp_path / "route.yaml",
        [
            h.http_route(
                "secure",
                "gw",
                ["secure.test"],
                [h.rule("/", [h.backend_ref("svc-a", 80)])],
                section="https",
            )
        ],
    )
    client = ssl.create_default_context(
        cadata=cert.decode()
    )  # verifies the chain and the host name
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        reply, _ = await until(
            answers(ip, port, "/x", "secure.test", body="A", tls=client), 10, "HTTPS route to A"
        )
        assert reply.headers["x-path"] == "/x"
        # Another SNI matches no filter chain: the handshake fails.
        assert await h.fetch(ip, port, "/", "other.test", tls=ssl.create_default_context()) is None
        served.envoy_pids()
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- weights


async def test_weighted_split_follows_the_weights(tmp_path: Path, backends: dict[str, Any]) -> None:
    ip = "127.40.1.3"
    port = free_port(ip)
    h.write_manifests(
        tmp_path / "base.yaml", base(ip, [h.listener("http", "HTTP", port)], backends)
    )
    weighted = h.rule(
        "/", [h.backend_ref("svc-a", 80, weight=3), h.backend_ref("svc-b", 80, weight=1)]
    )
    h.write_manifests(
        tmp_path / "route.yaml", [h.http_route("split", "gw", ["split.test"], [weighted])]
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await until(answers(ip, port, "/", "split.test"), 10, "the split route answers")
        replies = await asyncio.gather(
            *(h.fetch(ip, port, f"/{i}", "split.test") for i in range(200))
        )
        served.envoy_pids()
    bodies = [r.body if r is not None and r.status == 200 else None for r in replies]
    assert None not in bodies
    share = bodies.count("A") / len(bodies)
    print(f"weighted 3:1 -> A {share:.2%}, B {1 - share:.2%} of {len(bodies)} requests")
    assert 0.65 <= share <= 0.85, share  # 3 sigma is about +-0.09 around 0.75
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- TCP


async def test_tcp_route_reaches_the_echo_backend(tmp_path: Path, backends: dict[str, Any]) -> None:
    ip = "127.40.1.4"
    port = free_port(ip)
    h.write_manifests(tmp_path / "base.yaml", base(ip, [h.listener("tcp", "TCP", port)], backends))
    h.write_manifests(
        tmp_path / "route.yaml",
        [h.tcp_route("echo", "gw", "tcp", [h.backend_ref("svc-echo", 9000)])],
    )
    payload = os.urandom(16).hex().encode() * 64

    async def echoed() -> bytes | None:
        got = await echo_through(ip, port, payload)
        return got if got == payload else None

    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await until(echoed, 10, "bytes echoed through the TCP listener")
        served.envoy_pids()
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- NACK


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_nack_shows_in_status_keeps_the_last_good_config_and_clears(
    tmp_path: Path, backends: dict[str, Any], delta: bool
) -> None:
    ip = "127.40.1.15" if delta else "127.40.1.5"
    good_port, taken_port = free_port(ip), free_port(ip)
    good = h.listener("http", "HTTP", good_port)
    h.write_manifests(tmp_path / "base.yaml", base(ip, [good], backends))
    route = tmp_path / "route.yaml"
    h.write_manifests(
        route,
        [h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("svc-a", 80)])])],
    )
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        async with h.running_serve(
            tmp_path, delta=delta, check_incremental=CHECK_INCREMENTAL
        ) as served:
            await until(programmed(served, "True"), 10, "the Gateway is programmed")
            await until(
                answers(ip, good_port, "/", "app.test", body="A"), 5, "the good listener serves"
            )

            holder.bind((ip, taken_port))
            holder.listen()
            taken = h.listener("http-2", "HTTP", taken_port)
            h.write_manifests(tmp_path / "base.yaml", base(ip, [good, taken], backends))
            cond, _ = await until(programmed(served, "False"), 5, "Programmed=False after the NACK")
            assert cond["reason"] == "Invalid", cond
            assert "Address already in use" in cond["message"], cond
            assert served.xds.server.status("default/gw").error is not None
            # The last good configuration keeps serving.
            assert (await answers(ip, good_port, "/", "app.test", body="A")()) is not None

            # A change that leaves the listeners as they were does not clear it: the
            # rejected listener is sent again now and then, and rejected again while the
            # port stays taken.
            h.write_manifests(
                route,
                [
                    h.http_route(
                        "app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("svc-b", 80)])]
                    )
                ],
            )
            await until(
                answers(ip, good_port, "/", "app.test", body="B"), 2, "the route change is served"
            )
            assert await programmed(served, "False")() is not None

            # Fixing the file (the second listener on a free port) clears it.
            holder.close()
            fixed_port = free_port(ip)
            fixed = h.listener("http-2", "HTTP", fixed_port)
            h.write_manifests(tmp_path / "base.yaml", base(ip, [good, fixed], backends))
            cond, _ = await until(
                programmed(served, "True"), 5, "Programmed=True once the file is fixed"
            )
            assert cond["reason"] == "Programmed"
            await until(
                answers(ip, fixed_port, "/", "app.test", body="B"), 2, "the second listener serves"
            )
            assert await h.fetch(ip, taken_port, "/", "app.test") is None  # never bound
            served.envoy_pids()
    finally:
        holder.close()
    assert_gone(served.pids_seen)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_a_nack_from_outside_the_configuration_clears_when_its_cause_goes(
    tmp_path: Path, backends: dict[str, Any], delta: bool
) -> None:
    """Envoy rejected a listener because another process held its port; once the port is
    free, the rejected configuration is sent again (backoff) and the Gateway gets programmed,
    with no change to any file."""
    ip = "127.40.1.25" if delta else "127.40.1.35"
    good_port, taken_port = free_port(ip), free_port(ip)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((ip, taken_port))
    holder.listen()
    listeners = [h.listener("http", "HTTP", good_port), h.listener("http-2", "HTTP", taken_port)]
    h.write_manifests(tmp_path / "base.yaml", base(ip, listeners, backends))
    h.write_manifests(
        tmp_path / "route.yaml",
        [h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("svc-a", 80)])])],
    )
    try:
        async with h.running_serve(
            tmp_path, delta=delta, check_incremental=CHECK_INCREMENTAL
        ) as served:
            cond, _ = await until(
                programmed(served, "False", "Invalid"), 10, "Programmed=False after the NACK"
            )
            assert "Address already in use" in cond["message"], cond
            # While the port stays taken the listener is sent again with a doubling backoff
            # (1 s, 2 s, ...): within the next 3.5 s, one or two more NACKs, not a storm.
            registry = served.runtime.metrics.registry
            listener_url = "type.googleapis.com/envoy.config.listener.v3.Listener"

            def nacks() -> float:
                return (
                    registry.get_sample_value(
                        "gateweave_xds_nacks_total", {"type_url": listener_url}
                    )
                    or 0.0
                )

            before = nacks()
            await asyncio.sleep(3.5)
            assert 1 <= nacks() - before <= 2, (before, nacks())
            assert await programmed(served, "False", "Invalid")() is not None
            holder.close()
            cond, _ = await until(
                programmed(served, "True"), 15, "Programmed=True once the port is free"
            )
            assert cond["reason"] == "Programmed"
            await until(
                answers(ip, taken_port, "/", "app.test", body="A"),
                5,
                "the listener serves on the freed port",
            )
            await until(
                answers(ip, good_port, "/", "app.test", body="A"),
                2,
                "the other listener still serves",
            )
            served.envoy_pids()
    finally:
        holder.close()
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- Programmed follows the ACK


async def test_programmed_only_once_envoy_acknowledged(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    ip = "127.40.1.6"
    port = free_port(ip)
    h.write_manifests(
        tmp_path / "base.yaml", base(ip, [h.listener("http", "HTTP", port)], backends)
    )
    h.write_manifests(
        tmp_path / "route.yaml",
        [h.http_route("app", "gw", ["app.test"], [h.rule("/", [h.backend_ref("svc-a", 80)])])],
    )
    seen: list[tuple[str, str]] = []
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            gw = await served.get("Gateway", "gw")
            cond = h.condition(gw, "Programmed") if gw else None
            if cond is None:
                await asyncio.sleep(0.005)
                continue
            seen.append((cond["status"], cond["reason"]))
            if cond["status"] == "True":
                # At the moment status says so, Envoy has ACKed and serves on the first try.
                assert served.xds.server.status("default/gw").acked
                reply = await h.fetch(ip, port, "/", "app.test")
                assert reply is not None and reply.body == "A", reply
                break
            await asyncio.sleep(0.005)
        served.envoy_pids()
    assert seen and seen[-1] == ("True", "Programmed"), seen
    assert seen[0][0] != "True" and seen[0][1] == "Pending", (
        seen
    )  # before Envoy connected and ACKed
    assert_gone(served.pids_seen)


# ---------------------------------------------------------------- shutdown


async def test_stopping_serve_stops_every_envoy(tmp_path: Path, backends: dict[str, Any]) -> None:
    ips = ["127.40.1.7", "127.40.1.8"]
    docs = base(ips[0], [h.listener("http", "HTTP", free_port(ips[0]))], backends)
    docs.append(h.gateway("gw-2", ips[1], [h.listener("http", "HTTP", free_port(ips[1]))]))
    h.write_manifests(tmp_path / "base.yaml", docs)
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:

        async def both_running() -> set[int] | None:
            pids = served.envoy_pids()
            return pids if len(pids) == 2 else None

        pids, _ = await until(both_running, 10, "two Envoys running")
        for pid in pids:
            os.kill(pid, 0)  # alive now
    assert served.pids_seen == pids
    assert_gone(pids)


# ---------------------------------------------------------------- the latency benchmark


def test_latency_benchmark_measures_both_sources() -> None:
    from gateweave_bench.latency import measure_event_to_envoy

    report = measure_event_to_envoy(routes=5, samples=3, timeout=10)
    for mode in ("store", "file"):
        summary = report[mode]["summary"]
        assert summary["total"]["n"] == 3
        assert 0 < summary["total"]["p50"] < 1000, summary
        assert {"coalesce", "translate", "publish", "envoy_ack"} <= summary.keys()
    assert "watch" in report["file"]["summary"] and "watch" not in report["store"]["summary"]
    assert report["translations"] >= 6  # one per change at least
    for mode in ("store", "file"):
        # a route's change re-sends its RouteConfiguration and nothing else (no Listener,
        # Cluster or ClusterLoadAssignment that did not change)
        assert set(report[mode]["pushes_per_change"]) == {"RouteConfiguration"}, report[mode]
        assert report[mode]["pushes_per_change"]["RouteConfiguration"] >= 1
        assert report[mode]["summary"]["envoy_cpu"]["n"] == 3  # Envoy's main thread, read
