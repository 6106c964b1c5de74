"""Files mode: Envoy Gateway's static file server (its e2e ``static-file-server`` Deployment).

Upstream's server (``examples/static-file-server``) is Go's ``http.FileServer`` over a directory
on one port (8080). The stand-in serves the files its :class:`EchoSpec` lists, by URL path, over
HTTP/1.1: a listed path answers 200 with the file (its type from the name's extension), any
other ``404 page not found``, as Go's file server does. Envoy fetches a remote JWKS from it.
"""

from __future__ import annotations

import asyncio
import mimetypes
import posixpath
from urllib.parse import unquote

from gateweave_conformance.echo import conn
from gateweave_conformance.echo.http1 import serve_http1
from gateweave_conformance.echo.httpmsg import Request, Response
from gateweave_conformance.echo.listeners import Listeners
from gateweave_conformance.echo.logbook import EchoLog
from gateweave_conformance.echo.spec import EchoSpec

_NOT_FOUND = Response(
    404,
    [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")],
    b"404 page not found\n",
)


def content_type(path: str) -> str:
    """The Content-Type Go gives a file by its extension (octet-stream when unknown)."""
    guessed, _ = mimetypes.guess_type(path)
    if guessed is None:
        return "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


class FileServer:
    """The handler: ``files`` maps a URL path (``/jwt/jwks.json``) to the file's bytes."""

    def __init__(self, files: dict[str, bytes], log: EchoLog) -> None:
        self.files = files
        self.log = log

    async def serve(self, req: Request) -> Response:
        path = posixpath.normpath("/" + unquote(req.raw_path).lstrip("/"))
        body = self.files.get(path)
        self.log.write(
            f"{req.method} {req.target} from {req.remote}: {404 if body is None else 200}"
        )
        if body is None:
            return _NOT_FOUND
        return Response(200, [("Content-Type", content_type(path))], body)


async def start_files(spec: EchoSpec, log: EchoLog, listeners: Listeners) -> dict[str, int]:
    app = FileServer(dict(spec.files), log)

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_http1(conn.Prefixed(b"", reader), writer, app.serve)

    port = await listeners.tcp(spec.host, spec.files_port, plain)
    log.write(f"Serving {len(app.files)} files on HTTP port: {port}")
    return {"files": port}
