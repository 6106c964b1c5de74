"""What the gateweave commands share, the harness commands included (``gateweave
conformance`` and ``gateweave bench`` live in the harness packages): options, checks, errors."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

ControllerOpt = Annotated[str, typer.Option("--controller-name", help="GatewayClass controllerName this controller owns.")]
StateDirOpt = Annotated[str | None, typer.Option(
    "--state-dir",
    help="Where the Envoys' records, logs and the xDS socket live, surviving serve (default: one per config dir,"
    " under /var/lib/gateweave for root, else $XDG_STATE_HOME/gateweave).",
)]
PoolOpt = Annotated[str, typer.Option("--address-pool", help="Loopback pool Gateway addresses come from.")]
DefaultAddressOpt = Annotated[str, typer.Option(
    "--default-address",
    help="What a Gateway without spec.addresses binds: pool (its own address from --address-pool) or an IP address (0.0.0.0: every interface).",
)]
# Tests and CI (GATEWEAVE_CHECK_INCREMENTAL=1): every incremental translation is also made in
# full and compared; a difference fails that translation.
CheckIncrementalOpt = Annotated[bool, typer.Option(
    "--check-incremental", envvar="GATEWEAVE_CHECK_INCREMENTAL", hidden=True,
    help="Also translate every change in full and fail on any difference (slow; tests and CI).",
)]


def err(message: str) -> None:
    typer.echo(message, err=True)


def check_pool(pool: str) -> None:
    try:
        ipaddress.ip_network(pool, strict=False)
    except ValueError as exc:
        err(f"error: --address-pool {pool!r}: {exc}")
        raise typer.Exit(2) from None


def check_default_address(value: str) -> None:
    if value == "pool":
        return
    try:
        ipaddress.ip_address(value)
    except ValueError:
        err(f"error: --default-address {value!r}: neither 'pool' nor an IP address")
        raise typer.Exit(2) from None
