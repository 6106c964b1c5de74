"""``python -m gateweave_conformance.echo``: run one echo replica until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from gateweave_conformance.echo.server import start_echo
from gateweave_conformance.echo.spec import MODES, EchoSpec


def parse_args(argv: list[str] | None = None) -> EchoSpec:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python -m gateweave_conformance.echo", description=__doc__)
    p.add_argument("--mode", choices=MODES, default="http")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (one loopback IP per replica)"
    )
    p.add_argument("--pod", default=env("POD_NAME", ""))
    p.add_argument("--namespace", default=env("NAMESPACE", ""))
    p.add_argument("--service", default=env("SERVICE_NAME", ""))
    p.add_argument("--ingress", default=env("INGRESS_NAME", ""))
    p.add_argument(
        "--http-port", type=int, default=3000, help="HTTP/1.x (http) or plaintext gRPC (grpc)"
    )
    p.add_argument("--h2c-port", type=int, default=3001)
    p.add_argument("--https-port", type=int, default=8443, help="TLS port of http and grpc modes")
    p.add_argument("--tcp-port", type=int, default=3000)
    p.add_argument("--tls-port", type=int, default=8443, help="TLS port of tcp mode")
    p.add_argument("--udp-port", type=int, default=8080)
    p.add_argument("--dns-port", type=int, default=53)
    p.add_argument("--files-dir", default=None, help="files mode: the directory served")
    p.add_argument("--files-port", type=int, default=8080)
    p.add_argument("--tls-cert", default=None, help="server certificate: PEM file path")
    p.add_argument("--tls-key", default=None, help="server private key: PEM file path")
    p.add_argument(
        "--client-ca", default=None, help="CA validating client certificates (http mode)"
    )
    p.add_argument("--log-file", default=None, help="also append log lines to this file")
    a = p.parse_args(argv)
    return EchoSpec(
        mode=a.mode,
        host=a.host,
        pod=a.pod,
        namespace=a.namespace,
        service=a.service,
        ingress=a.ingress,
        http_port=a.http_port,
        h2c_port=a.h2c_port,
        https_port=a.https_port,
        tcp_port=a.tcp_port,
        tls_port=a.tls_port,
        udp_port=a.udp_port,
        dns_port=a.dns_port,
        files=directory_files(Path(a.files_dir)) if a.files_dir else (),
        files_port=a.files_port,
        tls_cert=a.tls_cert,
        tls_key=a.tls_key,
        client_ca=a.client_ca,
        log_path=a.log_file,
        log_stdout=True,
    )


def directory_files(root: Path) -> tuple[tuple[str, bytes], ...]:
    """Every file under ``root`` by its URL path (``/jwt/jwks.json``), as files mode serves it."""
    return tuple(
        ("/" + path.relative_to(root).as_posix(), path.read_bytes())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    )


async def _run(spec: EchoSpec) -> None:
    running = await start_echo(spec)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await running.stop()


def main(argv: list[str] | None = None) -> int:
    spec = parse_args(argv)
    try:
        asyncio.run(_run(spec))
    except OSError as err:
        print(f"Failed to start listening: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
