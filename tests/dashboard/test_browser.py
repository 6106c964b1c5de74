"""The dashboard in a real browser: headless Chromium loads it from a running ``serve`` (real
Envoys) given conformance object sets, a Gateway of the test's own with real traffic, and a
file with a mistake.

It finds every Gateway and route of the sets, shows the rejected route in the failure colour
of its legend with the reason (on the node, and on a click: conditions and explain's
account), the configuration error with its file:line, and the route's request count rising
while requests flow through Envoy (the admin server's ``/api/traffic``, from the Envoys'
stats).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from gateweave.api.kinds import ROUTE_KINDS
from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.browser import headless_chromium
from tests.support.conformance_objects import case_raws

pytestmark = pytest.mark.timeout(240)

T = TypeVar("T")
CASES = (
    # a route its Gateway rejects (NotAllowedByListeners)
    "HTTPRouteInvalidCrossNamespaceParentRef.yaml",
    "HTTPRouteListenerHostnameMatching.yaml",  # listeners by hostname on one port
    "HTTPRouteReferenceGrant.yaml",  # a ReferenceGrant that binds
    "TCPRouteReferenceGrant.yaml",  # a TCP listener
    "BackendTLSPolicy.yaml",  # policies
)
REJECTED = "HTTPRoute/gateway-conformance-web-backend/invalid-cross-namespace-parent-ref"
COUNTED = "HTTPRoute/default/counted"
ADDRESS = "127.40.7.1"
WAIT_S = 30.0  # a bound on waiting for the page, not a measurement


def conformance_objects() -> list[dict[str, Any]]:
    """The objects of CASES, united by (kind, namespace, name)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for case in CASES:
        for raw in case_raws(case):
            meta = raw.get("metadata") or {}
            out.setdefault((raw["kind"], meta.get("namespace", ""), meta["name"]), raw)
    return list(out.values())


def ids_of(objects: list[dict[str, Any]], kinds: tuple[str, ...]) -> set[str]:
    return {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
        for o in objects
        if o["kind"] in kinds
    }


