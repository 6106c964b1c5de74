"""``gateweave bench``: the command, added to gateweave's command line where this harness is
installed.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from gateweave.cliargs import err


def command(
    routes: Annotated[
        str, typer.Option("--routes", help="Route counts to measure, comma-separated.")
    ] = "100,1000,10000",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the generated objects.")] = 7,
    repeat: Annotated[
        int, typer.Option("--repeat", help="Runs of each timed step (the median is reported).")
    ] = 3,
    latency_samples: Annotated[
        int,
        typer.Option(
            "--latency-samples",
            help="Event -> Envoy samples at each route count, with the cold start (0: skip).",
        ),
    ] = 100,
    gateways: Annotated[
        int,
        typer.Option(
            "--gateways",
            help="Gateways (x 10 routes) of the many-Gateways row, merged and not (0: skip).",
        ),
    ] = 100,
    policies: Annotated[
        float,
        typer.Option(
            "--policies",
            help="Fraction of the routes with Envoy Gateway policies of their own (plus some "
            "per Gateway); 0: no policies.",
        ),
    ] = 0.0,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", help="Also print a cProfile of one translation at the largest count."
        ),
    ] = False,
) -> None:
    """Measure decoding, translation, change-to-snapshot time, burst coalescing and memory on
    generated objects.
    """
    from gateweave_bench.run import BenchError, format_table, profile_translate, run_bench

    try:
        counts = [int(part) for part in routes.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not 0.0 <= policies <= 1.0:
        err(f"error: --policies {policies}: expected a fraction between 0 and 1")
        raise typer.Exit(2)
    if not counts or any(n < 1 for n in counts):
        err(f"error: --routes {routes!r}: expected positive integers separated by commas")
        raise typer.Exit(2)
    try:
        report = run_bench(
            counts,
            seed=seed,
            repeat=repeat,
            latency_samples=latency_samples,
            gateways=gateways,
            policies=policies,
            log=err,
        )
    except BenchError as exc:
        err(f"error: {exc}")
        raise typer.Exit(1) from None
    report["command"] = (
        f"gateweave bench --routes {','.join(map(str, counts))} --seed {seed} --repeat {repeat} "
        f"--latency-samples {latency_samples} --gateways {gateways}"
        + (f" --policies {policies}" if policies else "")
    )
    if profile:
        report["profile"] = profile_translate(max(counts), seed)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        typer.echo(format_table(report))
        if profile:
            typer.echo("\n" + report["profile"])
