"""A slow HTTP backend for drain tests: each request is held (a request in flight) until the
test releases it, or at most ``hold`` seconds, then answered 200 ``slow``."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _HeldHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: HeldBackend

    def do_GET(self) -> None:
        self.server.arrived.set()
        self.server.release.wait(self.server.hold)
        self.send_response(200)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"slow")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HeldBackend(ThreadingHTTPServer):
    """On ``host``, a free port, serving from a thread of its own until :meth:`close`.
    ``arrived`` is set when a request reaches it; setting ``release`` answers every held
    request at once (and the later ones without holding them)."""

    daemon_threads = True

    def __init__(self, hold: float, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _HeldHandler)
        self.hold = hold
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def close(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()
        self._thread.join(2)
