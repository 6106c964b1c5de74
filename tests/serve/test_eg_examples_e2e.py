"""Envoy Gateway's published SecurityPolicy examples served unchanged, live.

Each directory of tests/data/eg-examples (the YAML of one of Envoy Gateway's security tasks,
README.md there) is served with Envoy Gateway's standalone quickstart, both as published, by a
real ``gateweave serve`` with Envoy Gateway's controller name, in a network namespace the test
makes (the quickstart's Backend is 0.0.0.0:3000, free there). Checked: every Gateway API object
and every policy of the directory is accepted (status from the admin API), nothing is reported as
a configuration error, and the requests of the task's "Testing" section get the answers the task
shows through the real Envoy.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateweave_bench import harness as h
from tests.support.data import EG_EXAMPLES, EG_QUICKSTART, yaml_files
from tests.support.netns import Netns
from tests.support.netserve import Serve, condition, until, write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
HOST = "www.example.com"  # the quickstart HTTPRoute's hostname
PORT = 8888  # the quickstart Gateway's HTTP listener
POLICY_KINDS = ("SecurityPolicy", "ClientTrafficPolicy")


class Example:
    """One example directory served with the quickstart."""

    def __init__(self, serve: Serve, address: str) -> None:
        self.serve = serve
        self.address = address

    def get(self, path: str = "/", headers: dict[str, str] | None = None) -> h.Reply | None:
        return self.serve.ns.call(
            h.fetch_sync, self.address, PORT, path, HOST, headers=headers or {}
        )

    def preflight(self, origin: str) -> tuple[int, dict[str, str]]:
        """A CORS preflight (``OPTIONS``), as the task's curl sends it."""

        def send() -> tuple[int, dict[str, str]]:
            conn = http.client.HTTPConnection(self.address, PORT, timeout=5)
            try:
                conn.request(
                    "OPTIONS",
                    "/",
                    headers={
                        "Host": HOST,
                        "Origin": origin,
                        "Access-Control-Request-Method": "GET",
                    },
                )
                resp = conn.getresponse()
                resp.read()
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}
            finally:
                conn.close()

        return self.serve.ns.call(send)


def answer(example: Example, status: int, **kw: Any) -> Callable[[], h.Reply | None]:
    """A probe: the quickstart's answer to a GET, once it has ``status``."""

    def probe() -> h.Reply | None:
        reply = example.get(**kw)
        return reply if reply is not None and reply.status == status else None

    return probe


@pytest.fixture
def ns() -> Iterator[Netns]:
    space = Netns({})
    try:
        yield space
    finally:
        space.close()


def example_files(name: str) -> list[Path]:
    return yaml_files(EG_EXAMPLES / name)


def objects_of(config: Path) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object in the directory ("" namespace: cluster-scoped)."""
    out = []
    for path in sorted(config.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                meta = doc["metadata"]
                namespace = (
                    "" if doc["kind"] == "GatewayClass" else meta.get("namespace", "default")
                )
                out.append((doc["kind"], namespace, meta["name"]))
    return out


@pytest.fixture
def served(ns: Netns, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Example]:
    """``gateweave serve`` on the quickstart plus the example directory named by the test's
    parameter, each file copied byte for byte, and (``extra``) what the task's shell commands
    create."""
    name, extra = request.param
    backend = ns.call(h.NameServer, "quickstart-backend", "0.0.0.0", 3000)
    config = tmp_path / "config"
    config.mkdir()
    sources = [EG_QUICKSTART, *example_files(name)]
    for source in sources:
        shutil.copyfile(source, config / f"{source.parent.name}-{source.name}")
    assert sorted(p.read_bytes() for p in config.iterdir()) == sorted(
        s.read_bytes() for s in sources
    )
    if extra:
        write(config / "created-by-the-task-commands.yaml", extra)
    serve = Serve(ns, config, tmp_path / "serve.log", "--controller-name", EG_CONTROLLER)
    try:
        gw = until(
            lambda: (
                (g := serve.get("Gateway", "default", "eg"))
                and g.get("status", {}).get("addresses")
            ),
            30,
            "the Gateway has an address",
            serve,
        )
        example = Example(serve, gw[0]["value"])
        assert_all_accepted(serve, objects_of(config))
        yield example
        assert serve.api("/api/errors") == {"items": []}
    finally:
        serve.stop()
        backend.close()


def assert_all_accepted(serve: Serve, objects: list[tuple[str, str, str]]) -> None:
    """Each object of the directory accepted (:func:`accepted`), eventually."""

    def holds() -> bool:
        items = (serve.api("/api/objects") or {"items": []})["items"]
        stored = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for o in items
        }
        return all(accepted(kind, stored.get((kind, ns, name))) for kind, ns, name in objects)

    until(holds, 30, f"every object accepted: {objects}", serve)


def accepted(kind: str, obj: dict[str, Any] | None) -> bool:
    """Whether ``obj`` (of ``kind``; None: not stored) is accepted as its kind says it: its own
    conditions, its route parents' or its policy ancestors'. Other kinds (Secret) pass."""
    if kind in ("GatewayClass", "Gateway", "Backend"):
        wanted = ("Accepted", "Programmed") if kind == "Gateway" else ("Accepted",)
        return all((c := condition(obj, t)) is not None and c["status"] == "True" for t in wanted)
    if kind == "HTTPRoute":
        parents = (obj or {}).get("status", {}).get("parents") or []
        return (
            len(parents) == 1
            and parents[0]["controllerName"] == EG_CONTROLLER
            and {c["type"]: c["status"] for c in parents[0]["conditions"]}
            == {"Accepted": "True", "ResolvedRefs": "True"}
        )
    if kind in POLICY_KINDS:
        ancestors = (obj or {}).get("status", {}).get("ancestors") or []
        return bool(ancestors) and all(
            entry["controllerName"] == EG_CONTROLLER
            and any(
                (c["type"], c["status"], c["reason"]) == ("Accepted", "True", "Accepted")
                for c in entry["conditions"]
            )
            for entry in ancestors
        )
    return True


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
        status, headers = served.preflight("http://www.foo.com")
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
        status, headers = served.preflight(origin)
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
