"""Take the dashboard screenshot of docs/dashboard.md (docs/img/dashboard.png).

    .venv/bin/python scripts/dashboard_screenshot.py [--out docs/img/dashboard.png]

Runs ``gateweave serve`` in this process with real Envoys on a small system (two Gateways,
routes of which one is rejected and one refers to a missing Service, a ReferenceGrant, a file
with a mistake), sends requests through Envoy for a few seconds, opens the dashboard in
headless Chromium (Debian's ``chromium`` and ``chromium-driver``), selects the rejected route
and saves the window. Needs the loopback interface only (addresses 127.40.8.x). The
traffic it shows is what the admin server's ``/api/traffic`` reads from the Envoys' stats.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

from gateweave.infra.host import free_port  # noqa: E402
from gateweave_bench import harness as h  # noqa: E402
from tests.support.browser import headless_chromium  # noqa: E402

SHOP, API = "127.40.8.1", "127.40.8.2"
REJECTED = "HTTPRoute/default/checkout"
# route id -> (address, Host) its requests go to
TRAFFIC = {
    "HTTPRoute/default/storefront": (SHOP, "www.shop.test"),
    "HTTPRoute/default/legacy-cart": (SHOP, "cart.shop.test"),
    "HTTPRoute/default/api": (API, "api.shop.test"),
    "HTTPRoute/default/payments": (API, "pay.shop.test"),
}


def manifests(ports: dict[str, int], backends: dict[str, h.NameServer]) -> list[dict[str, object]]:
    payments = h.http_route("payments", "api", ["pay.shop.test"], [h.rule("/", [h.backend_ref("payments", 80)])])
    payments["spec"]["rules"][0]["backendRefs"][0]["namespace"] = "payments"
    checkout = h.http_route("checkout", "shop", ["checkout.shop.test"], [h.rule("/", [h.backend_ref("web", 80)])],
                            section="https")  # the Gateway has no listener "https": rejected
    return [
        h.gateway_class(),
        h.gateway("shop", SHOP, [h.listener("web", "HTTP", ports["shop"], hostname="*.shop.test")]),
        h.gateway("api", API, [h.listener("api", "HTTP", ports["api"])]),
        *h.service("web", 80, backends["web"].port),
        *h.service("api-v1", 80, backends["api-v1"].port),
        *h.service("api-v2", 80, backends["api-v2"].port),
        *h.service("payments", 80, backends["payments"].port, namespace="payments"),
        {
            "apiVersion": "gateway.networking.k8s.io/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "routes-from-default", "namespace": "payments"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "default"}],
                     "to": [{"group": "", "kind": "Service"}]},
        },
        h.http_route("storefront", "shop", ["www.shop.test"], [h.rule("/", [h.backend_ref("web", 80)])]),
        h.http_route("legacy-cart", "shop", ["cart.shop.test"], [h.rule("/", [h.backend_ref("old-cart", 80)])]),
        h.http_route("api", "api", ["api.shop.test"],
                     [h.rule("/", [h.backend_ref("api-v1", 80, weight=90), h.backend_ref("api-v2", 80, weight=10)])]),
        payments,
        checkout,
    ]


BROKEN = """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: search, namespace: default}
spec:
  parentRefs: [{name: shop}]
  hostname: [search.shop.test]
"""


class Client:
    """Requests through Envoy to every route of TRAFFIC, some more than others."""

    def __init__(self, ports: dict[str, int]) -> None:
        self.ports = ports
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        weights = {"HTTPRoute/default/storefront": 6, "HTTPRoute/default/api": 4}
        for _ in range(100_000):  # bounded; stopped long before
            for rid, (address, host) in TRAFFIC.items():
                for _ in range(weights.get(rid, 1)):
                    if self.stop.is_set():
                        return
                    port = self.ports["shop" if address == SHOP else "api"]
                    h.fetch_sync(address, port, "/", host)
            time.sleep(0.05)


def click_rejected(driver: WebDriver) -> bool:
    driver.find_element(By.CSS_SELECTOR, f'#graph g.node[data-id="{REJECTED}"]').click()
    return True


def shoot(url: str, out: Path) -> None:
    with headless_chromium(1800, 1000) as driver:
        driver.get(url)  # the dashboard's URL with the admin token: it logs the browser in
        # the page redraws when the system changes: find elements afresh on every try
        wait = WebDriverWait(driver, 30, poll_frequency=0.1,
                             ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#graph g.node[data-id="{REJECTED}"]'))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#graph g.node[data-requests]'))
        driver.find_element(By.ID, "fit").click()  # the whole graph in the window
        wait.until(click_rejected)
        wait.until(lambda d: "parentRef[0]" in d.find_element(By.CSS_SELECTOR, "#details pre.explain").text)
        time.sleep(3)  # a few seconds of traffic in the rates
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))


async def main(out: Path) -> None:
    backends = {name: h.NameServer(name) for name in ("web", "api-v1", "api-v2", "payments")}
    ports = {"shop": free_port(SHOP), "api": free_port(API)}
    client = Client(ports)
    with tempfile.TemporaryDirectory(prefix="gateweave-screenshot-") as config:
        h.write_manifests(Path(config) / "shop.yaml", manifests(ports, backends))
        (Path(config) / "search.yaml").write_text(BROKEN)
        try:
            async with h.running_serve(config, start_timeout=30) as served:
                for _ in range(300):
                    reply = await h.fetch(SHOP, ports["shop"], "/", "www.shop.test")
                    if reply is not None and reply.status == 200:
                        break
                    await asyncio.sleep(0.1)
                client.thread.start()
                await asyncio.to_thread(shoot, served.admin.dashboard_url, out)
        finally:
            client.stop.set()
            for b in backends.values():
                b.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    asyncio.run(main(parser.parse_args().out))
