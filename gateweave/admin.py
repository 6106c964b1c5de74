"""The admin HTTP API (loopback by default): objects with status, errors, IR, health, metrics.

* ``GET /api/objects``: ``{"items": [...]}``, every Gateway API object with its status
  (the shape of ``gateweave translate -o json``);
* ``GET /api/errors``: ``{"items": [...]}``, current configuration errors;
* ``GET /api/ir``: ``{"xds": {...}, "infra": {...}}`` of the last translation;
* ``GET /healthz``: 200 while the process runs; ``GET /readyz``: 200 once the first
  translation is published, 503 before;
* ``GET /metrics``: Prometheus text: gateweave's own metrics, then the data plane's
  (:mod:`gateweave.telemetry.prometheus`, read from every running Envoy);
* ``GET /api/traffic``: requests, errors and rates per route and Gateway
  (:mod:`gateweave.telemetry.traffic`); ``GET /api/traffic/stream``: the same object as
  server-sent events, one every :data:`STREAM_INTERVAL_S`;
* ``GET /api/logs/{namespace}/{name}[?follow=1]``: the Gateway's access log as written
  (JSON lines), and with ``follow`` what is appended, until the client goes away;
* ``GET /``: the dashboard (gateweave/dashboard), with its data at ``GET /api/graph`` and
  ``GET /api/object?kind=&namespace=&name=`` (one object of ``/api/objects``).

See docs/observability.md.

Every response passes :func:`guard`: a request whose ``Host`` is not a loopback name or
address (``localhost``, 127.0.0.0/8, ``::1``), the address the API is bound to, or the
address the connection was made to (a kubelet probing ``0.0.0.0:19000`` at the pod's IP) is
refused with 421: a web page whose DNS name was re-pointed at this machine (DNS rebinding)
sends its own name as ``Host`` and cannot read the API; and PEM private keys are blanked
from every body (gateweave/redact.py), so the IR, errors and explanations never carry a TLS
key out (streamed responses - traffic events, followed logs - are not rewritten: they hold
no keys).

Then every request but ``/healthz``, ``/readyz`` (probes) and ``/metrics`` (Prometheus; no
secrets; unless ``metrics_auth``) must carry the admin token (gateweave/admintoken.py):
``Authorization: Bearer <token>``, or the cookie the dashboard's ``/?token=<token>`` sets
(HttpOnly, SameSite=Strict: a browser cannot send a header when navigating); else 401 with
``WWW-Authenticate: Bearer`` and one line saying where the token is.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.typedefs import Middleware

from gateweave.admintoken import COOKIE, bearer, matches
from gateweave.api.decode import Decoded
from gateweave.api.kinds import Key
from gateweave.dashboard.handlers import Dashboard
from gateweave.metrics import CONTENT_TYPE_LATEST
from gateweave.output import render_objects
from gateweave.providers import ErrorBook
from gateweave.redact import redact
from gateweave.runtime import Runtime
from gateweave.telemetry import Envoys, accesslog, prometheus
from gateweave.telemetry.stats import PROMETHEUS_PATH, fetch
from gateweave.telemetry.traffic import TrafficMonitor

DEFAULT_ADMIN_ADDRESS = "127.0.0.1:19000"
STREAM_INTERVAL_S = 1.0


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"admin address {address!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def host_name(host: str) -> str:
    """The name or address of a ``Host`` header, without its port (``[::1]:80`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def loopback_host(host: str, bound: str, local: str = "") -> bool:
    """Whether ``host`` (a ``Host`` header) names this machine's loopback, ``bound`` (the
    address the admin API listens on) or ``local`` (the address the connection was made to)."""
    name = host_name(host)
    if name == "localhost" or name in {host_name(bound), host_name(local)} - {""}:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


OPEN_PATHS = frozenset({"/healthz", "/readyz"})  # kubelet probes: no token


def authorized(request: web.Request, token: str) -> bool:
    """Whether ``request`` carries ``token``: as a bearer header, or the dashboard's cookie."""
    return matches(bearer(request.headers.get("Authorization")), token) or matches(
        request.cookies.get(COOKIE), token
    )


def guard(bound: str, token: str, where: str, metrics_auth: bool = False) -> Middleware:
    """The middleware every admin response passes: the ``Host`` check, the token (``where``
    says the client where to find it), then redaction."""
    open_paths = OPEN_PATHS if metrics_auth else OPEN_PATHS | {"/metrics"}

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        sockname = (
            request.transport.get_extra_info("sockname") if request.transport is not None else None
        )
        local = sockname[0] if isinstance(sockname, tuple) else ""
        if not loopback_host(request.host, bound, local):
            return web.Response(
                status=421,
                text="misdirected request: Host must name this machine's loopback "
                "or the admin address\n",
            )
        if request.path == "/" and matches(request.query.get("token"), token):
            return dashboard_login(token)
        if request.path not in open_paths and not authorized(request, token):
            return web.Response(
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="gateweave"'},
                text=f"unauthorized: send Authorization: Bearer <token>; the token is in {where}\n",
            )
        response = await handler(request)
        if isinstance(response, web.Response) and isinstance(response.body, bytes):
            response.body = redact(response.body)
        return response

    return middleware


def dashboard_login(token: str) -> web.Response:
    """``/?token=<token>``: the cookie that authenticates the dashboard from now on, and a
    redirect to ``/`` (the token leaves the address bar and the history)."""
    response = web.Response(status=303, headers={"Location": "/"})
    response.set_cookie(COOKIE, token, path="/", httponly=True, samesite="Strict")
    return response


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(data), status=status, content_type="application/json"
    )


class AdminServer:
    def __init__(
        self,
        runtime: Runtime,
        errors: ErrorBook | None = None,
        address: str = DEFAULT_ADMIN_ADDRESS,
        token: str | None = None,
        token_where: str = "the admin token file",
        metrics_auth: bool = False,
    ) -> None:
        self.runtime = runtime
        # None: a random one (in-process users read it here, e.g. tests)
        self.token = token if token is not None else secrets.token_urlsafe(32)
        self.errors = errors if errors is not None else ErrorBook()
        self.host, self.port = parse_address(address)
        self._runner: web.AppRunner | None = None
        # The running Envoys (the host data plane's, or the Kubernetes data plane's pods), set
        # while there is a data plane.
        self.envoys: Envoys | None = None
        self.traffic = TrafficMonitor(lambda: self.envoys, self._xds)
        self.app = web.Application(
            middlewares=[guard(self.host, self.token, token_where, metrics_auth)]
        )
        self.app.add_routes(
            [
                web.get("/api/objects", self.objects),
                web.get("/api/errors", self.errors_view),
                web.get("/api/ir", self.ir),
                web.get("/api/explain/{kind}/{namespace}/{name}", self.explain),
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
                web.get("/metrics", self.metrics),
                web.get("/api/traffic", self.traffic_view),
                web.get("/api/traffic/stream", self.traffic_stream),
                web.get("/api/logs/{namespace}/{name}", self.logs),
            ]
        )
        self.app.add_routes(Dashboard(self).routes())  # the page at /, /api/graph

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> tuple[str, int]:
        """Start listening; returns the bound (host, port) (port 0 picks a free one)."""
        # Streams (traffic events, followed logs) run until their client leaves: on shutdown
        # they get this long, then are cancelled.
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return self.host, self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """What a client sends to be let in."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def dashboard_url(self) -> str:
        """The dashboard's address with the token (opening it sets the cookie)."""
        return f"{self.url}/?token={self.token}"

    # ------------------------------------------------------------ handlers

    def object_items(self, decoded: Iterable[Decoded] | None = None) -> list[dict[str, Any]]:
        """Every custom object (of ``decoded``, default all) with its current status: what
        ``/api/objects`` serves."""
        sink = self.runtime.status_sink

        def status_of(key: Key, _decoded: Decoded) -> Mapping[str, Any] | None:
            return sink.get(key)

        return render_objects(
            self.runtime.store.decoded_objects() if decoded is None else decoded, status_of
        )

    async def objects(self, request: web.Request) -> web.Response:
        return _json({"items": self.object_items()})

    async def errors_view(self, request: web.Request) -> web.Response:
        return _json({"items": [e.to_dict() for e in self.errors.all()]})

    async def ir(self, request: web.Request) -> web.Response:
        result = self.runtime.last_result
        if result is None:
            return _json({"xds": {}, "infra": {}})
        return _json({"xds": result.xds, "infra": result.infra})

    async def explain(self, request: web.Request) -> web.Response:
        """``gateweave explain`` against the current objects (and the data plane's reports)."""
        from gateweave.explain import explain

        rt = self.runtime
        m = request.match_info
        lines = explain(
            rt.store.snapshot(), rt.translation_options(), m["kind"], m["namespace"], m["name"]
        )
        return _json({"lines": lines})

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, request: web.Request) -> web.Response:
        if self.runtime.ready:
            return web.Response(text="ready\n")
        return web.Response(text="not ready: no translation published yet\n", status=503)

    async def metrics(self, request: web.Request) -> web.Response:
        addresses = self.envoys.stats_addresses() if self.envoys is not None else {}
        traffic, texts = await asyncio.gather(
            self.traffic.read(), fetch(addresses, PROMETHEUS_PATH)
        )
        passed = await asyncio.to_thread(prometheus.relabel, texts, self._xds())
        dataplane = prometheus.render(traffic, passed)
        resp = web.Response(body=self.runtime.metrics.render() + dataplane)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    def _xds(self) -> Mapping[str, Any]:
        result = self.runtime.last_result
        return result.xds if result is not None else {}

    async def traffic_view(self, request: web.Request) -> web.Response:
        return _json(await self.traffic.summary())

    async def traffic_stream(self, request: web.Request) -> web.StreamResponse:
        """The ``/api/traffic`` object as server-sent events, until the client goes away."""
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                data = msgspec.json.encode(await self.traffic.summary())
                await resp.write(b"data: " + data + b"\n\n")
                await asyncio.sleep(STREAM_INTERVAL_S)
        return resp

    async def logs(self, request: web.Request) -> web.StreamResponse:
        """A Gateway's access log file as written; ``?follow=1``: then what is appended."""
        gateway = f"{request.match_info['namespace']}/{request.match_info['name']}"
        path = self.envoys.access_log(gateway) if self.envoys is not None else None
        if path is None:
            why = (
                "no Envoy on this host runs it"
                if self.envoys is not None
                else "this server runs no Envoy on this host"
            )
            return _json({"error": f"no access log for Gateway {gateway}: {why}"}, status=404)
        follow = request.query.get("follow", "") not in ("", "0", "false")
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            async for chunk in accesslog.read(path, follow):
                await resp.write(chunk)
        return resp
