"""What one echo replica is: its mode, address, ports, identity and TLS material."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

Mode = Literal["http", "grpc", "tcp", "udp", "dns", "files"]
MODES: tuple[Mode, ...] = ("http", "grpc", "tcp", "udp", "dns", "files")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EchoSpec:
    """One replica of an upstream echo Deployment (ECHO.md), run on a local address.

    Ports default to upstream's; 0 picks a free port (see ``RunningEcho.ports``).
    TLS fields hold a PEM file path or the PEM text itself.
    """

    mode: Mode = "http"
    host: str = "127.0.0.1"
    pod: str = ""
    namespace: str = ""
    service: str = ""
    ingress: str = ""
    # HTTP mode: 3000 (HTTP/1.x), 3001 (h2c), 8443 (TLS). gRPC mode: 3000 and 8443.
    http_port: int = 3000
    h2c_port: int = 3001
    https_port: int = 8443
    # TCP mode: 3000 and 8443 (TLS).
    tcp_port: int = 3000
    tls_port: int = 8443
    # UDP echo mode; DNS stand-in.
    udp_port: int = 8080
    dns_port: int = 53
    # Files mode (Envoy Gateway's static file server): (URL path, content) pairs on 8080.
    files: tuple[tuple[str, bytes], ...] = ()
    files_port: int = 8080
    tls_cert: str | None = None
    tls_key: str | None = None
    client_ca: str | None = None
    log_path: str | None = None
    log_stdout: bool = False

    @property
    def has_tls(self) -> bool:
        return bool(self.tls_cert) and bool(self.tls_key)


def read_pem(value: str) -> str:
    """PEM text given inline or as a file path."""
    if "-----BEGIN" in value:
        return value
    return Path(value).read_text()
