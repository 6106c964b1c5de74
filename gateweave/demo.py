"""A tiny demo backend for the quickstart: answers every request with a short JSON body."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server_version = "gateweave-demo/1"
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = (
            json.dumps(
                {
                    "message": "hello from the gateweave demo backend",
                    "path": self.path,
                    "host": self.headers.get("Host", ""),
                }
            ).encode()
            + b"\n"
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET
    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass


def start_demo_backend(host: str = "127.0.0.1", port: int = 18000) -> ThreadingHTTPServer:
    """Start the demo backend in a daemon thread; call ``shutdown()`` on the result to stop it."""
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="demo-backend", daemon=True).start()
    return server
