"""The stand-in for Envoy Gateway's static file server (its e2e ``static-file-server``): a
Deployment of that image serves what it mounts under its directory, on real sockets."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave_conformance import manifests as mf
from gateweave_conformance.backends import BackendError, Backends, echo_spec
from gateweave_conformance.echo import EchoSpec, start_echo
from gateweave_conformance.echo.__main__ import directory_files

NS = "gateway-conformance-infra"
JWKS = '{"keys": [{"kty": "RSA", "n": "u1SU", "e": "AQAB"}]}\n'


def _deployment(
    mounts: list[dict[str, Any]], volumes: list[dict[str, Any]], args: list[str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "static-file-server",
        "image": "envoyproxy/gateway-static-file-server",
        "volumeMounts": mounts,
    }
    if args is not None:
        container["args"] = args
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "static-file-server", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": "static-file-server"}},
            "template": {
                "metadata": {"labels": {"app": "static-file-server"}},
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    }


def _objects() -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        ("ConfigMap", NS, "jwt"): {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "jwt", "namespace": NS},
            "data": {"jwks.json": JWKS, "other.txt": "hello"},
        },
        ("Secret", NS, "keys"): {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "keys", "namespace": NS},
            "data": {"k": base64.b64encode(b"\x00secret").decode()},
        },
    }


def _lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    return _objects().get((kind, namespace, name))


def _pod(deployment: dict[str, Any]) -> mf.Pod:
    return mf.deployment_pods([deployment])[0]


def test_the_files_are_what_the_deployment_mounts_under_its_directory() -> None:
    items = [{"key": "jwks.json", "path": "k.json"}]
    deployment = _deployment(
        [
            {"name": "jwt", "mountPath": "/files/jwt"},
            {"name": "keys", "mountPath": "/files"},
            {"name": "elsewhere", "mountPath": "/etc/elsewhere"},  # not under ./files: not served
        ],
        [
            {"name": "jwt", "configMap": {"name": "jwt", "items": items}},
            {"name": "keys", "secret": {"secretName": "keys"}},
            {"name": "elsewhere", "configMap": {"name": "jwt"}},
        ],
    )
    spec = echo_spec(deployment, _pod(deployment), "127.20.62.1", _lookup)
    assert spec.mode == "files" and spec.files_port == 8080
    assert spec.files == (("/jwt/k.json", JWKS.encode()), ("/k", b"\x00secret"))
    # --dir and --port as the Go program reads them
    deployment = _deployment(
        [{"name": "jwt", "mountPath": "/srv/static/jwt"}],
        [{"name": "jwt", "configMap": {"name": "jwt"}}],
        ["--port", "9090", "--dir=/srv/static"],
    )
    spec = echo_spec(deployment, _pod(deployment), "127.20.62.1", _lookup)
    assert spec.files_port == 9090
    assert dict(spec.files) == {"/jwt/jwks.json": JWKS.encode(), "/jwt/other.txt": b"hello"}


def test_what_the_stand_in_cannot_serve_is_refused_by_name() -> None:
    missing = _deployment(
        [{"name": "jwt", "mountPath": "/files/jwt"}],
        [{"name": "jwt", "configMap": {"name": "nope"}}],
    )
    with pytest.raises(BackendError, match=f"/files/jwt: ConfigMap {NS}/nope not found"):
        echo_spec(missing, _pod(missing), "127.20.62.1", _lookup)
    https = _deployment(
        [{"name": "keys", "mountPath": "/etc/certs"}],
        [{"name": "keys", "secret": {"secretName": "keys"}}],
        ["--certPath=/etc/certs"],
    )
    with pytest.raises(BackendError, match=r"HTTPS \(--certPath\) is not supported"):
        echo_spec(https, _pod(https), "127.20.62.1", _lookup)


async def test_serves_the_files_by_path_and_404_otherwise() -> None:
    spec = EchoSpec(
        mode="files",
        host="127.20.62.2",
        files_port=0,
        files=(("/jwt/jwks.json", JWKS.encode()), ("/a b.txt", b"spaced")),
    )
    echo = await start_echo(spec)
    try:
        assert await echo.ready(5)
        base = f"http://127.20.62.2:{echo.ports['files']}"
        async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
            got = await client.get("/jwt/jwks.json")
            assert got.status_code == 200
            assert got.headers["content-type"] == "application/json"
            assert got.text == JWKS
            got = await client.get("/jwt/../jwt/./jwks.json?x=1")
            assert (got.status_code, got.text) == (200, JWKS)
            got = await client.get("/a%20b.txt")
            assert (got.status_code, got.headers["content-type"]) == (
                200,
                "text/plain; charset=utf-8",
            )
            for path in ("/jwt/", "/jwt/other.json", "/"):
                got = await client.get(path)
                assert (got.status_code, got.text) == (404, "404 page not found\n"), path
        assert any("GET /jwt/jwks.json" in line for line in echo.log_lines)
    finally:
        await echo.stop()


async def test_a_case_deployment_serves_through_its_service_endpoints() -> None:
    """As the runner runs it: the Deployment's replica, and the EndpointSlice of its Service
    pointing at the replica's address and the Service's target port."""
    deployment = _deployment(
        [{"name": "jwt", "mountPath": "/files/jwt"}],
        [{"name": "jwt", "configMap": {"name": "jwt"}}],
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "static-file-server", "namespace": NS},
        "spec": {
            "selector": {"app": "static-file-server"},
            "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
        },
    }
    objects = [deployment, service, *_objects().values()]
    backends = Backends("127.22")
    try:
        assert await backends.sync(objects, _lookup) == []
        (endpoint_slice,) = backends.endpoint_slices(objects)
        address = endpoint_slice["endpoints"][0]["addresses"][0]
        port = endpoint_slice["ports"][0]["port"]
        async with httpx.AsyncClient(trust_env=False) as client:
            got = await client.get(f"http://{address}:{port}/jwt/jwks.json")
        assert (got.status_code, got.text) == (200, JWKS)
        # the Deployment gone, so is its file server
        assert await backends.sync([service], _lookup) == []
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(trust_env=False) as client:
                await client.get(f"http://{address}:{port}/jwt/jwks.json")
    finally:
        await backends.close()


def test_the_cli_serves_a_directory(tmp_path: Path) -> None:
    (tmp_path / "jwt").mkdir()
    (tmp_path / "jwt" / "jwks.json").write_text(JWKS)
    (tmp_path / "top.txt").write_bytes(b"t")
    assert directory_files(tmp_path) == (("/jwt/jwks.json", JWKS.encode()), ("/top.txt", b"t"))
