"""The admin API's bearer token: every endpoint but the probes (and /metrics unless asked)
refuses a client without it; the dashboard logs a browser in with ``/?token=`` and a
cookie; ``gateweave serve`` writes its token to the state directory, where ``gateweave
status`` finds it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from gateweave import app
from gateweave.admin import AdminServer
from gateweave.admintoken import COOKIE, TOKEN_ENV, TOKEN_FILE
from gateweave.infra.statedir import default_state_dir
from tests.serve.test_admin import serving_dir
from tests.support.data import QUICKSTART
from tests.support.serveproc import ServeProcess

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
PROTECTED = [
    "/api/ir",
    "/api/objects",
    "/api/errors",
    "/api/traffic",
    "/api/graph",
    "/api/logs/default/quickstart",
    "/api/explain/Gateway/default/quickstart",
    "/api/object?kind=Gateway&namespace=default&name=quickstart",
    "/",
    "/dashboard/dashboard.js",
]


@contextlib.asynccontextmanager
async def serving(metrics_auth: bool = False) -> AsyncIterator[AdminServer]:
    """``app.run`` on the quickstart (no data plane), its token in a file of ours."""
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text("s3cret-token\n")
        token_file.chmod(0o600)
        config = Path(tmp) / "config"
        config.mkdir()
        shutil.copy(QUICKSTART, config)
        settings = app.AdminSettings(
            "127.0.0.1:0", token_file=str(token_file), metrics_auth=metrics_auth
        )
        async with serving_dir(config, settings) as admin:
            assert admin.token == "s3cret-token"
            yield admin


async def test_every_endpoint_but_the_probes_needs_the_token() -> None:
    async with serving() as admin, aiohttp.ClientSession(admin.url) as session:
        for path in PROTECTED:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "Basic s3cret-token"},
                {"Cookie": f"{COOKIE}=wrong"},
            ):
                async with session.get(path, headers=headers, allow_redirects=False) as resp:
                    assert resp.status == 401, (path, headers)
                    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
                    body = await resp.text()
                    assert body.count("\n") == 1 and "token" in body and "/token" in body, (
                        body
                    )  # where it is
        for path in PROTECTED:
            async with session.get(path, headers=admin.headers) as resp:
                # no data plane here: no access log to show (404, past the token)
                assert resp.status == (404 if path.startswith("/api/logs/") else 200), path
        for path in ("/healthz", "/readyz", "/metrics"):
            async with session.get(path) as resp:
                assert resp.status == 200, path


async def test_metrics_auth_puts_metrics_behind_the_token() -> None:
    async with serving(metrics_auth=True) as admin, aiohttp.ClientSession(admin.url) as session:
        async with session.get("/metrics") as resp:
            assert resp.status == 401
        async with session.get("/metrics", headers=admin.headers) as resp:
            assert resp.status == 200 and "gateweave_translations_total" in await resp.text()
        async with session.get("/healthz") as resp:
            assert resp.status == 200


async def test_the_dashboard_logs_a_browser_in_with_a_cookie() -> None:
    async with serving() as admin:
        jar = aiohttp.CookieJar(unsafe=True)  # cookies for an IP address host
        async with aiohttp.ClientSession(admin.url, cookie_jar=jar) as browser:
            async with browser.get("/?token=wrong", allow_redirects=False) as resp:
                assert resp.status == 401
            assert len(jar) == 0
            async with browser.get(
                admin.dashboard_url.removeprefix(admin.url), allow_redirects=False
            ) as resp:
                assert (
                    resp.status == 303 and resp.headers["Location"] == "/"
                )  # the token leaves the address bar
                cookie = resp.headers["Set-Cookie"]
                assert cookie.startswith(f"{COOKIE}=s3cret-token;")
                assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
            # then the cookie alone: the page, its assets, its fetches and its event stream
            async with browser.get("/") as resp:
                assert resp.status == 200 and "<html" in (await resp.text()).lower()
            for path in ("/dashboard/dashboard.js", "/api/graph", "/api/errors", "/api/traffic"):
                async with browser.get(path) as resp:
                    assert resp.status == 200, path
            async with browser.get("/api/traffic/stream") as resp:
                assert resp.status == 200
                async with asyncio.timeout(10):
                    assert (await resp.content.readuntil(b"\n\n")).startswith(b"data: ")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return subprocess.run(
        [GATEWEAVE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**clean, **(env or {})},
    )


def test_status_finds_the_token_serve_wrote_to_its_state_directory(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(QUICKSTART, config)
    state = default_state_dir(str(config))  # no token file given: serve writes one there
    server = ServeProcess("--no-dataplane", "--config-dir", str(config), token_file=False)
    try:
        address = server.wait_listening().removeprefix("http://")
        written = state / TOKEN_FILE
        assert written.stat().st_mode & 0o777 == 0o600
        token = written.read_text().strip()
        assert len(token) >= 32

        done = run("status", "--admin-address", address, "--config-dir", str(config))
        assert done.returncode == 0 and "quickstart" in done.stdout, done.stderr

        refused = run("status", "--admin-address", address)  # no token anywhere
        lines = refused.stderr.strip().splitlines()
        assert (
            refused.returncode == 2
            and len(lines) == 1
            and "401" in lines[0]
            and "--admin-token-file" in lines[0]
        )

        explained = run(
            "explain",
            "Gateway",
            "default/quickstart",
            "--admin-address",
            address,
            env={TOKEN_ENV: token},
        )
        assert explained.returncode == 0 and "quickstart" in explained.stdout, explained.stderr
        assert (
            run(
                "explain",
                "Gateway",
                "default/quickstart",
                "--admin-address",
                address,
                env={TOKEN_ENV: "x"},
            ).returncode
            == 2
        )

        dashboard = run("dashboard", "--admin-address", address, "--config-dir", str(config))
        assert dashboard.stdout.strip() == f"http://{address}/?token={token}", dashboard.stderr
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    token.chmod(mode)
    for command in (
        [
            "serve",
            "--no-dataplane",
            "--config-dir",
            str(tmp_path),
            "--admin-address",
            "127.0.0.1:0",
        ],
        ["status", "--admin-address", "127.0.0.1:1"],
    ):
        done = run(*command, "--admin-token-file", str(token))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert (
            lines[0].startswith("error: ")
            and "readable by others" in lines[0]
            and f"chmod 600 {token}" in lines[0]
        )
