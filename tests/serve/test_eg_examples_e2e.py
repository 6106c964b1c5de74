"""Envoy Gateway's published SecurityPolicy examples served unchanged, live.

Each directory of tests/data/eg-examples (the YAML of one of Envoy Gateway's security tasks,
README.md there) is served with Envoy Gateway's standalone quickstart, both as published, by a
real ``gateweave serve`` with Envoy Gateway's controller name, in a network namespace the test
makes (the quickstart's Backend is 0.0.0.0:3000, free there). Checked: every Gateway API object
and every policy of the directory is accepted (status from the admin API), nothing is reported as
a configuration error, and the requests of the task's "Testing" section get the answers the task
shows through the real Envoy (tests/support/eg_examples.py). The traffic tasks' examples:
test_eg_traffic_examples_e2e.py.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.eg_examples import Example, answer, serving
from tests.support.netns import Netns
from tests.support.netserve import until

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]


def preflight(example: Example, origin: str) -> tuple[int, dict[str, str]]:
    """A CORS preflight (``OPTIONS``), as the task's curl sends it."""
    reply = example.request(
        "OPTIONS", "/", {"Origin": origin, "Access-Control-Request-Method": "GET"}
    )
    return (0, {}) if reply is None else (reply.status, dict(reply.headers))


@pytest.fixture
def served(ns: Netns, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Example]:
    """``gateweave serve`` on the standalone quickstart plus the example directory named by the
    test's parameter, and (``extra``) what the task's shell commands create."""
    name, extra = request.param
    backend = ns.call(h.NameServer, "quickstart-backend", "0.0.0.0", 3000)
    try:
        with serving(ns, tmp_path, [name], extra) as example:
            yield example
    finally:
        backend.close()


def htpasswd_secret(name: str, user: str, password: str) -> dict[str, Any]:
    """What ``htpasswd -cbs .htpasswd USER PASSWORD`` then ``kubectl create secret generic NAME
    --from-file=.htpasswd`` create."""
    digest = base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
    line = f"{user}:{{SHA}}{digest}\n"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "Opaque",
        "data": {".htpasswd": base64.b64encode(line.encode()).decode()},
    }


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize(
    "served", [("basic-auth", [htpasswd_secret("basic-auth", "foo", "bar")])], indirect=True
)
def test_basic_auth_task(served: Example) -> None:
    """Without credentials 401; ``curl -u 'foo:bar'`` reaches the backend."""
    reply = until(answer(served, 401), 30, "401 without credentials", served.serve)
    assert reply.body == "User authentication failed. Missing username and password."
    reply = until(answer(served, 200, headers=basic("foo", "bar")), 10, "foo:bar gets through")
    assert reply.headers["x-backend"] == "quickstart-backend"
    wrong = served.get(headers=basic("foo", "wrong"))
    assert wrong is not None and wrong.status == 401


@pytest.mark.parametrize("served", [("apikey-auth", [])], indirect=True)
def test_apikey_auth_task(served: Example) -> None:
    """Without a key 401; ``x-api-key: supersecret`` reaches the backend."""
    until(answer(served, 401), 30, "401 without a key", served.serve)
    reply = until(
        answer(served, 200, headers={"x-api-key": "supersecret"}), 10, "the key gets through"
    )
    assert reply.headers["x-backend"] == "quickstart-backend"


@pytest.mark.parametrize("served", [("cors", [])], indirect=True)
def test_cors_task(served: Example) -> None:
    """A preflight from http://www.foo.com gets the task's CORS headers; one from
    http://www.bar.com or http://www.foo.com:8080 is not allowed."""

    def allowed() -> dict[str, str] | None:
        status, headers = preflight(served, "http://www.foo.com")
        return headers if status == 200 and "access-control-allow-origin" in headers else None

    headers = until(allowed, 30, "the preflight is answered", served.serve)
    assert {k: v for k, v in headers.items() if k.startswith("access-control-")} == {
        "access-control-allow-origin": "http://www.foo.com",
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, POST",
        "access-control-allow-headers": "x-header-1, x-header-2",
        "access-control-expose-headers": "x-header-3, x-header-4",
    }
    for origin in ("http://www.bar.com", "http://www.foo.com:8080"):
        # Answered by Envoy (not forwarded) without access-control-allow-origin: the origin is not
        # allowed (Envoy still lists the policy's methods and headers, as for Envoy Gateway).
        status, headers = preflight(served, origin)
        assert status == 200, origin
        assert "access-control-allow-origin" not in headers, (origin, headers)


@pytest.mark.parametrize("served", [("restrict-ip-access", [])], indirect=True)
def test_restrict_ip_access_task(served: Example) -> None:
    """From the test's own address (not in 10.0.1.0/24) 403; with ``X-Forwarded-For: 10.0.1.1``
    (the one hop the ClientTrafficPolicy trusts) the backend answers."""
    reply = until(answer(served, 403), 30, "403 from outside the allowed range", served.serve)
    assert reply.body == "RBAC: access denied"
    until(
        answer(served, 200, headers={"X-Forwarded-For": "10.0.1.1"}),
        10,
        "an allowed client address gets through",
    )
