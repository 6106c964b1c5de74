"""Many Gateways on one host (issue 18, target 5): ``gateweave serve`` (its own process, host
Envoys) on a directory of N Gateways x M HTTPRoutes, once with one Envoy per Gateway and once
with the class's GatewayParameters setting ``mergeGateways`` (one Envoy for all of them).

Each mode reports ``programmed_s``, the time from starting ``serve`` until every Gateway's
status says Programmed (read from serve's admin API, polled every ``poll`` seconds), and
``rss_mb``: the resident memory (VmRSS) of serve and of every Envoy it started, summed, read
once every Gateway is Programmed and the processes settled. Envoys run with concurrency 1
in both modes. Every wait is bounded (``timeout``); serve and its Envoys are stopped after.

    python -m gateweave_bench.gateways --gateways 100 --routes 10 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from gateweave.admintoken import AdminTokenError, client_headers, client_token
from gateweave.infra import statedir
from gateweave.infra.host import free_port
from gateweave_bench import harness as h

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
PARAMS = "gateweave.io/v1alpha1"
ROUTES_PER_GATEWAY = 10


def objects(gateways: int, routes: int, merged: bool) -> list[dict[str, Any]]:
    """A class, its parameters, one Service, ``gateways`` Gateways (HTTP on 8080, each on its
    own pool address) with ``routes`` HTTPRoutes each (their own hostnames)."""
    gc = h.gateway_class()
    gc["spec"]["parametersRef"] = {
        "group": "gateweave.io",
        "kind": "GatewayParameters",
        "name": "bench",
        "namespace": "default",
    }
    spec: dict[str, Any] = {"envoy": {"concurrency": 1}}
    if merged:
        spec["mergeGateways"] = True
    out: list[dict[str, Any]] = [
        gc,
        {
            "apiVersion": PARAMS,
            "kind": "GatewayParameters",
            "metadata": h.meta("bench"),
            "spec": spec,
        },
        *h.service("app", 80, 9),
    ]
    for g in range(gateways):
        name = f"g{g:03d}"
        out.append(
            {
                "apiVersion": f"{h.G}/v1",
                "kind": "Gateway",
                "metadata": h.meta(name),
                "spec": {
                    "gatewayClassName": h.CLASS,
                    "listeners": [h.listener("http", "HTTP", 8080)],
                },
            }
        )
        for r in range(routes):
            out.append(
                h.http_route(
                    f"{name}-r{r}",
                    name,
                    [f"r{r}.{name}.bench.test"],
                    [h.rule(f"/p{r}", [h.backend_ref("app", 80)])],
                )
            )
    return out


def start_serve(config: Path, state: Path, admin: str, log_path: Path) -> subprocess.Popen[bytes]:
    """``gateweave serve`` on ``config`` as a command (host Envoys, its own session), with
    its state in ``state``, its admin API on ``admin`` and its output in ``log_path``."""
    with log_path.open("wb") as out:
        return subprocess.Popen(
            [
                GATEWEAVE,
                "--log-level",
                "warning",
                "serve",
                "--config-dir",
                str(config),
                "--state-dir",
                str(state),
                "--admin-address",
                admin,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def _envoys(state: Path) -> list[int]:
    """The running Envoys of a serve, from its state directory's records (they are not its
    children: serve starts them detached, so that they outlive it)."""
    return [r.pid for r in statedir.records(state / statedir.ENVOYS_DIR, prune=False) if r.alive()]


def _rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _programmed(admin: str, state: Path, gateways: int) -> int:
    try:
        token = client_token(
            None, state_dir=str(state)
        )  # the one serve wrote to its state directory
        items = httpx.get(
            f"http://{admin}/api/objects", headers=client_headers(token), timeout=10
        ).json()["items"]
    except (httpx.HTTPError, ValueError, KeyError, AdminTokenError):
        return 0
    count = 0
    for obj in items:
        if obj.get("kind") == "Gateway":
            conds = obj.get("status", {}).get("conditions", [])
            count += any(c.get("type") == "Programmed" and c.get("status") == "True" for c in conds)
    return count


def measure_mode(
    gateways: int,
    routes: int,
    merged: bool,
    *,
    timeout: float = 600.0,
    poll: float = 1.0,
    settle: float = 3.0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gateweave-bench-gateways-") as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        state = Path(tmp) / "state"
        h.write_manifests(config / "objects.yaml", objects(gateways, routes, merged))
        admin = f"127.0.0.1:{free_port()}"
        start = time.perf_counter()
        proc = start_serve(config, state, admin, Path(tmp) / "serve.log")
        try:
            done = 0
            while done < gateways:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"serve exited ({proc.returncode}): "
                        f"{(Path(tmp) / 'serve.log').read_text()[-2000:]}"
                    )
                if time.perf_counter() - start > timeout:
                    raise TimeoutError(
                        f"{done} of {gateways} Gateways Programmed after {timeout} s"
                    )
                time.sleep(poll)
                done = _programmed(admin, state, gateways)
            programmed_s = time.perf_counter() - start
            time.sleep(settle)
            envoys = _envoys(state)
            serve_kb = _rss_kb(proc.pid)
            envoy_kb = sum(_rss_kb(pid) for pid in envoys)
            log(
                f"  {'merged' if merged else 'one Envoy per Gateway'}: {len(envoys)} Envoys, "
                f"all Programmed in {programmed_s:.1f} s, {(serve_kb + envoy_kb) / 1024:.0f} MB"
            )
            return {
                "envoys": len(envoys),
                "programmed_s": round(programmed_s, 2),
                "serve_rss_mb": round(serve_kb / 1024, 1),
                "envoys_rss_mb": round(envoy_kb / 1024, 1),
                "rss_mb": round((serve_kb + envoy_kb) / 1024, 1),
            }
        finally:
            stop_serve(proc, state)


def stop_serve(proc: subprocess.Popen[bytes], state: Path) -> None:
    """Stop a serve started as a command and any Envoy of its state directory."""
    envoys = _envoys(state)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for pid in envoys:  # serve stops them; never leave one behind
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"envoy"):
                os.kill(pid, signal.SIGKILL)


def measure(
    gateways: int,
    routes: int,
    *,
    timeout: float = 600.0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Both modes, unmerged first; ``merged_rss_ratio``: merged total RSS / unmerged."""
    log(f"[{gateways} Gateways x {routes} routes] serve with host Envoys")
    unmerged = measure_mode(gateways, routes, False, timeout=timeout, log=log)
    merged = measure_mode(gateways, routes, True, timeout=timeout, log=log)
    return {
        "gateways": gateways,
        "routes_per_gateway": routes,
        "unmerged": unmerged,
        "merged": merged,
        "merged_rss_ratio": round(merged["rss_mb"] / unmerged["rss_mb"], 4)
        if unmerged["rss_mb"]
        else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.gateways", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--gateways", type=int, default=100)
    parser.add_argument(
        "--routes", type=int, default=ROUTES_PER_GATEWAY, help="HTTPRoutes per Gateway"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for every Gateway Programmed"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = measure(
        args.gateways, args.routes, timeout=args.timeout, log=lambda s: print(s, file=sys.stderr)
    )
    print(json.dumps(report, indent=2) if args.json else report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
