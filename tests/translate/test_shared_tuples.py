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

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions
from gateweave.translate.attachment import Attachment, RouteTranslation
from gateweave.translate.core import run_pipeline
from gateweave.translate.hostnames import intersect_lowered
from gateweave.translate.parentrefs import _RouteHosts
from gateweave.translate.xdsir import virtual_host
from tests.translate.test_route_sharing import NS, objects, prefix, route, rule


def _all_ns() -> m.AllowedRoutes:
    return m.AllowedRoutes(namespaces=m.RouteNamespaces(from_="All"))


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


def test_a_virtual_host_serves_its_route_s_own_hostname_tuple() -> None:
    listeners = (
        m.Listener(name="a", port=80, protocol="HTTP", allowed_routes=_all_ns()),
        m.Listener(
            name="b", port=81, protocol="HTTP", hostname="*.example.com", allowed_routes=_all_ns()
        ),
    )
    r = route("r", rule(prefix("/")), hostnames=("a.example.com",))
    _, _, gws = run_pipeline(Snapshot.from_objects([*objects(*listeners), r]), TranslateOptions())
    atts = [att for gw in gws for lc in gw.listeners for att in lc.routes]
    assert len(atts) == 2
    own = r.spec.hostnames
    assert all(att.hostnames is own for att in atts)
    for att in atts:
        vh = virtual_host("rc", "a.example.com", [att])
        assert vh.domains is own
    # ...and the virtual hosts of the translation itself
    res, _, _ = run_pipeline(Snapshot.from_objects([*objects(*listeners), r]), TranslateOptions())
    vhosts = [
        vh
        for port in res.xds[f"{NS}/gw"].ports
        if port.http is not None
        for vh in port.http.virtual_hosts
    ]
    assert len(vhosts) == 2
    assert all(vh.domains == own for vh in vhosts)
    assert vhosts[0].domains is vhosts[1].domains


def test_a_virtual_host_of_another_domain_gets_its_own() -> None:
    att = Attachment(translation=RouteTranslation(kind="HTTPRoute", route=None), hostnames=None)
    assert virtual_host("rc", "*", [att]).domains == ("*",)


def test_one_lowercase_hostname_is_served_as_the_route_s_tuple_on_every_listener() -> None:
    lowered = _RouteHosts(route("r", hostnames=("A.Example.com",)))
    assert lowered.lowered == ("a.example.com",)
    own = _RouteHosts(route("r", hostnames=("a.example.com",)))
    for hosts in (lowered, own):
        assert hosts.on(None, None) is hosts.lowered
        assert hosts.on("a.example.com", None) is hosts.lowered
        assert hosts.on("*.example.com", ".example.com") is hosts.lowered
    assert own.lowered is own.hosts
    wild = _RouteHosts(route("r", hostnames=("*.example.com",)))
    assert wild.on(None, None) is wild.lowered
    assert wild.on("a.example.com", None) == ("a.example.com",)


def test_intersect_lowered_returns_the_given_tuple_when_its_one_name_is_served() -> None:
    one = ("a.example.com",)
    assert intersect_lowered(None, one) is one
    assert intersect_lowered("*.example.com", one) is one
    assert intersect_lowered("b.example.com", one) == ()
    wild = ("*.example.com",)
    assert intersect_lowered("a.example.com", wild) == ("a.example.com",)
    two = ("a.example.com", "b.example.com")
    assert intersect_lowered(None, two) == two
