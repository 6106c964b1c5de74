"""Kubernetes addressing mode of translate (``address_mode="kubernetes"``): listeners bind
0.0.0.0, spec.addresses are requests for the Gateway's Envoy Service, and status.addresses
are the Service's (found by its labels). Pure: every test runs ``translate`` on objects."""

from __future__ import annotations

from typing import Any

import pytest

from gateweave import ir
from gateweave.api import models as m
from gateweave.api.decode import decode
from gateweave.snapshot import Snapshot
from gateweave.store import Store
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from gateweave.xds.build import build

KUBE = TranslateOptions(address_mode="kubernetes")
GW = ("Gateway", "default", "gw")


def objects(
    addresses: list[dict[str, str]] | None = None,
    service: dict[str, Any] | None = None,
    svc_labels: dict[str, str] | None = None,
) -> Snapshot:
    raws: list[dict[str, Any]] = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "gc"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {
                "gatewayClassName": "gc",
                "addresses": addresses or [],
                "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": 8080},
                    {"name": "dns", "protocol": "UDP", "port": 5353},
                ],
            },
        },
    ]
    if service is not None:
        raws.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "gateweave-gw",
                    "namespace": "default",
                    "labels": ir.envoy_labels("gw") if svc_labels is None else svc_labels,
                },
                **service,
            }
        )
    snap = Snapshot()
    for raw in raws:
        decoded, errors = decode(raw)
        assert decoded is not None, errors
        snap.add(decoded.model)
    return snap


def lb(ingress: list[dict[str, str]] | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", **spec}}
    if ingress is not None:
        out["status"] = {"loadBalancer": {"ingress": ingress}}
    return out


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_listeners_bind_any_address_and_infra_carries_ports() -> None:
    result = translate(objects(service=lb([{"ip": "203.0.113.7"}])), KUBE)
    xds = result.xds["default/gw"]
    assert xds.address == "0.0.0.0"
    built = build(xds)
    assert {lst.address.socket_address.address for lst in built.listeners.values()} == {"0.0.0.0"}
    infra = result.infra["default/gw"]
    assert infra.address == "0.0.0.0"
    assert [(p.port, p.protocol) for p in infra.ports] == [(5353, "UDP"), (8080, "TCP")]
    status = result.statuses[GW]
    assert status["addresses"] == [{"type": "IPAddress", "value": "203.0.113.7"}]
    assert conditions(status)["Programmed"] == ("True", "Programmed")


def test_standalone_mode_unchanged() -> None:
    result = translate(objects(service=lb([{"ip": "203.0.113.7"}])), TranslateOptions())
    address = result.xds["default/gw"].address
    assert address.startswith("127.10.")
    assert result.statuses[GW]["addresses"] == [{"type": "IPAddress", "value": address}]


def test_no_service_yet_is_address_not_assigned_but_served() -> None:
    result = translate(objects(), KUBE)
    status = result.statuses[GW]
    assert "addresses" not in status
    assert conditions(status)["Accepted"] == ("True", "Accepted")
    assert conditions(status)["Programmed"] == ("False", "AddressNotAssigned")
    # the configuration and the infrastructure (which creates the Service) are still generated
    assert "default/gw" in result.xds and "default/gw" in result.infra


def test_load_balancer_waits_for_ingress() -> None:
    status = translate(objects(service=lb()), KUBE).statuses[GW]
    assert "addresses" not in status
    assert conditions(status)["Programmed"] == ("False", "AddressNotAssigned")
    hostname = translate(
        objects(service=lb([{"hostname": "lb.example.com"}, {"ip": "198.51.100.1"}])), KUBE
    ).statuses[GW]
    assert hostname["addresses"] == [
        {"type": "Hostname", "value": "lb.example.com"},
        {"type": "IPAddress", "value": "198.51.100.1"},
    ]


def test_cluster_ip_service_uses_external_ips_then_cluster_ip() -> None:
    status = translate(
        objects(service={"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9"}}), KUBE
    ).statuses[GW]
    assert status["addresses"] == [{"type": "IPAddress", "value": "10.96.0.9"}]
    assert conditions(status)["Programmed"] == ("True", "Programmed")
    requested = [{"type": "IPAddress", "value": "192.0.2.10"}]
    svc = {"spec": {"type": "NodePort", "clusterIP": "10.96.0.9", "externalIPs": ["192.0.2.10"]}}
    status = translate(objects(requested, svc), KUBE).statuses[GW]
    assert status["addresses"] == [
        {"type": "IPAddress", "value": "192.0.2.10"},
        {"type": "IPAddress", "value": "10.96.0.9"},
    ]
    assert conditions(status)["Programmed"] == ("True", "Programmed")


