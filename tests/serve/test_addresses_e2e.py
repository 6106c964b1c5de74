"""Real addresses, live: ``gateweave serve`` and its Envoys in one network namespace the test
makes, a client in another, joined by a veth pair the test makes (traffic stays between them).

Checked: a Gateway bound to the veth address in spec.addresses answers the other namespace;
with ``--default-address 0.0.0.0`` a Gateway without spec.addresses binds every interface; an
address not assigned here is AddressNotUsable until it is assigned (serve sees the change and
binds it); two Gateways on one address and port: the older keeps it, the other's listener
says which Gateway holds it while its other port is served; run as an unprivileged user
(uid 65534), a listener on port 80 is refused in words and the Gateway's other port served.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
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

SERVER, CLIENT = "10.231.0.1", "10.231.0.2"  # the veth pair's ends
LATER = "10.231.0.5"  # assigned to the server's end while serve runs
ELSEWHERE = "192.0.2.99"  # never assigned here


def gateway(
    name: str,
    listeners: list[dict[str, Any]],
    address: str | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    meta = h.meta(name)
    if created is not None:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"gatewayClassName": h.CLASS, "listeners": listeners}
    if address is not None:
        spec["addresses"] = [{"type": "IPAddress", "value": address}]
    return {"apiVersion": f"{h.G}/v1", "kind": "Gateway", "metadata": meta, "spec": spec}


def route(gateways: list[str]) -> dict[str, Any]:
    out = h.http_route("app", gateways[0], ["app.test"], [h.rule("/", [h.backend_ref("app", 80)])])
    out["spec"]["parentRefs"] = [{"name": g} for g in gateways]
    return out


def listener_conditions(serve: Serve, gateway: str, listener: str) -> dict[str, dict[str, Any]]:
    obj = serve.get("Gateway", "default", gateway) or {}
    for entry in obj.get("status", {}).get("listeners", []):
        if entry["name"] == listener:
            return {c["type"]: c for c in entry["conditions"]}
    return {}


@pytest.fixture
def pair() -> Iterator[tuple[Netns, Netns]]:
    server, client = Netns({}), Netns({})
    try:
        link(server, client, SERVER, CLIENT)
        yield server, client
    finally:
        client.close()
        server.close()


def test_gateways_bind_real_addresses_reachable_from_another_namespace(
    pair: tuple[Netns, Netns], tmp_path: Path
) -> None:
    server, client = pair
    backend = server.call(h.NameServer, "app", "127.0.0.1")
    config = tmp_path / "config"
    config.mkdir()
    names = ["veth", "late", "everywhere", "elsewhere", "later"]
    write(
        config / "objects.yaml",
        [
            h.gateway_class(),
            gateway(
                "veth", [h.listener("http", "HTTP", 8080)], SERVER, created="2026-01-01T00:00:00Z"
            ),
            gateway(
                "late",
                [h.listener("http", "HTTP", 8080), h.listener("other", "HTTP", 8090)],
                SERVER,
                created="2026-06-01T00:00:00Z",
            ),
            gateway("everywhere", [h.listener("http", "HTTP", 8081)]),
            gateway("elsewhere", [h.listener("http", "HTTP", 8083)], ELSEWHERE),
            gateway("later", [h.listener("http", "HTTP", 8082)], LATER),
            route(names),
            *h.service("app", 80, backend.port),
        ],
    )
    serve = Serve(server, config, tmp_path / "serve.log", "--default-address", "0.0.0.0")

    def answers(address: str, port: int) -> Any:
        def probe() -> Any:
            reply = client.call(h.fetch_sync, address, port, "/", "app.test")
            return (
                reply if reply is not None and reply.status == 200 and reply.body == "app" else None
            )

        return probe

    try:
        until(answers(SERVER, 8080), 30, "the veth Gateway answers the other namespace", serve)
        until(answers(SERVER, 8081), 10, "the 0.0.0.0 Gateway answers on the veth address", serve)
        until(answers(SERVER, 8090), 10, "the late Gateway's other port answers", serve)

        def programmed(name: str) -> bool:
            return (condition(serve.get("Gateway", "default", name), "Programmed") or {}).get(
                "status"
            ) == "True"

        until(
            lambda: all(programmed(n) for n in ("veth", "late", "everywhere")),
            10,
            "statuses follow",
            serve,
        )
        veth = serve.get("Gateway", "default", "veth") or {}
        assert veth["status"]["addresses"] == [{"type": "IPAddress", "value": SERVER}]
        everywhere = serve.get("Gateway", "default", "everywhere") or {}
        assert everywhere["status"]["addresses"] == [{"type": "IPAddress", "value": "0.0.0.0"}]

        # the same address and port: the older Gateway keeps it, the other's listener names it
        late = listener_conditions(serve, "late", "http")
        assert (late["Accepted"]["status"], late["Accepted"]["reason"]) == (
            "False",
            "PortUnavailable",
        )
        assert (
            "default/veth" in late["Accepted"]["message"]
            and f"{SERVER}:8080" in late["Accepted"]["message"]
        )
        assert late["Programmed"]["status"] == "False"
        assert listener_conditions(serve, "late", "other")["Programmed"]["status"] == "True"

        # an address not assigned here: AddressNotUsable...
        for name, address in (("elsewhere", ELSEWHERE), ("later", LATER)):
            refused = condition(serve.get("Gateway", "default", name), "Programmed") or {}
            assert (refused.get("status"), refused.get("reason")) == (
                "False",
                "AddressNotUsable",
            ), name
            assert address in refused["message"], name
        # ... until it is: serve sees the interface change and binds it
        subprocess.run(
            ["ip", "-n", server.name, "addr", "add", f"{LATER}/24", "dev", "gw0"], check=True
        )
        until(answers(LATER, 8082), 30, "the Gateway on the newly assigned address answers", serve)
        until(
            lambda: (
                (serve.get("Gateway", "default", "later") or {}).get("status", {}).get("addresses")
                == [{"type": "IPAddress", "value": LATER}]
            ),
            10,
            "its status.addresses names it",
            serve,
        )
    finally:
        serve.stop()
        server.call(backend.close)


def test_a_privileged_port_without_the_capability_is_refused_in_words(tmp_path: Path) -> None:
    ns = Netns({})
    config = Path(tempfile.mkdtemp(prefix="gw-nobody-"))  # readable by uid 65534
    try:
        config.chmod(0o755)
        write(
            config / "objects.yaml",
            [
                h.gateway_class(),
                gateway(
                    "mixed",
                    [h.listener("low", "HTTP", 80), h.listener("high", "HTTP", 8080)],
                    "127.10.9.1",
                ),
                gateway("low", [h.listener("low", "HTTP", 80)], "127.10.9.2"),
                route(["mixed"]),
            ],
        )
        (config / "objects.yaml").chmod(0o644)
        backend = ns.call(h.NameServer, "app", "127.0.0.1")
        write(config / "backend.yaml", h.service("app", 80, backend.port))
        (config / "backend.yaml").chmod(0o644)
        state = Path(
            tempfile.mkdtemp(prefix="gw-nobody-state-")
        )  # serve makes its state directory in it
        os.chown(state, 65534, 65534)
        serve = Serve(
            ns,
            config,
            tmp_path / "serve.log",
            state=state / "state",
            prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
        )
        try:

            def served() -> Any:
                reply = serve.fetch("127.10.9.1", 8080, "/", "app.test")
                return reply if reply is not None and reply.status == 200 else None

            until(served, 30, "the unprivileged port answers", serve)
            until(
                lambda: (
                    (condition(serve.get("Gateway", "default", "mixed"), "Programmed") or {}).get(
                        "status"
                    )
                    == "True"
                ),
                10,
                "the Gateway with a bindable port is Programmed",
                serve,
            )
            assert all(Path(f"/proc/{pid}").stat().st_uid == 65534 for pid in serve.envoys())
            low = listener_conditions(serve, "mixed", "low")
            assert (low["Accepted"]["status"], low["Accepted"]["reason"]) == (
                "False",
                "PortUnavailable",
            )
            assert low["Programmed"]["status"] == "False"
            words = low["Programmed"]["message"]
            assert "port 80 is privileged" in words and "CAP_NET_BIND_SERVICE" in words, words
            only_low = condition(serve.get("Gateway", "default", "low"), "Programmed") or {}
            assert only_low.get("status") == "False" and "port 80 is privileged" in only_low.get(
                "message", ""
            ), only_low
        finally:
            serve.stop()
            ns.call(backend.close)
            shutil.rmtree(state, ignore_errors=True)
    finally:
        ns.close()
        for child in config.iterdir():
            child.unlink()
        config.rmdir()
