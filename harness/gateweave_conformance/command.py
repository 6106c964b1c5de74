"""``gateweave conformance``: the command, added to gateweave's command line where this harness is
installed.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
import yaml

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.cliargs import CheckIncrementalOpt, ControllerOpt, PoolOpt, check_pool, err


def command(
    cases: Annotated[
        str, typer.Option("--cases", help="Directory of conformance case files (FORMAT.md).")
    ],
    manifests: Annotated[
        str, typer.Option("--manifests", help="Directory holding base/ and tests/ manifests.")
    ],
    run: Annotated[
        str | None, typer.Option("--run", help="Only cases whose name matches this regex.")
    ] = None,
    report: Annotated[
        str | None,
        typer.Option("--report", help="Write an upstream-format ConformanceReport YAML here."),
    ] = None,
    supported_features: Annotated[
        str | None,
        typer.Option(
            "--supported-features",
            help=(
                "Comma-separated claimed features (default: the GatewayClass's "
                "status.supportedFeatures)."
            ),
        ),
    ] = None,
    skip_tests: Annotated[
        str | None, typer.Option("--skip-tests", help="Skip cases whose name matches this regex.")
    ] = None,
    known_failures: Annotated[
        str | None,
        typer.Option(
            "--known-failures",
            help="YAML mapping of case name to why it is known to fail; those do not fail the run.",
        ),
    ] = None,
    controller_name: ControllerOpt = DEFAULT_CONTROLLER_NAME,
    address_pool: PoolOpt = "127.10.0.0/16",
    backend_prefix: Annotated[
        str,
        typer.Option(
            "--backend-prefix", help="Echo replicas listen on PREFIX.x.y (a /16 of 127.0.0.0/8)."
        ),
    ] = "127.20",
    check_incremental: CheckIncrementalOpt = False,
) -> None:
    """Replay conformance cases against a live gateweave with Envoy and echo backends, traffic
    included.
    """
    import re
    from pathlib import Path

    from gateweave_conformance.runner import (
        RunnerError,
        RunnerOptions,
        load_known_failures,
        run_sync,
    )

    for pattern in (run, skip_tests):
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                err(f"error: bad regex {pattern!r}: {exc}")
                raise typer.Exit(2) from None
    check_pool(address_pool)
    for path in (cases, manifests):
        if not Path(path).is_dir():
            err(f"error: {path} is not a directory")
            raise typer.Exit(2)
    known: dict[str, str] = {}
    if known_failures:
        try:
            known = load_known_failures(Path(known_failures))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            err(f"error: --known-failures: {exc}")
            raise typer.Exit(2) from None
    features = None
    if supported_features is not None:
        features = frozenset(f.strip() for f in supported_features.split(",") if f.strip())

    def out(line: str) -> None:
        typer.echo(line)
        sys.stdout.flush()

    options = RunnerOptions(
        cases_dir=Path(cases),
        manifests_dir=Path(manifests),
        run=run,
        skip_tests=skip_tests,
        supported_features=features,
        report=Path(report) if report else None,
        known_failures=known,
        controller_name=controller_name,
        address_pool=address_pool,
        backend_prefix=backend_prefix,
        check_incremental=check_incremental,
        out=out,
    )
    try:
        code = run_sync(options)
    except RunnerError as exc:  # the run could not start (e.g. an echo backend's address is taken)
        err(f"error: {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(code)
