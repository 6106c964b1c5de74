"""The dashboard's routes on the admin server: the page, its two assets, ``/api/graph`` and
``/api/object`` (one object with its status, shown on a click).

Everything the page needs is in the package (``static/``): no external asset, no CDN, so it
works offline, and a Content-Security-Policy that lets it load and call nothing but the admin
server it came from. Read-only: every route is a GET.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from gateweave.api.kinds import Key
from gateweave.dashboard import graph
from gateweave.ir import Result

if TYPE_CHECKING:
    from gateweave.admin import AdminServer

_ASSETS = {
    "index.html": "text/html",
    "dashboard.css": "text/css",
    "dashboard.js": "text/javascript",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src "
        "'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> bytes:
    return resources.files("gateweave.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """``GET /`` (the page), ``GET /dashboard/<asset>``, ``GET /api/object``, ``GET /api/graph``
    (see
    :mod:`gateweave.dashboard.graph`; with an ETag, so that polling an unchanged system
    costs a 304, and built once for every page that polls it)."""

    def __init__(self, admin: AdminServer) -> None:
        self.admin = admin
        self.assets = {name: _asset(name) for name in _ASSETS}
        self._lock = asyncio.Lock()
        self._cached: _Built | None = None

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.index),
            web.get("/dashboard/{asset}", self.asset),
            web.get("/api/graph", self.graph),
            web.get("/api/object", self.object),
        ]

    async def index(self, request: web.Request) -> web.Response:
        return self._static("index.html")

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["asset"]
        if name not in _ASSETS or name == "index.html":
            raise web.HTTPNotFound()
        return self._static(name)

    def _static(self, name: str) -> web.Response:
        return web.Response(
            body=self.assets[name], content_type=_ASSETS[name], charset="utf-8", headers=_HEADERS
        )

    async def graph(self, request: web.Request) -> web.Response:
        body, etag = await self._graph()
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def object(self, request: web.Request) -> web.Response:
        """One object as ``/api/objects`` serves it (the page shows it on a click): ``?kind=K&
        namespace=NS&name=N`` (no namespace for a cluster-scoped kind)."""
        q = request.query
        stored = self.admin.runtime.store.get(
            Key(q.get("kind", ""), q.get("namespace", ""), q.get("name", ""))
        )
        items = self.admin.object_items([stored.decoded]) if stored is not None else []
        if not items:
            raise web.HTTPNotFound(text="no such object\n")
        return web.Response(body=msgspec.json.encode(items[0]), content_type="application/json")

    def _version(self) -> tuple[Any, ...]:
        """What the graph is a function of, cheaply: the last translation (held, so compared by
        identity), the store's change position, the status writes and the errors."""
        runtime = self.admin.runtime
        return (
            runtime.translations,
            runtime.store.changelog.position,
            runtime.metrics.value("gateweave_status_writes_total"),
            tuple(self.admin.errors.all()),
        )

    async def _graph(self) -> tuple[bytes, str]:
        """The encoded graph and its ETag: built again when what it is made of changed, but at
        most once per three build times (a big system's graph takes seconds to build; every
        open page polls), in a worker thread."""
        async with self._lock:
            cached = self._cached
            runtime = self.admin.runtime
            version = self._version()
            fresh = (
                cached is not None
                and cached.result is runtime.last_result
                and cached.version == version
            )
            if cached is not None and (fresh or time.monotonic() - cached.built < 3 * cached.cost):
                return cached.body, cached.etag
            items = self.admin.object_items()
            objects = {
                Key(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                for o in items
            }
            result = runtime.last_result
            inputs = graph.Inputs(
                snapshot=runtime.store.snapshot(),
                objects=objects,
                result=result,
                errors=self.admin.errors.all(),
                options=runtime.options,
            )
            started = time.monotonic()
            body = await asyncio.to_thread(lambda: msgspec.json.encode(graph.build(inputs)))
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            self._cached = _Built(
                body, etag, result, version, time.monotonic(), time.monotonic() - started
            )
            return body, etag


@dataclass(frozen=True)
class _Built:
    body: bytes
    etag: str
    result: Result | None  # the translation it was built from
    version: tuple[Any, ...]
    built: float  # monotonic time it was built at
    cost: float  # seconds it took
