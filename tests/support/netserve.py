"""``gateweave serve`` run inside a network namespace a test made (:class:`Serve`), and what
the live tests ask of it: its admin API, its Envoys, answers from a Gateway, conditions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gateweave.admintoken import TOKEN_FILE, client_headers
from gateweave.infra.statedir import records
from gateweave_bench import harness as h
from tests.support.netns import Netns

T = TypeVar("T")
GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
ADMIN = ("127.0.0.1", 19000)  # serve's admin API, inside the namespace
GW_ADDRESS = "127.10.0.1"


class Serve:
    """``gateweave serve`` on ``config_dir`` inside ``ns`` (with host Envoys), its log kept."""

    def __init__(
        self,
        ns: Netns,
        config_dir: Path,
        log: Path,
        *args: str,
        prefix: Sequence[str] = (),
        state: Path | None = None,
    ) -> None:
        """``args``: more options of serve; ``prefix``: a command serve runs under (setpriv...);
        ``state``: its state directory (default: ``state`` beside the log)."""
        self.ns = ns
        self.log = log
        self.state = state or log.parent / "state"
        with log.open("wb") as out:
            self.proc = ns.popen(
                [
                    *prefix,
                    GATEWEAVE,
                    "--log-level",
                    "info",
                    "serve",
                    "--config-dir",
                    str(config_dir),
                    "--admin-address",
                    f"{ADMIN[0]}:{ADMIN[1]}",
                    "--state-dir",
                    str(self.state),
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def fetch(self, address: str, port: int, path: str, host: str) -> h.Reply | None:
        return self.ns.call(h.fetch_sync, address, port, path, host)

    def admin_get(self, path: str) -> h.Reply | None:
        """``GET path`` of the admin API, with the token serve wrote to its state directory."""
        token = (
            (self.state / TOKEN_FILE).read_text().strip()
            if (self.state / TOKEN_FILE).exists()
            else ""
        )
        return self.ns.call(
            h.fetch_sync, ADMIN[0], ADMIN[1], path, "127.0.0.1", headers=client_headers(token)
        )

    def api(self, path: str) -> Any:
        reply = self.admin_get(path)
        return None if reply is None or reply.status != 200 else json.loads(reply.body)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        objects = self.api("/api/objects") or {"items": []}
        return next(
            (
                o
                for o in objects["items"]
                if o["kind"] == kind
                and o["metadata"].get("namespace") == namespace
                and o["metadata"]["name"] == name
            ),
            None,
        )

    def envoys(self) -> list[int]:
        """PIDs of the Envoys this serve runs (recorded in its state directory)."""
        return [record.pid for record in records(self.state / "envoys", prune=False)]

    def envoy_admin(self, gateway: str | None = None) -> tuple[str, int]:
        """The admin address of the Envoy of ``gateway`` ("namespace/name"; None: the only
        one), from its bootstrap."""
        for pid in self.envoys():
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            boot = json.loads(Path(cmd[cmd.index("-c") + 1]).read_text())
            if gateway is None or boot["node"]["id"] == gateway:
                addr = boot["admin"]["address"]["socket_address"]
                return addr["address"], int(addr["port_value"])
        raise LookupError(f"no Envoy for {gateway}")

    def envoy_admin_get(self, path: str, gateway: str | None = None) -> str:
        host, port = self.envoy_admin(gateway)
        reply = self.fetch(host, port, path, host)
        assert reply is not None and reply.status == 200, path
        return reply.body

    def stop(self) -> None:
        envoys = self.envoys()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for (
            pid
        ) in envoys:  # normally stopped by serve already; never left behind in a deleted namespace
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"envoy"):
                    os.kill(pid, signal.SIGKILL)


def until(
    probe: Callable[[], T | None], timeout: float, what: str, serve: Serve | None = None
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if serve is not None:
            assert serve.proc.poll() is None, (
                f"serve exited ({serve.proc.returncode}):\n{serve.tail()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not within {timeout} s: {what}" + (f"\n{serve.tail()}" if serve else "")
            )
        time.sleep(0.05)


def gateway_address(serve: Serve, namespace: str, name: str, timeout: float = 30) -> str:
    """The first address in the Gateway's status, once it has one."""
    addresses = until(
        lambda: (
            (g := serve.get("Gateway", namespace, name)) and g.get("status", {}).get("addresses")
        ),
        timeout,
        "the Gateway has an address",
        serve,
    )
    return str(addresses[0]["value"])


def answers(
    serve: Serve,
    path: str,
    body: str | None = None,
    status: int = 200,
    host: str = "app.test",
    address: str = GW_ADDRESS,
    port: int = 8080,
) -> Callable[[], h.Reply | None]:
    def probe() -> h.Reply | None:
        reply = serve.fetch(address, port, path, host)
        if reply is None or reply.status != status or (body is not None and reply.body != body):
            return None
        return reply

    return probe


def condition(
    obj: dict[str, Any] | None, type_: str, parent: bool = False
) -> dict[str, Any] | None:
    if obj is None or "status" not in obj:
        return None
    conds = (
        obj["status"]["parents"][0]["conditions"] if parent else obj["status"].get("conditions", [])
    )
    return next((c for c in conds if c["type"] == type_), None)


def write(path: Path, docs: list[dict[str, Any]]) -> None:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