def wait(driver: WebDriver, what: str, probe: Callable[[WebDriver], T | Literal[False]]) -> T:
    """``probe`` until it gives something true; the page redraws the graph and the details
    whenever the system changes (an Envoy becoming ready, a status written), so an element
    found by one probe may be gone by the next: probes find what they read each time."""
    return WebDriverWait(
        driver,
        WAIT_S,
        poll_frequency=0.1,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(probe, f"the page did not show {what}")


def node(driver: WebDriver, nid: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'#graph g.node[data-id="{nid}"]')


def text_of(driver: WebDriver, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def containing(css: str, needle: str) -> Callable[[WebDriver], str | Literal[False]]:
    """A probe: the text of the element at ``css`` once it contains ``needle``."""
    return lambda d: text if needle in (text := text_of(d, css)) else False


def at_least(n: int) -> Callable[[WebDriver], tuple[int, str] | Literal[False]]:
    """A probe: :func:`requests_shown` once the node shows ``n`` requests or more."""
    return lambda d: shown if (shown := requests_shown(d))[0] >= n else False


def requests_shown(driver: WebDriver) -> tuple[int, str]:
    """The counted route's request count as its node holds it (-1: none yet), and as the
    traffic table shows it ("": no row yet), read at one moment."""
    value = driver.execute_script(
        f"const g = document.querySelector('#graph g.node[data-id=\"{COUNTED}\"]');"
        f"const row = document.querySelector('#traffic-table tr[data-route=\"{COUNTED}\"]');"
        "return g && g.dataset.requests !== undefined ? [g.dataset.requests, "
        "g.querySelector('text.line3').textContent,"
        " row ? row.children[1].textContent : ''] : null;"
    )
    if not value:
        return -1, ""
    count, text, row = value
    assert text.startswith(f"{count} req"), text  # the number drawn is the number held
    return int(count), row


def send(port: int, n: int) -> None:
    for _ in range(n):
        reply = h.fetch_sync(ADDRESS, port, "/", "counted.test")
        assert reply is not None and reply.status == 200 and reply.body == "counted", reply


def drive(url: str, port: int, gateways: set[str], routes: set[str]) -> None:
    """``url``: the dashboard's, with the admin token (the page then runs on its cookie)."""
    with headless_chromium() as driver:
        driver.get(url)

        def all_nodes(d: WebDriver) -> bool:
            shown = set(
                d.execute_script(
                    "return [...document.querySelectorAll('#graph g.node')].map(g => g.dataset.id)"
                )
            )
            return (gateways | routes) <= shown

        wait(driver, "every Gateway and route", all_nodes)
        titles = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#graph g.node')]"
            ".map(g => [g.dataset.id, g.querySelector('title').textContent]))"
        )
        for nid in sorted(gateways | routes):
            kind, ns, name = nid.split("/")
            assert titles[nid].startswith(f"{kind} {ns}/{name}"), (nid, titles[nid])

        # the rejected route: failure colour (the legend's), the reason on the node and in its
        # details
        health, fill, legend_fail, legend_ok, line3 = driver.execute_script(
            f"const g = document.querySelector('#graph g.node[data-id=\"{REJECTED}\"]');"
            "const css = (e, p) => getComputedStyle(e)[p];"
            "return [g.dataset.health, css(g.querySelector('rect'), 'fill'),"
            " css(document.querySelector('.legend .swatch.fail'), 'backgroundColor'),"
            " css(document.querySelector('.legend .swatch.ok'), 'backgroundColor'),"
            " g.querySelector('text.line3').textContent];"
        )
        assert health == "fail"
        assert fill == legend_fail != legend_ok, (fill, legend_fail, legend_ok)
        assert "NotAllowedByListeners" in line3, line3
        wait(driver, "a click on the rejected route", lambda d: node(d, REJECTED).click() or True)
        details = wait(
            driver,
            "the rejected route's conditions",
            containing("#details", "NotAllowedByListeners"),
        )
        assert "Accepted=False" in details, details
        explain = wait(
            driver, "explain's account", containing("#details pre.explain", "parentRef[0]")
        )
        assert "rejected" in explain, explain
        shown = wait(
            driver,
            "the object with its status",
            lambda d: d.execute_script(
                "const pre = document.querySelector('#details details.object pre'); return pre && "
                "JSON.parse(pre.textContent);"
            ),
        )
        assert shown["metadata"]["name"] == REJECTED.split("/")[2]
        assert shown["status"]["parents"][0]["conditions"][0]["reason"] == "NotAllowedByListeners"

        # the configuration error, located
        wait(
            driver,
            "the configuration error with file:line",
            lambda d: re.search(r"broken\.yaml:\d+", text_of(d, "#error-list")),
        )

        # traffic: the count rises while requests flow through Envoy, on the node and in the table
        send(port, 5)
        first, _ = wait(driver, "the route's first requests", at_least(5))
        send(port, 5)
        later, row = wait(driver, "more requests", at_least(first + 5))
        assert later > first
        assert row == str(later), (row, later)


async def answered(port: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        reply = await h.fetch(ADDRESS, port, "/", "counted.test")
        if reply is not None and reply.status == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the counted route never answered through Envoy")


async def test_dashboard_in_chromium(tmp_path: Path) -> None:
    backend = h.NameServer("counted")
    port = free_port(ADDRESS)
    objects = conformance_objects()
    h.write_manifests(tmp_path / "conformance.yaml", objects)
    h.write_manifests(
        tmp_path / "counted.yaml",
        [
            h.gateway_class(),
            h.gateway("counted", ADDRESS, [h.listener("http", "HTTP", port)]),
            *h.service("counted", 80, backend.port),
            h.http_route(
                "counted",
                "counted",
                ["counted.test"],
                [h.rule("/", [h.backend_ref("counted", 80)])],
            ),
        ],
    )
    # a mistake: an unknown field (the error names the file and line; the route is not served)
    (tmp_path / "broken.yaml").write_text(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: typo, "
        "namespace: default}\n"
        "spec:\n  parentRefs: [{name: counted}]\n  hostname: [typo.test]\n"
    )
    gateways = ids_of(objects, ("Gateway",)) | {"Gateway/default/counted"}
    routes = ids_of(objects, ROUTE_KINDS) | {COUNTED}
    assert REJECTED in routes and len(gateways) >= 4 and len(routes) >= 6
    try:
        async with h.running_serve(tmp_path, start_timeout=30) as served:
            await answered(port)
            await asyncio.to_thread(drive, served.admin.dashboard_url, port, gateways, routes)
    finally:
        backend.close()
