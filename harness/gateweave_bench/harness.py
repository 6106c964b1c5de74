"""Parts for driving ``gateweave serve`` with real Envoys: backends, a client, manifests, a runner.

* :class:`NameServer`: an HTTP/1.1 backend on loopback answering every request 200 with
  its own name (body and ``x-backend`` header); :class:`EchoServer`: a TCP echo.
* :func:`fetch_sync` / :func:`fetch`: one request on a fresh connection (optionally TLS
  with SNI), the reply parsed.
* Manifest builders (plain dicts) and :func:`write_manifests`, an atomic file write.
* :func:`running_serve`: :func:`gateweave.app.run` with host Envoys in the current
  event loop, for the life of an ``async with``; every Envoy it started is gone after.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import socket
import socketserver
import ssl
import tempfile
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateweave import app, ir
from gateweave.admin import AdminServer
from gateweave.infra.host import HostInfra
from gateweave.runtime import Runtime, TranslateFn
from gateweave.sinks.hostinfra import HostInfraSink
from gateweave.sinks.xds import XdsPublisher

G = "gateway.networking.k8s.io"
CLASS = "gateweave"
CONTROLLER = "gateweave.io/gateway-controller"

# ---------------------------------------------------------------- backends


class _NameHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY
    server: _NameHTTPServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = self.server.name.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-backend", self.server.name)
        self.send_header("x-path", self.path)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _NameHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    name = ""


class _UnixNameHandler(_NameHandler):
    disable_nagle_algorithm = False  # not TCP


class _UnixNameHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    name = ""


class NameServer:
    """An HTTP backend on ``host`` (``port``: 0 for a free one), or on the unix socket
    ``unix``, answering with ``name``."""

    def __init__(
        self, name: str, host: str = "127.0.0.1", port: int = 0, *, unix: str | None = None
    ) -> None:
        self.name = name
        self._server: _NameHTTPServer | _UnixNameHTTPServer
        if unix is not None:
            self._server = _UnixNameHTTPServer(unix, _UnixNameHandler)
            self.host, self.port = unix, 0
        else:
            self._server = _NameHTTPServer((host, port), _NameHandler)
            self.host, self.port = host, int(self._server.server_address[1])
        self._server.name = name
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(5)
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                sock.sendall(data)


class _EchoTCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class EchoServer:
    """A TCP echo backend on ``host``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._server = _EchoTCPServer((host, 0), _EchoHandler)
        self.host, self.port = host, int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)


# ---------------------------------------------------------------- client


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: str


def fetch_sync(
    address: str,
    port: int,
    path: str = "/",
    host: str = "example.com",
    *,
    tls: ssl.SSLContext | None = None,
    sni: str | None = None,
    timeout: float = 2.0,
    source: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply | None:
    """``GET path`` with ``Host: host`` (and ``headers``) on a fresh connection, from the
    address ``source`` if given; ``None`` if it fails (refused, reset...)."""
    chunks: list[bytes] = []
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    try:
        bind = (source, 0) if source is not None else None
        with socket.create_connection((address, port), timeout=timeout, source_address=bind) as raw:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = tls.wrap_socket(raw, server_hostname=sni or host) if tls is not None else raw
            with sock:
                request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
                sock.sendall(request.encode())
                while not _complete(b"".join(chunks)) and (data := sock.recv(65536)):
                    chunks.append(data)
    except OSError:  # ssl.SSLError too; a reset after the reply still leaves the reply
        if not chunks:
            return None
    return _parse(b"".join(chunks))


def _complete(data: bytes) -> bool:
    """Whether ``data`` holds a whole response (read until EOF when it has no length):
    Envoy delays closing after a local reply, so reading to EOF would wait for that."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        return body.endswith(b"0\r\n\r\n")
    for line in lower.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip() == b"content-length":
            return len(body) >= int(value.strip() or b"0")
    return False


def _parse(data: bytes) -> Reply | None:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", ""):
        body = _dechunk(body)
    return Reply(int(parts[1]), headers, body.decode("utf-8", "replace"))


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


async def fetch(
    address: str,
    port: int,
    path: str = "/",
    host: str = "example.com",
    *,
    tls: ssl.SSLContext | None = None,
    sni: str | None = None,
    timeout: float = 2.0,
    source: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply | None:
    """:func:`fetch_sync` in a worker thread (the event loop keeps serving)."""
    return await asyncio.to_thread(
        fetch_sync,
        address,
        port,
        path,
        host,
        tls=tls,
        sni=sni,
        timeout=timeout,
        source=source,
        headers=headers,
    )


# ---------------------------------------------------------------- manifests


def meta(name: str, namespace: str | None = "default", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def gateway_class(name: str = CLASS, controller: str = CONTROLLER) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/v1",
        "kind": "GatewayClass",
        "metadata": meta(name, None),
        "spec": {"controllerName": controller},
    }


def gateway(
    name: str, address: str, listeners: Iterable[Mapping[str, Any]], namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/v1",
        "kind": "Gateway",
        "metadata": meta(name, namespace),
        "spec": {
            "gatewayClassName": CLASS,
            "addresses": [{"type": "IPAddress", "value": address}],
            "listeners": [dict(lst) for lst in listeners],
        },
    }


def listener(name: str, protocol: str, port: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "protocol": protocol, "port": port, **extra}


def service(
    name: str, port: int, target_port: int, address: str = "127.0.0.1", namespace: str = "default"
) -> list[dict[str, Any]]:
    """A Service and the EndpointSlice that points it at ``address:target_port``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(name, namespace),
            "spec": {"ports": [{"name": "p", "port": port, "targetPort": target_port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": meta(f"{name}-1", namespace, labels={"kubernetes.io/service-name": name}),
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "p", "port": target_port, "protocol": "TCP"}],
        },
    ]


