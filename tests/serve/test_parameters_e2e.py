"""GatewayParameters, live: ``gateweave serve`` with host Envoys in a network namespace the
test makes. Two Gateways of one class: the class's parameters set concurrency 2, one Gateway
overrides it with 3 (then 4, which restarts its Envoy), each running Envoy says so on its
admin ``/server_info``; invalid parameters are reported (a missing reference, a wrong kind,
a schema error located at its line) while the rest keeps serving."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.netns import Netns
from tests.support.netserve import Serve, condition, until, write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

PARAMS = "gateweave.io/v1alpha1"


def params(name: str, envoy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": PARAMS,
        "kind": "GatewayParameters",
        "metadata": h.meta(name),
        "spec": {"envoy": envoy},
    }


def gateway(name: str, port: int, ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": h.CLASS,
        "listeners": [h.listener("http", "HTTP", port)],
    }
    if ref is not None:
        spec["infrastructure"] = {"parametersRef": ref}
    return {"apiVersion": f"{h.G}/v1", "kind": "Gateway", "metadata": h.meta(name), "spec": spec}


def ref(name: str, kind: str = "GatewayParameters", group: str = "gateweave.io") -> dict[str, Any]:
    return {"group": group, "kind": kind, "name": name}


def concurrency(serve: Serve, gateway: str) -> int | None:
    try:
        info = json.loads(serve.envoy_admin_get("/server_info", f"default/{gateway}"))
    except (LookupError, OSError, AssertionError, ValueError):
        return None  # not (yet) running
    return int(info["command_line_options"]["concurrency"])


def test_class_defaults_and_a_gateway_override_reach_the_running_envoys(
    ns: Netns, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    gc = h.gateway_class()
    gc["spec"]["parametersRef"] = {**ref("defaults"), "namespace": "default"}
    write(
        config / "objects.yaml",
        [
            gc,
            params("defaults", {"concurrency": 2, "logLevel": "info"}),
            params("override", {"concurrency": 3}),
            gateway("plain", 8080),
            gateway("tuned", 8081, ref("override")),
            gateway("missing", 8082, ref("nowhere")),
            gateway("wrong-kind", 8083, ref("cfg", kind="ConfigMap", group="")),
        ],
    )
    serve = Serve(ns, config, tmp_path / "serve.log")
    try:
        until(
            lambda: concurrency(serve, "plain") == 2,
            30,
            "plain runs with the class's concurrency 2",
            serve,
        )
        until(
            lambda: concurrency(serve, "tuned") == 3,
            30,
            "tuned runs with its own concurrency 3",
            serve,
        )
        for (
            pid
        ) in serve.envoys():  # the class's log level reaches both (the override does not set one)
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            assert cmd[cmd.index("--log-level") + 1] == "info"
        for name, message in (
            (
                "missing",
                "infrastructure.parametersRef gateweave.io/GatewayParameters default/nowhere does "
                "not exist",
            ),
            (
                "wrong-kind",
                "infrastructure.parametersRef /ConfigMap default/cfg: gateweave reads parameters "
                "of kind "
                "gateweave.io/GatewayParameters only",
            ),
        ):
            accepted = until(
                functools.partial(gateway_condition, serve, name, "Accepted"),
                10,
                f"{name} has a status",
                serve,
            )
            assert (accepted["status"], accepted["reason"], accepted["message"]) == (
                "False",
                "InvalidParameters",
                message,
            )
        assert len(serve.envoys()) == 2  # no Envoy for the Gateways with invalid parameters

        # a schema error: refused with its line, the last accepted version kept
        plain_pid = [p for p in serve.envoys() if concurrency_pid(p) == 2]
        docs = [d for d in load(config / "objects.yaml") if d["metadata"]["name"] != "override"]
        write(config / "objects.yaml", [*docs, params("override", {"concurrency": 0})])
        text = (config / "objects.yaml").read_text()
        line = text[: text.index("concurrency: 0")].count("\n") + 1
        errors = until(
            lambda: (serve.api("/api/errors") or {}).get("items"), 10, "the error is listed", serve
        )
        assert f"objects.yaml:{line}" in json.dumps(
            errors
        ) and "spec.envoy.concurrency" in json.dumps(errors), errors
        assert concurrency(serve, "tuned") == 3

        # a new value restarts the overridden Gateway's Envoy only
        write(config / "objects.yaml", [*docs, params("override", {"concurrency": 4})])
        until(
            lambda: concurrency(serve, "tuned") == 4,
            30,
            "tuned restarted with concurrency 4",
            serve,
        )
        assert [p for p in serve.envoys() if concurrency_pid(p) == 2] == plain_pid
        assert not (serve.api("/api/errors") or {}).get("items")
    finally:
        serve.stop()


def gateway_condition(serve: Serve, name: str, type_: str) -> dict[str, Any] | None:
    return condition(serve.get("Gateway", "default", name), type_)


def concurrency_pid(pid: int) -> int:
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return int(cmd[cmd.index("--concurrency") + 1])


def load(path: Path) -> list[dict[str, Any]]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]
