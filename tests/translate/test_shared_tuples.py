"""Tuples a translation shares between its holders stay one object, compiled as from the sources.

mypyc holds a value typed as a fixed-length tuple (``tuple[str, str, str]``, or a
``tuple[str, ...]`` that mypy narrowed with ``len(t) == 1``) unboxed, and makes a new tuple
object each time it stores or returns it: a key shared by thousands of holders in the sources
becomes a copy per holder in the compiled build (docs/benchmarks.md, memory at 10,000 routes,
seventh round). These tests assert identity, so they fail in the compiled build (CI runs them
there) if such a type comes back; from the sources they hold either way.
"""

from __future__ import annotations

from typing import Any

from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions
from gateweave.translate.attachment import Attachment
from gateweave.translate.core import run_pipeline
from tests.translate.test_route_sharing import NS, objects, prefix, route, rule


def _attachments(objs: list[Any]) -> list[Attachment]:
    _, _, gws = run_pipeline(Snapshot.from_objects(objs), TranslateOptions())
    return [att for gw in gws for lc in gw.listeners for att in lc.routes]


def test_routes_to_one_service_port_share_its_key() -> None:
    routes = [route(f"r{i}", rule(prefix(f"/{i}"))) for i in range(3)]
    atts = _attachments([*objects(), *routes])
    services = [att.translation.services for att in atts]
    assert len(services) == 3
    assert all(s == ((NS, "svc", "http"),) for s in services)
    first = services[0][0]
    assert all(s[0] is first for s in services)
