"""Standalone addressing through translate: which spec.addresses this host can bind (its
interface addresses are an input), --default-address, and which Gateway's listener gets an
(address, port) when several would bind it, or none may (a privileged port)."""

from __future__ import annotations

from typing import Any

from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from tests.support.conformance_objects import decoded

GWAPI = "gateway.networking.k8s.io/v1"
LOCAL = TranslateOptions(local_addresses=("10.0.0.5", "fd00::5"))


def gateway(
    name: str, address: str | None, *listeners: tuple[str, str, int], created: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {
        "gatewayClassName": "gc",
        "listeners": [{"name": n, "protocol": p, "port": port} for n, p, port in listeners],
    }
    if address is not None:
        spec["addresses"] = [{"type": "IPAddress", "value": address}]
    return {"apiVersion": GWAPI, "kind": "Gateway", "metadata": meta, "spec": spec}


def result(*gateways: dict[str, Any], options: TranslateOptions = LOCAL) -> Any:
    raws = [
        {
            "apiVersion": GWAPI,
            "kind": "GatewayClass",
            "metadata": {"name": "gc"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        *gateways,
    ]
    return translate(Snapshot.from_objects(decoded(raw).model for raw in raws), options)


def cond(status: dict[str, Any], type_: str) -> tuple[str, str, str]:
    c = next(c for c in status["conditions"] if c["type"] == type_)
    return c["status"], c["reason"], c["message"]


def listener(res: Any, gw: str, name: str) -> dict[str, Any]:
    status = res.statuses[("Gateway", "default", gw)]
    return next(entry for entry in status["listeners"] if entry["name"] == name)


HTTP = ("http", "HTTP", 80)


def test_a_local_or_unspecified_address_binds_as_given_and_others_are_not_usable() -> None:
    res = result(
        gateway("local", "10.0.0.5", HTTP),
        gateway("any", "0.0.0.0", ("http", "HTTP", 81)),
        gateway("v6", "fd00::5", HTTP),
        gateway("away", "10.0.0.6", HTTP),
    )
    assert res.infra["default/local"].address == "10.0.0.5"
    assert res.infra["default/any"].address == "0.0.0.0"
    assert res.infra["default/v6"].address == "fd00::5"
    assert res.statuses[("Gateway", "default", "local")]["addresses"] == [
        {"type": "IPAddress", "value": "10.0.0.5"}
    ]
    assert cond(res.statuses[("Gateway", "default", "away")], "Programmed") == (
        "False",
        "AddressNotUsable",
        "address 10.0.0.6 is not assigned to an interface of this host (nor is it 0.0.0.0 or ::)",
    )
    assert "default/away" not in res.infra
    # the same Gateway once the host has the address
    again = result(
        gateway("away", "10.0.0.6", HTTP), options=TranslateOptions(local_addresses=("10.0.0.6",))
    )
    assert again.infra["default/away"].address == "10.0.0.6"


def test_the_default_address_binds_gateways_without_spec_addresses() -> None:
    options = TranslateOptions(default_address="0.0.0.0")
    res = result(
        gateway("a", None, HTTP), gateway("b", None, ("http", "HTTP", 8080)), options=options
    )
    assert res.infra["default/a"].address == res.infra["default/b"].address == "0.0.0.0"
    pooled = result(gateway("a", None, HTTP))
    assert pooled.infra["default/a"].address.startswith("127.10.")
    away = result(gateway("a", None, HTTP), options=TranslateOptions(default_address="10.9.9.9"))
    assert cond(away.statuses[("Gateway", "default", "a")], "Programmed")[:2] == (
        "False",
        "AddressNotUsable",
    )


def test_the_older_gateway_keeps_an_overlapping_bind_and_the_other_listener_names_it() -> None:
    res = result(
        gateway(
            "new",
            "10.0.0.5",
            HTTP,
            ("dns", "UDP", 80),
            ("alt", "HTTP", 8080),
            created="2026-02-01T00:00:00Z",
        ),
        gateway("old", "0.0.0.0", HTTP, created="2026-01-01T00:00:00Z"),
        gateway("v6", "::", HTTP, created="2026-03-01T00:00:00Z"),
    )
    http = listener(res, "new", "http")
    assert cond(http, "Accepted") == (
        "False",
        "PortUnavailable",
        "TCP port 80 on 10.0.0.5 is held by Gateway default/old (bound at 0.0.0.0:80), "
        "which comes first (creationTimestamp, then namespace/name)",
    )
    assert cond(http, "Programmed")[:2] == ("False", "Invalid")
    for name in ("dns", "alt"):  # UDP 80 and TCP 8080 are other binds
        assert cond(listener(res, "new", name), "Accepted")[:2] == ("True", "Accepted")
    assert [p.port for p in res.infra["default/new"].ports] == [80, 8080]  # UDP 80, TCP 8080
    assert [p.protocol for p in res.infra["default/new"].ports] == ["UDP", "TCP"]
    assert cond(res.statuses[("Gateway", "default", "new")], "Programmed")[:2] == (
        "True",
        "Programmed",
    )
    assert [p.port for p in res.infra["default/old"].ports] == [80]
    assert [p.port for p in res.infra["default/v6"].ports] == [80]  # IPv6 is another family


def test_a_gateway_without_a_bindable_listener_is_not_programmed_in_words() -> None:
    res = result(
        gateway("a", "10.0.0.5", HTTP, created="2026-01-01T00:00:00Z"),
        gateway("b", "10.0.0.5", HTTP, created="2026-01-02T00:00:00Z"),
    )
    status = res.statuses[("Gateway", "default", "b")]
    programmed = cond(status, "Programmed")
    assert programmed[:2] == ("False", "Invalid") and "held by Gateway default/a" in programmed[2]
    assert "default/b" not in res.infra and "default/a" in res.infra


def test_privileged_ports_are_refused_in_words_when_the_process_may_not_bind_them() -> None:
    options = TranslateOptions(privileged_ports_below=1024)
    res = result(
        gateway("mixed", None, HTTP, ("alt", "HTTP", 8080)),
        gateway("low", None, HTTP),
        options=options,
    )
    words = (
        "port 80 is privileged: binding it needs root or CAP_NET_BIND_SERVICE, and this process "
        "has neither "
        "(net.ipv4.ip_unprivileged_port_start is 1024)"
    )
    assert cond(listener(res, "mixed", "http"), "Accepted") == ("False", "PortUnavailable", words)
    assert cond(listener(res, "mixed", "http"), "Programmed") == ("False", "Invalid", words)
    assert [p.port for p in res.infra["default/mixed"].ports] == [8080]
    assert cond(res.statuses[("Gateway", "default", "low")], "Programmed") == (
        "False",
        "Invalid",
        f"no listener is valid; {words}",
    )
    # as root (or with the capability) the same objects bind port 80
    assert [p.port for p in result(gateway("low", None, HTTP)).infra["default/low"].ports] == [80]