def test_requested_address_goes_to_infra_and_must_be_obtained() -> None:
    requested = [{"type": "IPAddress", "value": "192.0.2.10"}]
    result = translate(objects(requested, lb([{"ip": "203.0.113.7"}])), KUBE)
    assert result.infra["default/gw"].requested_addresses == ("192.0.2.10",)
    status = result.statuses[GW]
    assert conditions(status)["Programmed"] == ("False", "AddressNotUsable")
    assert status["addresses"] == [{"type": "IPAddress", "value": "203.0.113.7"}]
    listener_statuses: list[dict[str, Any]] = status["listeners"]  # type: ignore[assignment]
    assert {conditions(lst)["Programmed"] for lst in listener_statuses} == {
        ("False", "AddressNotUsable")
    }
    got = translate(objects(requested, lb([{"ip": "192.0.2.10"}])), KUBE).statuses[GW]
    assert conditions(got)["Programmed"] == ("True", "Programmed")
    # non-loopback addresses are fine in Kubernetes mode (standalone would refuse them)
    standalone = translate(
        objects(requested, lb([{"ip": "192.0.2.10"}])), TranslateOptions()
    ).statuses[GW]
    assert conditions(standalone)["Programmed"] == ("False", "AddressNotUsable")


@pytest.mark.parametrize(
    "address",
    [{"type": "Hostname", "value": "gw.example.com"}, {"type": "example.com/Named", "value": "x"}],
)
def test_unsupported_address_types(address: dict[str, str]) -> None:
    result = translate(objects([address], lb([{"ip": "203.0.113.7"}])), KUBE)
    status = result.statuses[GW]
    assert conditions(status)["Accepted"] == ("False", "UnsupportedAddress")
    assert "addresses" not in status and "default/gw" not in result.infra


def test_service_found_by_labels_only() -> None:
    other = {"app.kubernetes.io/name": "something-else"}
    status = translate(
        objects(service=lb([{"ip": "203.0.113.7"}]), svc_labels=other), KUBE
    ).statuses[GW]
    assert conditions(status)["Programmed"] == ("False", "AddressNotAssigned")


def test_dataplane_ack_still_needed_once_addressed() -> None:
    from gateweave.translate.options import DataplaneState

    snap = objects(service=lb([{"ip": "203.0.113.7"}]))
    pending = TranslateOptions(address_mode="kubernetes", dataplane={})
    assert conditions(translate(snap, pending).statuses[GW])["Programmed"] == ("False", "Pending")
    acked = TranslateOptions(
        address_mode="kubernetes", dataplane={"default/gw": DataplaneState(acked=True)}
    )
    assert conditions(translate(snap, acked).statuses[GW])["Programmed"] == ("True", "Programmed")


def test_service_status_change_is_a_model_change() -> None:
    """A Service's status (written by Kubernetes) counts for translation; a Gateway's
    (written by us) does not."""
    store = Store()
    svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "default", "resourceVersion": "1"},
        "spec": {"type": "LoadBalancer"},
    }
    gw: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "g", "namespace": "default", "resourceVersion": "2"},
        "spec": {
            "gatewayClassName": "gc",
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
        },
    }
    for raw in (svc, gw):
        decoded, _ = decode(raw)
        assert decoded is not None
        store.apply(decoded, authoritative=True)
    svc2 = {
        **svc,
        "metadata": {**svc["metadata"], "resourceVersion": "3"},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}},
    }
    gw2 = {
        **gw,
        "metadata": {**gw["metadata"], "resourceVersion": "4"},
        "status": {
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "True",
                    "reason": "Accepted",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ]
        },
    }
    changes = []
    for raw in (svc2, gw2):
        decoded, _ = decode(raw)
        assert decoded is not None
        changes.append(store.apply(decoded, authoritative=True))
    assert [(ch.key.kind, ch.model_changed) for ch in changes if ch] == [
        ("Service", True),
        ("Gateway", False),
    ]
    model: m.Service = store.snapshot().services[("default", "s")]
    assert model.status.load_balancer.ingress[0].ip == "203.0.113.7"
