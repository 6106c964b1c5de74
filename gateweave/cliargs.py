"""What the gateweave commands share, the harness commands included (``gateweave
conformance`` and ``gateweave bench`` live in the harness packages): options, checks, errors."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

ControllerOpt = Annotated[
    str, typer.Option("--controller-name", help="GatewayClass controllerName this controller owns.")
]
StateDirOpt = Annotated[
    str | None,
    typer.Option(
        "--state-dir",
        help="Where the Envoys' records, logs and the xDS socket live, surviving serve (default: "
        "one per config dir,"
        " under /var/lib/gateweave for root, else $XDG_STATE_HOME/gateweave).",
    ),
]
PoolOpt = Annotated[
    str, typer.Option("--address-pool", help="Loopback pool Gateway addresses come from.")
]
DefaultAddressOpt = Annotated[
    str,
    typer.Option(
        "--default-address",
        help=(
            "What a Gateway without spec.addresses binds: pool (its own address from "
            "--address-pool) or an IP address (0.0.0.0: every interface)."
        ),
    ),
]
# Tests and CI (GATEWEAVE_CHECK_INCREMENTAL=1): every incremental translation is also made in
# full and compared; a difference fails that translation.
CheckIncrementalOpt = Annotated[
    bool,
    typer.Option(
        "--check-incremental",
        envvar="GATEWEAVE_CHECK_INCREMENTAL",
        hidden=True,
        help="Also translate every change in full and fail on any difference (slow; tests and CI).",
    ),
]


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


# The admin API's bearer token (gateweave/admintoken.py): the server's, and where a client finds it.
AdminTokenFileOpt = Annotated[
    str | None,
    typer.Option(
        "--admin-token-file",
        help=(
            "File holding the admin API's bearer token (mode 0600 or stricter; default: "
            "$GATEWEAVE_ADMIN_TOKEN, else a random token written to <state dir>/admin-token)."
        ),
    ),
]
ClientTokenFileOpt = Annotated[
    str | None,
    typer.Option(
        "--admin-token-file",
        help=(
            "File holding the admin API's token (default: $GATEWEAVE_ADMIN_TOKEN, else the "
            "admin-token of --config-dir's state directory)."
        ),
    ),
]
ServedDirOpt = Annotated[
    str | None,
    typer.Option(
        "--config-dir",
        help=(
            "The directory the server serves: its state directory's admin-token authenticates this "
            "client."
        ),
    ),
]
