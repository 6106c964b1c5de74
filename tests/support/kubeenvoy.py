"""A real Envoy run as a pod of the Kubernetes data plane would run it, on this machine: the
quickstart objects for the API-server stand-in, the pod's bootstrap ConfigMap written where the
test can mount it (the same text, the mount paths moved), the Envoy process, and a wait for
its first good answer."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gateweave.infra.host import default_envoy_path
from gateweave.sinks.kubeinfra import BOOTSTRAP_DIR, XDS_CERT_DIR
from gateweave_bench import harness as h
from tests.support.data import QUICKSTART
from tests.support.kubeapi import KubeAPI

QUIET = ("--concurrency", "1", "--disable-hot-restart", "--log-level", "warn")


def quickstart(api: KubeAPI, backend_port: int = 18000) -> None:
    """The quickstart's objects (its Gateway without ``spec.addresses``, as Kubernetes
    addressing needs; its backend on ``backend_port``)."""
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            if doc["kind"] == "Gateway":
                del doc["spec"]["addresses"]
            if doc["kind"] == "EndpointSlice":
                doc["ports"][0]["port"] = backend_port
            api.put(doc)


def mount_config_map(
    config_map: Mapping[str, Any], boot_dir: Path, cert_dir: Path | None = None
) -> Path:
    """The ConfigMap's files in ``boot_dir`` (its mount path, and the xDS Secret's, moved to
    ``boot_dir`` and ``cert_dir``); the bootstrap's path."""
    boot_dir.mkdir(parents=True, exist_ok=True)
    for key, text in config_map["data"].items():
        text = text.replace(BOOTSTRAP_DIR, str(boot_dir))
        if cert_dir is not None:
            text = text.replace(XDS_CERT_DIR, str(cert_dir))
        (boot_dir / key).write_text(text)
    return boot_dir / "bootstrap.json"


@contextlib.contextmanager
def envoy(
    bootstrap: Path, log: Path, args: Sequence[str] = QUIET
) -> Iterator[subprocess.Popen[bytes]]:
    """Envoy on ``bootstrap`` with ``args`` (besides the config path), its output in ``log``;
    stopped on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [default_envoy_path(), "--config-path", str(bootstrap), *args],
            stdout=out,
            stderr=out,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """The first truthy value of ``check``, polled."""
    for _ in range(int(timeout / 0.02)):
        got = check()
        if got:
            return got
        await asyncio.sleep(0.02)
    raise TimeoutError("condition not met")


async def until_reply(
    probe: Callable[[], Awaitable[h.Reply | None]], timeout: float = 15.0
) -> h.Reply:
    """The first 200 reply of ``probe``."""
    for _ in range(int(timeout / 0.1)):
        reply = await probe()
        if reply is not None and reply.status == 200:
            return reply
        await asyncio.sleep(0.1)
    raise TimeoutError("no 200 from the Envoy")
