"""mergeGateways, live: ``gateweave serve`` in a network namespace the test makes, a class
whose GatewayParameters set ``mergeGateways``. Its two Gateways (same port, two addresses)
are served by one Envoy process, each on its own address with its own routes, both
Programmed; removing one Gateway leaves the other served by the same Envoy and the removed
one's address refused."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave.translate.merging import node_of
from gateweave_bench import harness as h
from tests.support.netns import Netns
from tests.support.netserve import Serve, condition, until, write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

ADDRESSES = {"one": "127.10.0.11", "two": "127.10.0.12"}
PORT = 8080


@pytest.fixture
def ns() -> Iterator[Netns]:
    space = Netns({})
    try:
        yield space
    finally:
        space.close()


def objects(backend_port: int, gateways: list[str]) -> list[dict[str, Any]]:
    gc = h.gateway_class()
    gc["spec"]["parametersRef"] = {
        "group": "gateweave.io",
        "kind": "GatewayParameters",
        "name": "merged",
        "namespace": "default",
    }
    params = {
        "apiVersion": "gateweave.io/v1alpha1",
        "kind": "GatewayParameters",
        "metadata": h.meta("merged"),
        "spec": {"mergeGateways": True, "envoy": {"concurrency": 1}},
    }
    out: list[dict[str, Any]] = [gc, params, *h.service("app", 80, backend_port)]
    for name in gateways:
        out.append(h.gateway(name, ADDRESSES[name], [h.listener("http", "HTTP", PORT)]))
        route = h.http_route(
            f"r-{name}", name, [f"{name}.test"], [h.rule("/", [h.backend_ref("app", 80)])]
        )
        route["spec"]["rules"][0]["filters"] = [
            {
                "type": "ResponseHeaderModifier",
                "responseHeaderModifier": {"set": [{"name": "x-gateway", "value": name}]},
            }
        ]
        out.append(route)
    return out


def served_by(serve: Serve, name: str, host: str) -> str | None:
    """The x-gateway header of the answer on ``name``'s address for ``host``."""
    reply = serve.fetch(ADDRESSES[name], PORT, "/", host)
    if reply is None or reply.status != 200:
        return None
    return reply.headers.get("x-gateway")


def node_ids(serve: Serve) -> list[str]:
    out = []
    for pid in serve.envoys():
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        out.append(json.loads(Path(cmd[cmd.index("-c") + 1]).read_text())["node"]["id"])
    return out


def programmed(serve: Serve, name: str) -> bool:
    return (condition(serve.get("Gateway", "default", name), "Programmed") or {}).get(
        "status"
    ) == "True"


def test_two_gateways_of_a_merged_class_are_one_envoy_on_their_two_addresses(
    ns: Netns, tmp_path: Path
) -> None:
    backend = ns.call(h.NameServer, "app", "127.0.0.1")
    config = tmp_path / "config"
    config.mkdir()
    write(config / "objects.yaml", objects(backend.port, ["one", "two"]))
    serve = Serve(ns, config, tmp_path / "serve.log")
    try:
        until(
            lambda: served_by(serve, "one", "one.test") == "one",
            30,
            "Gateway one answers on its address",
            serve,
        )
        until(
            lambda: served_by(serve, "two", "two.test") == "two",
            10,
            "Gateway two answers on its address",
            serve,
        )
        assert (
            served_by(serve, "one", "two.test") is None
        )  # each address serves its own Gateway's routes
        until(
            lambda: programmed(serve, "one") and programmed(serve, "two"),
            10,
            "both Programmed",
            serve,
        )
        envoys = serve.envoys()
        assert len(envoys) == 1, envoys
        assert node_ids(serve) == [node_of(h.CLASS)]

        write(config / "objects.yaml", objects(backend.port, ["two"]))
        until(
            lambda: serve.fetch(ADDRESSES["one"], PORT, "/", "one.test") is None,
            10,
            "the removed Gateway's address is no longer served",
            serve,
        )
        assert served_by(serve, "two", "two.test") == "two"
        assert serve.envoys() == envoys  # the same Envoy process, not restarted
        assert programmed(serve, "two")
    finally:
        serve.stop()
        ns.call(backend.close)
