"""Standalone serving real clients, the whole of it at once (issue 13's combined check):
``gateweave serve``, its Envoys and the backends in one network namespace the test makes, a
client in another, joined by a veth pair (traffic stays between the two).

The client reaches, over the veth, a Gateway bound to the server end's address in
``spec.addresses`` and a Gateway without addresses that ``--default-address 0.0.0.0`` binds
on every interface; both route to backends named only by DNS or by a path: an ExternalName
Service (its name in the server namespace's hosts file), an FQDN EndpointSlice (likewise)
and an Envoy Gateway ``Backend`` whose endpoint is a unix socket.

The parts are each checked in more depth elsewhere: addresses in
tests/serve/test_addresses_e2e.py, backends by name and Envoy Gateway's standalone quickstart
in tests/serve/test_backends_e2e.py, GatewayParameters (concurrency in ``/server_info``, an
override on one Gateway, invalid parameters) in tests/serve/test_parameters_e2e.py.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.netns import Netns, link
from tests.support.netserve import Serve, condition, until, write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

SERVER, CLIENT = "10.232.0.1", "10.232.0.2"  # the veth pair's ends
HOSTS = {
    "api.backends.test": "127.0.0.41",
    "web.backends.test": "127.0.0.42",
}  # the server namespace's hosts file
EG = "gateway.envoyproxy.io"


@pytest.fixture
def hosts() -> Iterator[tuple[Netns, Netns]]:
    """The server's namespace (with its hosts file) and the client's, joined by a veth pair;
    both deleted after, with the server's /etc/netns directory."""
    server = Netns(HOSTS)
    try:
        client = Netns({})
        try:
            link(server, client, SERVER, CLIENT)
            yield server, client
        finally:
            client.close()
    finally:
        server.close()
    assert not server.etc.exists() and not client.etc.exists()


def objects(external: int, web: int, socket: str) -> list[dict[str, Any]]:
    public = h.gateway("public", SERVER, [h.listener("http", "HTTP", 8080)])
    everywhere = h.gateway("everywhere", SERVER, [h.listener("http", "HTTP", 8081)])
    del everywhere["spec"]["addresses"]  # --default-address decides
    route = h.http_route(
        "app",
        "public",
        ["app.example.com"],
        [
            h.rule("/external", [h.backend_ref("external", external)]),
            h.rule("/fqdn", [h.backend_ref("web", 80)]),
            h.rule("/unix", [{"group": EG, "kind": "Backend", "name": "unix"}]),
        ],
    )
    route["spec"]["parentRefs"] = [{"name": "public"}, {"name": "everywhere"}]
    return [
        h.gateway_class(),
        public,
        everywhere,
        route,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": h.meta("external"),
            "spec": {"type": "ExternalName", "externalName": "api.backends.test"},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": h.meta("web"),
            "spec": {"ports": [{"name": "http", "port": 80}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": h.meta("web-names", labels={"kubernetes.io/service-name": "web"}),
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["web.backends.test"]}],
            "ports": [{"name": "http", "port": web}],
        },
        {
            "apiVersion": f"{EG}/v1alpha1",
            "kind": "Backend",
            "metadata": h.meta("unix"),
            "spec": {"endpoints": [{"unix": {"path": socket}}]},
        },
    ]


def served_all(serve: Serve, gateway: str) -> bool:
    """Whether the access log of ``gateway`` shows each backend answering 200 to the client's
    address (a backend by its Service or Backend name)."""
    reply = serve.admin_get(f"/api/logs/default/{gateway}")
    lines = [
        json.loads(line)
        for line in (reply.body if reply is not None else "").splitlines()
        if line.strip()
    ]
    return {
        entry["backend"].split("/")[1]
        for entry in lines
        if entry["response_code"] == 200 and entry["downstream_address"].startswith(f"{CLIENT}:")
    } == {"external", "web", "unix"}


def programmed(serve: Serve, gateway: str) -> dict[str, Any] | None:
    obj = serve.get("Gateway", "default", gateway)
    return obj if (condition(obj, "Programmed") or {}).get("status") == "True" else None


def test_a_client_in_another_namespace_reaches_backends_by_name(
    hosts: tuple[Netns, Netns], tmp_path: Path, short_tmp: Path
) -> None:
    server, client = hosts
    backends: list[Any] = [
        server.call(h.NameServer, "external", HOSTS["api.backends.test"]),
        server.call(h.NameServer, "fqdn", HOSTS["web.backends.test"]),
        h.NameServer("unix", unix=str(short_tmp / "app.sock")),
    ]
    external, web, unix = backends
    config = tmp_path / "config"
    config.mkdir()
    write(config / "objects.yaml", objects(external.port, web.port, unix.host))
    serve = Serve(server, config, tmp_path / "serve.log", "--default-address", "0.0.0.0")

    def answers(port: int, path: str, name: str) -> Any:
        def probe() -> h.Reply | None:
            reply = client.call(h.fetch_sync, SERVER, port, path, "app.example.com")
            return (
                reply if reply is not None and reply.status == 200 and reply.body == name else None
            )

        return probe

    try:
        for port in (8080, 8081):
            for path, name in (("/external", "external"), ("/fqdn", "fqdn"), ("/unix", "unix")):
                reply = until(
                    answers(port, path, name),
                    30,
                    f"the client gets {name} through port {port}",
                    serve,
                )
                assert reply.headers["x-backend"] == name

        # the statuses say where each Gateway is bound and that everything resolved
        for name, address in (("public", SERVER), ("everywhere", "0.0.0.0")):
            gateway = until(
                functools.partial(programmed, serve, name), 10, f"{name} is Programmed", serve
            )
            assert gateway["status"]["addresses"] == [{"type": "IPAddress", "value": address}]
        route = serve.get("HTTPRoute", "default", "app") or {}
        for parent in route["status"]["parents"]:
            assert {c["type"]: c["status"] for c in parent["conditions"]} == {
                "Accepted": "True",
                "ResolvedRefs": "True",
            }
        accepted = condition(serve.get("Backend", "default", "unix"), "Accepted")
        assert accepted is not None and accepted["status"] == "True"

        # the access logs say the requests came from the client's end of the veth, to each backend
        for name in ("public", "everywhere"):
            until(
                functools.partial(served_all, serve, name),
                10,
                f"{name}'s access log shows the client's requests",
                serve,
            )
    finally:
        serve.stop()
        for backend in backends:
            backend.close()
