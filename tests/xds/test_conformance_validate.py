"""Every conformance case's initial state, built into Envoy resources, is accepted by Envoy itself.

For each case: translate its objects, build every Gateway's resources, and run
``envoy --mode validate`` once on the union of the case's Gateways (resources of the same
name shared by two Gateways must be byte-identical, otherwise that Gateway is checked on
its own). A rejected union is re-checked Gateway by Gateway so the failure names the
culprit. Cases run two at a time.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields

import pytest

from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.xds.build import build
from gateweave.xds.resources import Resources, serialize
from gateweave.xds.validate import validate_with_envoy
from tests.support.conformance_objects import all_case_files, case_objects

CONCURRENCY = 2
CASE_FILES = all_case_files()


def _merge(into: Resources, more: Resources) -> bool:
    """Add ``more`` to ``into`` unless a name clashes with a different resource."""
    for f in fields(Resources):
        have, add = getattr(into, f.name), getattr(more, f.name)
        if any(n in have and serialize(have[n]) != serialize(m) for n, m in add.items()):
            return False
    for f in fields(Resources):
        getattr(into, f.name).update(getattr(more, f.name))
    return True


def _check_case(case_file: str) -> tuple[int, list[str]]:
    """(Gateways built, one message per Gateway Envoy rejects)."""
    result = translate(Snapshot.from_objects(case_objects(case_file)))
    built = {name: build(gw) for name, gw in sorted(result.xds.items())}
    union = Resources()
    batches: list[tuple[list[str], Resources]] = [([], union)]
    for name, resources in built.items():
        if _merge(union, resources):
            batches[0][0].append(name)
        else:
            batches.append(([name], resources))
    failures: list[str] = []
    for names, resources in batches:
        if not names:
            continue
        ok, message = validate_with_envoy(resources)
        if ok:
            continue
        if len(names) == 1:
            failures.append(f"{names[0]}: {message}")
            continue
        for name in names:
            ok, message = validate_with_envoy(built[name])
            if not ok:
                failures.append(f"{name}: {message}")
        if not failures:
            failures.append(f"{', '.join(names)} together: {message}")
    return len(built), failures


@functools.cache
def _all_results() -> dict[str, tuple[int, list[str]]]:
    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = dict(zip(CASE_FILES, pool.map(_check_case, CASE_FILES), strict=True))
    gateways = sum(n for n, _ in results.values())
    print(
        f"\nvalidated {gateways} Gateways of {len(results)} cases with Envoy in "
        f"{time.perf_counter() - started:.1f} s"
    )
    return results


@pytest.mark.parametrize("case_file", CASE_FILES)
def test_envoy_accepts_every_snapshot(case_file: str) -> None:
    _, failures = _all_results()[case_file]
    assert not failures, "\n".join(failures)


def test_cases_build_gateways() -> None:
    """The suite is not vacuous: the cases yield Gateways with listeners, and a broken one is
    caught.
    """
    assert sum(n for n, _ in _all_results().values()) >= len(CASE_FILES)
    result = translate(Snapshot.from_objects(case_objects("HTTPRouteSimpleSameNamespace.yaml")))
    resources = next(build(gw) for gw in result.xds.values() if gw.clusters)
    broken = Resources(
        listeners=resources.listeners, routes=resources.routes
    )  # routes to missing clusters
    ok, message = validate_with_envoy(broken)
    assert not ok and "unknown cluster" in message


def test_tls_port_without_routes_is_accepted_by_envoy() -> None:
    """A TLS listener no route attached to yet: Envoy refuses listeners without filter chains."""
    from gateweave import ir

    gw = ir.XdsGateway(
        name="default/gw",
        address="127.10.0.1",
        ports=(ir.Port(name="default/gw/443", port=443, protocol="TLS"),),
    )
    resources = build(gw)
    (listener,) = resources.listeners.values()
    assert len(listener.filter_chains) == 1 and not listener.filter_chains[0].filters
    ok, message = validate_with_envoy(resources)
    assert ok, message
