"""Cold start of ``gateweave serve`` on the bench's own objects (issue 18, target 2, file half).

The objects of :mod:`gateweave_bench.objects` for ``routes`` routes are written as YAML, one
file per object (a directory a user would keep), and ``gateweave serve`` is started on that
directory as a command, in its own process, with host Envoys:

* ``cold_start_s``: from starting the command until every Gateway's status says
  ``Programmed`` (its Envoy acknowledged the configuration holding every route), read from
  serve's admin API one Gateway at a time (``/api/object``), every ``poll`` seconds;
* ``yaml_floor_s``: reading and parsing the same files with the C YAML loader alone
  (:func:`gateweave_bench.latency.yaml_floor`), what no start can beat.

The figure includes starting the interpreter and importing gateweave: what a user waits for.
Every wait is bounded (``timeout``); serve and its Envoys are stopped after.

    python -m gateweave_bench.filecold --routes 10000 [--seed 7] [--policies 0.3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from gateweave.admintoken import AdminTokenError, client_headers, client_token
from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_bench.gateways import start_serve, stop_serve
from gateweave_bench.latency import yaml_floor
from gateweave_bench.objects import DEFAULT_SEED, generate


def write_files(root: Path, manifests: Sequence[dict[str, Any]]) -> int:
    """Each manifest as a file of its own under ``root``; how many were written."""
    for i, raw in enumerate(manifests):
        meta = raw.get("metadata", {})
        name = f"{meta.get('namespace', '_')}.{raw['kind'].lower()}.{meta.get('name', i)}.yaml"
        h.write_manifests(root / name, [raw])
    return len(manifests)


def _gateways(manifests: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (raw["metadata"].get("namespace", "default"), raw["metadata"]["name"])
        for raw in manifests
        if raw.get("kind") == "Gateway"
    ]


def _programmed(client: httpx.Client, admin: str, state: Path, gateway: tuple[str, str]) -> bool:
    namespace, name = gateway
    try:
        token = client_token(None, state_dir=str(state))  # the one serve wrote there
        reply = client.get(
            f"http://{admin}/api/object",
            params={"kind": "Gateway", "namespace": namespace, "name": name},
            headers=client_headers(token),
            timeout=10,
        )
        obj = reply.json()
    except (httpx.HTTPError, ValueError, AdminTokenError):
        return False
    conditions = obj.get("status", {}).get("conditions", []) if isinstance(obj, dict) else []
    return any(c.get("type") == "Programmed" and c.get("status") == "True" for c in conditions)


def measure(
    routes: int,
    seed: int = DEFAULT_SEED,
    policies: float = 0.0,
    *,
    timeout: float = 900.0,
    poll: float = 0.05,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """``cold_start_s`` and ``yaml_floor_s`` (seconds) for the objects of ``(routes, seed,
    policies)``, with the number of files and Gateways."""
    manifests = generate(routes, seed, policies).manifests
    gateways = _gateways(manifests)
    with tempfile.TemporaryDirectory(prefix="gateweave-bench-filecold-") as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        state = Path(tmp) / "state"
        files = write_files(config, manifests)
        del manifests
        floor = yaml_floor(config)
        log(f"  {files} files, YAML floor {floor:.2f} s; starting serve")
        admin = f"127.0.0.1:{free_port()}"
        serve_log = Path(tmp) / "serve.log"
        start = time.perf_counter()
        proc = start_serve(config, state, admin, serve_log)
        try:
            waiting = list(gateways)
            with httpx.Client() as client:
                while waiting:
                    if proc.poll() is not None:
                        raise RuntimeError(
                            f"serve exited ({proc.returncode}): {serve_log.read_text()[-2000:]}"
                        )
                    if time.perf_counter() - start > timeout:
                        raise TimeoutError(
                            f"{len(waiting)} of {len(gateways)} Gateways not Programmed "
                            f"after {timeout} s"
                        )
                    waiting = [g for g in waiting if not _programmed(client, admin, state, g)]
                    if waiting:
                        time.sleep(poll)
            cold = time.perf_counter() - start
        finally:
            stop_serve(proc, state)
    log(f"  every Gateway Programmed {cold:.2f} s after start ({cold / floor:.2f} x the floor)")
    return {
        "routes": routes,
        "files": files,
        "gateways": len(gateways),
        "cold_start_s": round(cold, 3),
        "yaml_floor_s": round(floor, 4),
        "ratio": round(cold / floor, 2) if floor else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_bench.filecold", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--routes", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--policies", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = measure(
        args.routes,
        args.seed,
        args.policies,
        timeout=args.timeout,
        log=lambda s: print(s, file=sys.stderr),
    )
    print(json.dumps(report, indent=2) if args.json else report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
