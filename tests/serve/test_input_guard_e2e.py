"""Issue 12, rule 1, where it matters: traffic. ``gateweave serve`` with a real Envoy and a
backend answering 200; a bad edit, an alias bomb or a named pipe in the directory never
takes the route down, never blocks serve, and the error is visible (``/api/errors``,
``/metrics``, ``gateweave status``) until the file is fixed."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from typer.testing import CliRunner

from gateweave.api import limits
from gateweave.cli import app
from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import name_servers, write_base
from tests.support.serveproc import ServeProcess

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, h.NameServer]]:
    with name_servers("A", "B") as servers:
        yield servers


def route_text(
    backend: str = "svc-a",
    *,
    api_version: str = "gateway.networking.k8s.io/v1",
    kind: str = "HTTPRoute",
    path_type: str = "PathPrefix",
    hostnames_key: str = "hostnames",
) -> str:
    # apiVersion on line 1, kind 2, hostnames 8, the path's type 13
    return (
        f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: app\n"
        f"spec:\n  parentRefs:\n  - name: gw\n  {hostnames_key}:\n  - app.test\n"
        f"  rules:\n  - matches:\n    - path:\n        type: {path_type}\n        value: /\n"
        f"    backendRefs:\n    - name: {backend}\n      port: 80\n"
    )


def write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def until(probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 15.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        got = await probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"not reached: {what}"
        await asyncio.sleep(0.02)


async def get_json(url: str, headers: dict[str, str]) -> Any:
    async with httpx.AsyncClient(timeout=5.0, headers=headers) as client:
        resp = await client.get(url)
        resp.raise_for_status()
        return resp.json()


def body_is(ip: str, port: int, body: str, host: str = "app.test") -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        reply = await h.fetch(ip, port, "/x", host)
        return reply is not None and reply.status == 200 and reply.body == body

    return probe


async def config_errors(served: h.Served) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await get_json(f"{served.admin.url}/api/errors", served.admin.headers)
    )["items"]
    return items


def error_metric(served: h.Served) -> float:
    return served.runtime.metrics.value("gateweave_config_errors")


# ---------------------------------------------------------------- the last accepted route keeps
# serving


BAD_EDITS = [
    ({"api_version": "gateway.networking.k8s.io/v2"}, 1, "no matches for kind"),
    ({"kind": "HTTPRoutes"}, 2, "did you mean HTTPRoute?"),
    ({"path_type": "Prefix"}, 13, 'Unsupported value: "Prefix"'),
    ({"hostnames_key": "hostname"}, 8, 'unknown field "spec.hostname"'),
]


async def test_a_rejected_edit_keeps_envoy_serving_the_last_accepted_route(
    tmp_path: Path, backends: dict[str, h.NameServer]
) -> None:
    ip = "127.40.12.1"
    port = free_port(ip)
    write_base(tmp_path, ip, port, backends)
    route = tmp_path / "route.yaml"
    write(route, route_text("svc-a"))
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await until(body_is(ip, port, "A"), "the route answers from A")
        for change, line, message in BAD_EDITS:
            write(
                route, route_text("svc-b", **change)
            )  # the edit also moves the route to B: must not apply

            async def located(line: int = line, message: str = message) -> bool:
                return any(
                    e["source"] == f"{route}:{line}" and message in e["message"]
                    for e in await config_errors(served)
                )

            await until(located, f"the error for {change} at route.yaml:{line}")
            for _ in range(20):  # the last accepted route: still A, still only for app.test
                assert await body_is(ip, port, "A")(), f"the route stopped serving after {change}"
            other = await h.fetch(ip, port, "/x", "other.test")
            assert other is not None and other.status == 404
            assert error_metric(served) >= 1
            metrics = (await asyncio.to_thread(httpx.get, f"{served.admin.url}/metrics")).text
            assert re.search(r"^gateweave_config_errors [1-9]", metrics, re.M)
            status = await asyncio.to_thread(
                CliRunner().invoke,
                app,
                ["status", "--admin-address", served.admin.url.removeprefix("http://")],
                env={"GATEWEAVE_ADMIN_TOKEN": served.admin.token},
            )
            assert "Configuration errors" in status.stdout and f"route.yaml:{line}" in status.stdout
            # fixed: the new version is served, the error is gone
            write(route, route_text("svc-b"))
            await until(body_is(ip, port, "B"), f"the fixed route answers from B after {change}")

            async def no_errors() -> bool:
                return await config_errors(served) == []

            await until(no_errors, "the error is gone")
            assert error_metric(served) == 0
            write(route, route_text("svc-a"))
            await until(body_is(ip, port, "A"), "back to A")
        served.envoy_pids()


# ---------------------------------------------------------------- an alias bomb does not block
# serve


async def test_an_alias_bomb_is_refused_while_serve_keeps_answering(
    tmp_path: Path, backends: dict[str, h.NameServer]
) -> None:
    ip = "127.40.12.2"
    port = free_port(ip)
    write_base(tmp_path, ip, port, backends)
    write(tmp_path / "route.yaml", route_text("svc-a"))
    names = "abcdefghi"
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{names[i]}: &{names[i]} [" + ",".join(f"*{names[i - 1]}" for _ in range(9)) + "]\n"
        for i in range(1, 9)
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await until(body_is(ip, port, "A"), "the route answers from A")
        write(tmp_path / "bomb.yaml", bomb)
        answered = 0
        while True:  # the admin API and the route answer all along
            health = await asyncio.to_thread(httpx.get, f"{served.admin.url}/healthz", timeout=5.0)
            assert health.status_code == 200
            assert await body_is(ip, port, "A")()
            answered += 1
            errors = await config_errors(served)
            if errors:
                break
            assert answered < 500, "the bomb was never reported"
        (err,) = errors
        assert err["source"] == f"{tmp_path}/bomb.yaml:6"
        assert err["message"] == f"aliases expand to more than {limits.MAX_ALIAS_NODES} nodes"
        # and the loop keeps taking changes
        write(tmp_path / "route.yaml", route_text("svc-b"))
        await until(body_is(ip, port, "B"), "a later change is served")
        (tmp_path / "bomb.yaml").unlink()

        async def no_errors() -> bool:
            return await config_errors(served) == []

        await until(no_errors, "the error is gone with the file")


# ---------------------------------------------------------------- a named pipe: no hang, SIGTERM
# still stops serve


async def test_a_named_pipe_neither_hangs_serve_nor_stops_sigterm(
    tmp_path: Path, backends: dict[str, h.NameServer]
) -> None:
    ip = "127.40.12.3"
    port = free_port(ip)
    write_base(tmp_path, ip, port, backends)
    write(tmp_path / "route.yaml", route_text("svc-a"))
    os.mkfifo(tmp_path / "x.yaml")  # there from the start: the first scan meets it
    server = ServeProcess("--config-dir", str(tmp_path))
    try:
        url = await asyncio.to_thread(server.wait_listening)
        await until(body_is(ip, port, "A"), "the route answers through Envoy", timeout=30)

        async def refused() -> list[dict[str, Any]]:
            return [
                e
                for e in await config_errors_at(url, server.headers)
                if e["source"].endswith("x.yaml:1")
            ]

        (err,) = await until(refused, "the pipe is reported")
        assert err["message"] == "refused: a named pipe; only regular files are read"
        write(tmp_path / "route.yaml", route_text("svc-b"))  # and the provider goes on
        await until(body_is(ip, port, "B"), "a change after the pipe is served")
        server.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(server.proc.wait, 30)
        assert code == 0, "\n".join(server.lines[-30:])
    finally:
        server.stop(signal.SIGKILL)


async def config_errors_at(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await get_json(f"{url}/api/errors", headers))["items"]
    return items
