"""Test backends the test steers. :class:`FlakyServer`: by path, ``/fail-once/<key>`` answers 500
the
first time a key is asked for and 200 after; ``/slow`` answers 200 after ``SLOW_S`` seconds;
anything else 200; it counts the requests per path. :class:`HealthServer`: its health check, and
answers of 500 on demand."""

from __future__ import annotations

import collections
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLOW_S = 1.0


def _reply(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "text/plain")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.hits[self.path] += 1
            first = self.server.hits[self.path] == 1
        status = 200
        if self.path.startswith("/fail-once/") and first:
            status = 500
        elif self.path == "/slow":
            time.sleep(SLOW_S)
        _reply(self, status, f"{status} {self.path}".encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.lock = threading.Lock()
        self.hits: collections.Counter[str] = collections.Counter()


class FlakyServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self._server = _Server((host, 0))
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def hits(self, path: str) -> int:
        with self._server.lock:
            return self._server.hits[path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)


class _HealthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HealthServer

    def do_GET(self) -> None:
        if self.path == "/healthz":
            status, body = (200, b"ok") if self.server.healthy.is_set() else (503, b"sick")
        elif self.server.failing.is_set():
            status, body = 500, self.server.name.encode()
        else:
            status, body = 200, self.server.name.encode()
        _reply(self, status, body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HealthServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], name: str) -> None:
        super().__init__(address, _HealthHandler)
        self.name = name
        self.healthy = threading.Event()
        self.healthy.set()
        self.failing = threading.Event()


class HealthServer:
    """A backend answering its name, whose ``/healthz`` answers 200 while ``healthy`` (else 503);
    while ``failing``, every other path answers 500 (with its name)."""

    def __init__(self, name: str, host: str, port: int) -> None:
        self._server = _HealthServer((host, port), name)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def set_healthy(self, healthy: bool) -> None:
        if healthy:
            self._server.healthy.set()
        else:
            self._server.healthy.clear()

    def set_failing(self, failing: bool) -> None:
        if failing:
            self._server.failing.set()
        else:
            self._server.failing.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)
