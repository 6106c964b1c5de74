"""Backends by name, live: ``gateweave serve`` and its Envoy in a network namespace the test
makes, whose hosts file names the backends; real backends (TCP, and a unix socket) and a real
client in the same namespace.

Checked: an ExternalName Service and an FQDN EndpointSlice resolved through the namespace's
/etc/hosts by Envoy's getaddrinfo resolver (c-ares never runs), a Service switching from
addresses to a name while served, Envoy Gateway Backends of each endpoint type, a Backend
in another namespace without and with a ReferenceGrant, invalid Backends (a CEL rejection
located in its file, a field gateweave does not implement refused by name), and Envoy
Gateway's standalone quickstart served unchanged.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.data import EG_QUICKSTART
from tests.support.netns import Netns
from tests.support.netserve import (
    GW_ADDRESS,
    Serve,
    answers,
    condition,
    gateway_address,
    until,
    write,
)

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

EG = "gateway.envoyproxy.io"
EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
HOSTS = {
    "api.backends.test": "127.0.0.21",  # an ExternalName Service's name
    "web.backends.test": "127.0.0.22",  # an FQDN EndpointSlice's address
    "app.backends.test": "127.0.0.23",  # a Backend's fqdn endpoint
}


# ---------------------------------------------------------------- objects


def backend(
    name: str, endpoint: dict[str, Any], namespace: str = "default", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": f"{EG}/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"endpoints": [endpoint], **spec},
    }


def eg_ref(name: str, namespace: str | None = None) -> dict[str, Any]:
    ref = {"group": EG, "kind": "Backend", "name": name}
    return {**ref, "namespace": namespace} if namespace else ref


@pytest.fixture
def ns() -> Iterator[Netns]:
    space = Netns(HOSTS)
    try:
        yield space
    finally:
        space.close()


# ---------------------------------------------------------------- the tests


def test_backends_by_name_are_served(ns: Netns, tmp_path: Path, short_tmp: Path) -> None:
    servers: list[Any] = [
        ns.call(h.NameServer, "external", HOSTS["api.backends.test"]),
        ns.call(h.NameServer, "fqdn-slice", HOSTS["web.backends.test"]),
        ns.call(h.NameServer, "eg-fqdn", HOSTS["app.backends.test"]),
        ns.call(h.NameServer, "eg-ip", "127.0.0.24"),
        ns.call(h.NameServer, "shared", "127.0.0.25"),
        h.NameServer("eg-unix", unix=str(short_tmp / "app.sock")),
    ]
    external, web, app, eg_ip, shared, unix = servers
    config = tmp_path / "config"
    config.mkdir()
    write(
        config / "base.yaml",
        [
            h.gateway_class(),
            h.gateway(
                "gw",
                GW_ADDRESS,
                [h.listener("http", "HTTP", 8080, allowedRoutes={"namespaces": {"from": "All"}})],
            ),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "external", "namespace": "default"},
                "spec": {
                    "type": "ExternalName",
                    "externalName": "api.backends.test",
                    "ports": [{"name": "http", "port": external.port}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "web-names",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "web"},
                },
                "addressType": "FQDN",
                "endpoints": [{"addresses": ["web.backends.test"]}],
                "ports": [{"name": "http", "port": web.port}],
            },
            backend("eg-fqdn", {"fqdn": {"hostname": "app.backends.test", "port": app.port}}),
            backend("eg-ip", {"ip": {"address": "127.0.0.24", "port": eg_ip.port}}),
            backend("eg-unix", {"unix": {"path": unix.host}}),
            backend(
                "shared",
                {"ip": {"address": "127.0.0.25", "port": shared.port}},
                namespace="backends",
            ),
            h.http_route(
                "app",
                "gw",
                ["app.test"],
                [
                    h.rule("/external", [h.backend_ref("external", external.port)]),
                    h.rule("/fqdn-slice", [h.backend_ref("web", 80)]),
                    h.rule("/eg-fqdn", [eg_ref("eg-fqdn")]),
                    h.rule("/eg-ip", [eg_ref("eg-ip")]),
                    h.rule("/eg-unix", [eg_ref("eg-unix")]),
                ],
            ),
            h.http_route(
                "cross", "gw", ["cross.test"], [h.rule("/", [eg_ref("shared", "backends")])]
            ),
        ],
    )
    # a Service served by address first, then switched to a name (the same cluster, EDS -> DNS)
    switch = config / "switch.yaml"
    write(
        switch,
        [
            *h.service("switch", external.port, eg_ip.port, "127.0.0.24"),
            h.http_route(
                "switch",
                "gw",
                ["switch.test"],
                [h.rule("/", [h.backend_ref("switch", external.port)])],
            ),
        ],
    )
    serve = Serve(ns, config, tmp_path / "serve.log")
    try:
        until(
            answers(serve, "/external", "external"), 30, "the ExternalName Service answers", serve
        )
        for path, name in (
            ("/fqdn-slice", "fqdn-slice"),
            ("/eg-fqdn", "eg-fqdn"),
            ("/eg-ip", "eg-ip"),
            ("/eg-unix", "eg-unix"),
        ):
            until(answers(serve, path, name), 10, f"{path} answers", serve)

        # Names were resolved by getaddrinfo (the namespace's /etc/hosts), never by c-ares
        dump = serve.envoy_admin_get("/config_dump")
        assert (
            dump.count('"name": "envoy.network.dns_resolver.getaddrinfo"') >= 3
        )  # external, web, eg-fqdn
        stats = serve.envoy_admin_get("/stats")
        assert "cluster.default_external_" in stats
        assert not [line for line in stats.splitlines() if line.startswith("dns.cares")], (
            "a c-ares resolver ran"
        )
        hosts = serve.envoy_admin_get("/clusters")
        assert f"{HOSTS['api.backends.test']}:{external.port}::hostname::api.backends.test" in hosts

        # a Backend in another namespace: refused until a ReferenceGrant allows it
        until(
            answers(serve, "/", status=500, host="cross.test"),
            10,
            "cross: 500 without a grant",
            serve,
        )
        refs = condition(serve.get("HTTPRoute", "default", "cross"), "ResolvedRefs", parent=True)
        assert refs is not None and (refs["status"], refs["reason"]) == ("False", "RefNotPermitted")
        assert serve.get("Backend", "backends", "shared") is not None
        assert "status" not in (
            serve.get("Backend", "backends", "shared") or {}
        )  # no route of ours may use it
        write(
            config / "grant.yaml",
            [
                {
                    "apiVersion": "gateway.networking.k8s.io/v1beta1",
                    "kind": "ReferenceGrant",
                    "metadata": {"name": "routes", "namespace": "backends"},
                    "spec": {
                        "from": [
                            {
                                "group": "gateway.networking.k8s.io",
                                "kind": "HTTPRoute",
                                "namespace": "default",
                            }
                        ],
                        "to": [{"group": EG, "kind": "Backend"}],
                    },
                }
            ],
        )
        until(
            answers(serve, "/", "shared", host="cross.test"),
            10,
            "cross: served with the grant",
            serve,
        )
        until(
            lambda: (
                (c := condition(serve.get("Backend", "backends", "shared"), "Accepted"))
                and c["status"] == "True"
            ),
            10,
            "the shared Backend is Accepted",
            serve,
        )

        until(answers(serve, "/", "eg-ip", host="switch.test"), 10, "switch: by address", serve)
        write(
            switch,
            [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "switch", "namespace": "default"},
                    "spec": {
                        "type": "ExternalName",
                        "externalName": "api.backends.test",
                        "ports": [{"name": "p", "port": external.port}],
                    },
                },
                h.http_route(
                    "switch",
                    "gw",
                    ["switch.test"],
                    [h.rule("/", [h.backend_ref("switch", external.port)])],
                ),
            ],
        )
        until(answers(serve, "/", "external", host="switch.test"), 10, "switch: by name", serve)
        assert answers(serve, "/eg-unix", "eg-unix")() is not None  # the rest kept serving
    finally:
        serve.stop()
        for server in servers:
            server.close()


def test_invalid_backends_are_located_and_refused_by_name(ns: Netns, tmp_path: Path) -> None:
    good = ns.call(h.NameServer, "good", "127.0.0.31")
    config = tmp_path / "config"
    config.mkdir()
    write(
        config / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", GW_ADDRESS, [h.listener("http", "HTTP", 8080)]),
            h.http_route(
                "app",
                "gw",
                ["app.test"],
                [
                    h.rule("/good", [eg_ref("good")]),
                    h.rule("/refused", [eg_ref("refused")]),
                ],
            ),
        ],
    )
    good_file = config / "good.yaml"
    write(good_file, [backend("good", {"ip": {"address": "127.0.0.31", "port": good.port}})])
    refused_file = config / "refused.yaml"
    write(
        refused_file,
        [backend("refused", {"ip": {"address": "127.0.0.31", "port": good.port}}, fallback=True)],
    )
    serve = Serve(ns, config, tmp_path / "serve.log")
    try:
        until(answers(serve, "/good", "good"), 30, "the good Backend answers", serve)
        # a field gateweave does not implement: the Backend is not accepted, saying which; its route
        # gets 500
        until(answers(serve, "/refused", status=500), 10, "the refused Backend answers 500", serve)
        accepted = until(
            lambda: condition(serve.get("Backend", "default", "refused"), "Accepted"),
            10,
            "its status",
            serve,
        )
        assert (accepted["status"], accepted["reason"]) == ("False", "Invalid")
        assert (
            accepted["message"]
            == "The Backend was not accepted: spec.fallback is not supported by gateweave"
        )
        refs = condition(serve.get("HTTPRoute", "default", "app"), "ResolvedRefs", parent=True)
        assert refs is not None and (refs["reason"], refs["message"]) == (
            "BackendNotFound",
            "Backend default/refused is not accepted: spec.fallback is not supported by gateweave",
        )
        write(
            refused_file, [backend("refused", {"ip": {"address": "127.0.0.31", "port": good.port}})]
        )
        until(answers(serve, "/refused", "good"), 10, "fixed: it answers", serve)

        # a change the CRD's CEL rules reject: reported, located in its file
        write(
            good_file,
            [
                backend(
                    "good",
                    {
                        "ip": {"address": "127.0.0.31", "port": good.port},
                        "unix": {"path": "/run/x.sock"},
                    },
                )
            ],
        )
        errors = until(
            lambda: (e := serve.api("/api/errors")) and e["items"],
            10,
            "the rejection is reported",
            serve,
        )
        endpoint_line = (
            good_file.read_text().splitlines().index("  endpoints:") + 2
        )  # the offending field's line
        assert [(e["source"], e["kind"], e["name"], e["message"]) for e in errors] == [
            (
                f"{good_file}:{endpoint_line}",
                "Backend",
                "good",
                'spec.endpoints[0]: Invalid value: "object": only one of fqdn, ip or unix can be '
                "specified",
            )
        ]
        assert answers(serve, "/refused", "good")() is not None  # the rest keeps serving
    finally:
        serve.stop()
        good.close()


def test_envoy_gateways_standalone_quickstart_is_served_unchanged(
    ns: Netns, tmp_path: Path
) -> None:
    """Its Backend is 0.0.0.0:3000: in a namespace of its own, that port is free, so the objects
    are served exactly as written (no port rewritten)."""
    backend_server = ns.call(h.NameServer, "quickstart-backend", "0.0.0.0", 3000)
    config = tmp_path / "config"
    config.mkdir()
    source = EG_QUICKSTART
    shutil.copyfile(source, config / "quickstart.yaml")
    assert (config / "quickstart.yaml").read_bytes() == source.read_bytes()
    serve = Serve(ns, config, tmp_path / "serve.log", "--controller-name", EG_CONTROLLER)
    try:
        address = gateway_address(serve, "default", "eg")
        reply = until(
            answers(
                serve, "/", "quickstart-backend", host="www.example.com", address=address, port=8888
            ),
            30,
            "the quickstart answers through Envoy",
            serve,
        )
        assert reply.headers["x-backend"] == "quickstart-backend"
        until(
            lambda: (
                (c := condition(serve.get("Gateway", "default", "eg"), "Programmed"))
                and c["status"] == "True"
            ),
            10,
            "the Gateway is programmed",
            serve,
        )
        route = serve.get("HTTPRoute", "default", "backend")
        assert (
            route is not None and route["status"]["parents"][0]["controllerName"] == EG_CONTROLLER
        )
        assert {c["type"]: c["status"] for c in route["status"]["parents"][0]["conditions"]} == {
            "Accepted": "True",
            "ResolvedRefs": "True",
        }
        accepted = condition(serve.get("Backend", "default", "backend"), "Accepted")
        assert accepted is not None and (
            accepted["status"],
            accepted["reason"],
            accepted["message"],
        ) == ("True", "Accepted", "The Backend was accepted")
        assert serve.api("/api/errors") == {"items": []}
    finally:
        serve.stop()
        backend_server.close()
