"""Headless Chromium, driven by selenium: the dashboard's browser test and its screenshot
(scripts/dashboard_screenshot.py) use it.

Debian's ``chromium`` and ``chromium-driver`` (.ci/run installs them when missing) are found
on PATH; their absence is an error that says how to install them, never a skip. The browser
runs with a fresh profile and without anything that would reach the network (the machine's
network is closed): no sandbox (root), no GPU, no first-run, background networking,
component updates or sync.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

INSTALL_HINT = "apt-get install -y chromium chromium-driver (what .ci/run does)"


def _which(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(f"none of {', '.join(names)} on PATH: {INSTALL_HINT}")


@contextlib.contextmanager
def headless_chromium(width: int = 1600, height: int = 1000) -> Iterator[WebDriver]:
    """A Chromium window of ``width`` x ``height`` CSS pixels, quit (and its profile removed) on
    exit.
    """
    chromium = _which("chromium", "chromium-browser")
    driver_path = _which("chromedriver")
    with tempfile.TemporaryDirectory(prefix="gateweave-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in (
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
        ):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
        try:
            yield driver
        finally:
            driver.quit()
