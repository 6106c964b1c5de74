"""The dashboard's routes on the admin server: the page, its two assets, and ``/api/graph``.

Everything the page needs is in the package (``static/``): no external asset, no CDN, so it
works offline, and a Content-Security-Policy that lets it load and call nothing but the admin
server it came from. Read-only: every route is a GET.
"""

from __future__ import annotations

import asyncio
import hashlib
from importlib import resources
from typing import TYPE_CHECKING

import msgspec
from aiohttp import web

from gateweave.api.kinds import Key
from gateweave.dashboard import graph

if TYPE_CHECKING:
    from gateweave.admin import AdminServer

_ASSETS = {
    "index.html": "text/html",
    "dashboard.css": "text/css",
    "dashboard.js": "text/javascript",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> bytes:
    return resources.files("gateweave.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """``GET /`` (the page), ``GET /dashboard/<asset>``, ``GET /api/graph`` (see
    :mod:`gateweave.dashboard.graph`; with an ETag, so that polling an unchanged system
    costs a 304)."""

    def __init__(self, admin: AdminServer) -> None:
        self.admin = admin
        self.assets = {name: _asset(name) for name in _ASSETS}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.index),
            web.get("/dashboard/{asset}", self.asset),
            web.get("/api/graph", self.graph),
        ]

    async def index(self, request: web.Request) -> web.Response:
        return self._static("index.html")

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["asset"]
        if name not in _ASSETS or name == "index.html":
            raise web.HTTPNotFound()
        return self._static(name)

    def _static(self, name: str) -> web.Response:
        return web.Response(body=self.assets[name], content_type=_ASSETS[name], charset="utf-8", headers=_HEADERS)

    async def graph(self, request: web.Request) -> web.Response:
        runtime = self.admin.runtime
        items = self.admin.object_items()
        objects = {Key(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items}
        inputs = graph.Inputs(snapshot=runtime.store.snapshot(), objects=objects, result=runtime.last_result,
                              errors=self.admin.errors.all(), options=runtime.options)
        body = await asyncio.to_thread(lambda: msgspec.json.encode(graph.build(inputs)))
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)
