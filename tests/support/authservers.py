"""Authorisation services for the ExternalAuth tests, on loopback: one over HTTP, one over gRPC
(Envoy's ext_authz protocol, ``envoy.service.auth.v3`` from xds-protos).

Both allow a request whose Authorization is ``Bearer good``, adding ``x-auth-user: alice`` to
it, and deny any other: 403 with body ``denied by <name>`` and header ``x-denied-by: <name>``.
Both record what they were asked (:class:`Check`). A ``flaky`` HTTP service answers every other
check (the first, the third...) with 503, whatever it is asked.
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.auth.v3 import external_auth_pb2 as pb
from envoy.service.auth.v3 import external_auth_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2
from google.rpc import code_pb2, status_pb2

from tests.support.threads import ServingThread

ALLOWED = "Bearer good"
USER_HEADER, USER = "x-auth-user", "alice"


@dataclass(frozen=True)
class Check:
    """One question an auth service was asked: the request as it saw it."""

    method: str
    path: str
    headers: dict[str, str]  # lowercase names
    body: bytes
    context: dict[str, str] = field(default_factory=dict)  # gRPC: its context extensions


class _HttpAuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HttpAuthServer

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.checks.append(Check(self.command, self.path, headers, body))
        if self.server.flaky and len(self.server.checks) % 2:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if headers.get("authorization") == ALLOWED:
            self.send_response(200)
            self.send_header(USER_HEADER, USER)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        text = f"denied by {self.server.name}".encode()
        self.send_response(403)
        self.send_header("x-denied-by", self.server.name)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HttpAuthServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], name: str, flaky: bool) -> None:
        super().__init__(address, _HttpAuthHandler)
        self.name, self.flaky = name, flaky
        self.checks: list[Check] = []


class HttpAuth:
    """The HTTP auth service on ``host`` (a free port)."""

    def __init__(self, host: str, name: str = "http-auth", flaky: bool = False) -> None:
        server = _HttpAuthServer((host, 0), name, flaky)
        self.host, self.port = host, int(server.server_address[1])
        self.checks = server.checks
        self._serving = ServingThread(server)

    def close(self) -> None:
        self._serving.close()


class _Authorization(pb_grpc.AuthorizationServicer):
    def __init__(self, name: str, checks: list[Check]) -> None:
        self.name, self.checks = name, checks

    def Check(self, request: pb.CheckRequest, context: Any) -> pb.CheckResponse:
        http = request.attributes.request.http
        headers = {k.lower(): v for k, v in http.headers.items()}
        body = bytes(http.raw_body) or http.body.encode()
        context = dict(request.attributes.context_extensions)
        self.checks.append(Check(http.method, http.path, headers, body, context))
        if headers.get("authorization") == ALLOWED:
            add = base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=USER_HEADER, value=USER)
            )
            return pb.CheckResponse(
                status=status_pb2.Status(code=code_pb2.OK),
                ok_response=pb.OkHttpResponse(headers=[add]),
            )
        denied = pb.DeniedHttpResponse(
            status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
            headers=[
                base_pb2.HeaderValueOption(
                    header=base_pb2.HeaderValue(key="x-denied-by", value=self.name)
                )
            ],
            body=f"denied by {self.name}",
        )
        return pb.CheckResponse(
            status=status_pb2.Status(code=code_pb2.PERMISSION_DENIED), denied_response=denied
        )


class GrpcAuth:
    """The gRPC auth service (``envoy.service.auth.v3.Authorization``) on ``host`` (a free port),
    in threads of its own (so blocking clients may call it from any test)."""

    def __init__(self, host: str, name: str = "grpc-auth") -> None:
        self.checks: list[Check] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_AuthorizationServicer_to_server(_Authorization(name, self.checks), self._server)
        self.host, self.port = host, self._server.add_insecure_port(f"{host}:0")
        self._server.start()

    def close(self) -> None:
        self._server.stop(0.2).wait(2)