def backend_ref(name: str, port: int, weight: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": port}
    if weight is not None:
        out["weight"] = weight
    return out


def http_route(
    name: str,
    gateway_name: str,
    hostnames: Iterable[str],
    rules: Iterable[Mapping[str, Any]],
    *,
    section: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": gateway_name}
    if section:
        parent["sectionName"] = section
    return {
        "apiVersion": f"{G}/v1",
        "kind": "HTTPRoute",
        "metadata": meta(name, namespace),
        "spec": {
            "parentRefs": [parent],
            "hostnames": list(hostnames),
            "rules": [dict(r) for r in rules],
        },
    }


def rule(
    path: str, backends: Iterable[Mapping[str, Any]], *, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A PathPrefix rule to ``backends``, optionally setting response headers."""
    out: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "backendRefs": [dict(b) for b in backends],
    }
    if headers:
        out["filters"] = [
            {
                "type": "ResponseHeaderModifier",
                "responseHeaderModifier": {
                    "set": [{"name": k, "value": v} for k, v in headers.items()]
                },
            }
        ]
    return out


def tcp_route(
    name: str,
    gateway_name: str,
    section: str,
    backends: Iterable[Mapping[str, Any]],
    namespace: str = "default",
) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/v1alpha2",
        "kind": "TCPRoute",
        "metadata": meta(name, namespace),
        "spec": {
            "parentRefs": [{"name": gateway_name, "sectionName": section}],
            "rules": [{"backendRefs": [dict(b) for b in backends]}],
        },
    }


def tls_secret(
    name: str, cert_pem: bytes, key_pem: bytes, namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(name, namespace),
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(cert_pem).decode(),
            "tls.key": base64.b64encode(key_pem).decode(),
        },
    }


def write_manifests(path: Path, docs: Iterable[Mapping[str, Any]]) -> None:
    """Write ``docs`` as one multi-document YAML file, atomically (a hidden temp file, renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False))
    os.replace(tmp, path)


# ---------------------------------------------------------------- objects read back


def condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The condition ``type_`` of an object's top-level status (Gateway, GatewayClass)."""
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == type_:
            return dict(cond)
    return None


# ---------------------------------------------------------------- serve


@dataclass
class Served:
    """A running ``serve``: its runtime, admin API and (with a data plane) the host Envoys."""

    runtime: Runtime
    admin: AdminServer
    pids_seen: set[int] = field(default_factory=set)

    @property
    def infra(self) -> HostInfra:
        sink = self.runtime.infra_sink
        assert isinstance(sink, HostInfraSink)
        return sink.infra

    @property
    def xds(self) -> XdsPublisher:
        sink = self.runtime.xds_sink
        assert isinstance(sink, XdsPublisher)
        return sink

    def envoy_pids(self) -> set[int]:
        """PIDs of the Envoys running now (also remembered in :attr:`pids_seen`)."""
        pids = {p.pid for p in self.infra.processes().values() if p.pid is not None}
        self.pids_seen |= pids
        return pids

    async def objects(self, kind: str | None = None) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=5.0) as client:
            items: list[dict[str, Any]] = (
                await client.get(f"{self.admin.url}/api/objects", headers=self.admin.headers)
            ).json()["items"]
        return [o for o in items if kind is None or o.get("kind") == kind]

    async def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        for obj in await self.objects(kind):
            md = obj["metadata"]
            if md["name"] == name and md.get("namespace", "") == (
                namespace if kind != "GatewayClass" else ""
            ):
                return obj
        return None


@contextlib.asynccontextmanager
async def running_serve(
    config_dir: str | Path,
    *,
    delta: bool = False,
    window: float = 0.05,
    debounce_ms: int = 50,
    check_incremental: bool = False,
    translator: TranslateFn | None = None,
    start_timeout: float = 10.0,
    stop_timeout: float = 15.0,
    telemetry: ir.Telemetry | None = None,
    state_dir: str | Path | None = None,
) -> AsyncIterator[Served]:
    """Run :func:`gateweave.app.run` on ``config_dir`` with host Envoys (``delta``: on the delta
    xDS protocol; admin on a free loopback port; ``state_dir``: its state directory, else a
    temporary one removed afterwards) until the block exits; then stop it, and kill any
    Envoy left behind."""
    temporary = None if state_dir is not None else tempfile.mkdtemp(prefix="gateweave-state-")
    stop = asyncio.Event()
    started: asyncio.Future[Served] = asyncio.get_running_loop().create_future()

    def on_started(running: app.App) -> None:
        if not started.done():
            started.set_result(Served(running.runtime, running.admin))

    settings = app.Settings(
        provider=app.FileSettings(str(config_dir), debounce_ms=debounce_ms),
        dataplane=app.HostDataplane(state_dir=str(state_dir or temporary), delta=delta),
        admin=app.AdminSettings("127.0.0.1:0"),
        runtime=app.RuntimeSettings(window=window, check_incremental=check_incremental),
        telemetry=telemetry or ir.Telemetry(),
    )
    hooks = app.Hooks(stop=stop, on_started=on_started, translator=translator)
    task = asyncio.create_task(app.run(settings, hooks))
    served: Served | None = None
    try:
        waiters: list[asyncio.Future[Any]] = [started, task]
        done, _ = await asyncio.wait(
            waiters, timeout=start_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if task in done:
            task.result()  # raises what serve raised
            raise RuntimeError("serve returned before it started")
        if started not in done:
            raise TimeoutError(f"serve did not start within {start_timeout} s")
        served = started.result()
        yield served
    finally:
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), stop_timeout)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            if served is not None and isinstance(served.runtime.infra_sink, HostInfraSink):
                served.infra.kill_all_sync()
            raise
        finally:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
