"""The spec-letter inputs (issue 16, items 1-6) in the incremental translator's property tests.

The objects of tests/translate/test_spec_letter.py, each with a change that matters to those rules
(a
certificate Secret whose key stops matching, a hostname that stops overlapping, a ListenerSet
conflict that goes away, a BackendTLSPolicy switched to wellKnownCACertificates, its CA
ConfigMap made invalid, deleted and re-created...), go through the same machinery as
tests/translate/test_incremental.py: after every change the IncrementalTranslator in check mode must
equal a full translation.
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable
from typing import Any

from gateweave.api.decode import decode
from gateweave.store import key_of
from tests.support.incremental import DELETE, Driver, Op, check_random_plans, run_plan
from tests.support.specletter_objects import (
    backend_tls_policy,
    ca_configmap,
    endpoint_slice,
    gateway,
    gateway_class,
    http_route,
    https,
    key_pem,
    listener,
    listener_set,
    secret_for,
    service,
    tls_route,
    tls_secret,
)
from tests.support.variants import BASE, META, SPEC, Item, Universe, metadata_variant

Raw = dict[str, Any]


def _mismatched(raw: Raw) -> Raw:
    """The same certificate with another key."""
    out = copy.deepcopy(raw)
    out["data"]["tls.key"] = tls_secret("x", "", key_pem("ecdsa", variant=3))["data"]["tls.key"]
    return out


def _first_hostname(value: str) -> Callable[[Raw], Raw]:
    def change(raw: Raw) -> Raw:
        out = copy.deepcopy(raw)
        out["spec"]["listeners"][0]["hostname"] = value
        return out

    return change


def _move_listener(index: int, port: int) -> Callable[[Raw], Raw]:
    def change(raw: Raw) -> Raw:
        out = copy.deepcopy(raw)
        out["spec"]["listeners"][index]["port"] = port
        return out

    return change


def _well_known(raw: Raw) -> Raw:
    out = copy.deepcopy(raw)
    validation = out["spec"]["validation"]
    del validation["caCertificateRefs"]
    validation["wellKnownCACertificates"] = "System"
    return out


def _invalid_ca(raw: Raw) -> Raw:
    out = copy.deepcopy(raw)
    out["data"]["ca.crt"] = "not a certificate"
    return out


def _only_first_backend(raw: Raw) -> Raw:
    out = copy.deepcopy(raw)
    rule = out["spec"]["rules"][0]
    rule["backendRefs"] = rule["backendRefs"][:1]
    return out


def _objects() -> list[tuple[Raw, Callable[[Raw], Raw] | None]]:
    """(object, its SPEC change); None: a label alone."""
    return [
        (gateway_class(), None),
        (secret_for("foo", "foo.example.com"), _mismatched),
        (secret_for("wild", "*.example.com"), _mismatched),
        (secret_for("bar", "bar.test"), _mismatched),
        (secret_for("tls", "tls.example.com"), _mismatched),
        (
            gateway(
                [
                    https("wild", "*.example.com", "wild"),
                    https("foo", "foo.example.com", "foo"),
                    listener("http", 80, "HTTP"),
                    listener(
                        "passthrough", 8443, "TLS", "tls.example.com", tls={"mode": "Passthrough"}
                    ),
                    https("terminate", "tls.example.com", "tls", port=9443, protocol="TLS"),
                ],
                allow_sets=True,
            ),
            _first_hostname("*.example.org"),
        ),
        (
            listener_set(
                "ls",
                [
                    https("bar", "bar.example.com", "bar"),
                    listener("internal-http", 82, "HTTP"),
                    listener("internal-tcp", 82, "TCP"),
                ],
                created="2029-01-01T00:00:00Z",
            ),
            _move_listener(2, 84),
        ),
        (
            listener_set(
                "ls-conflicting",
                [listener("internal-tcp", 82, "TCP")],
                created="2030-01-01T00:00:00Z",
            ),
            _move_listener(0, 85),
        ),
        (service("secure"), None),
        (endpoint_slice("secure", "127.0.0.9"), None),
        (service("plain", port=8080, port_name="http"), None),
        (endpoint_slice("plain", "127.0.0.8", port=8080, port_name="http"), None),
        (ca_configmap("the-ca"), _invalid_ca),
        (backend_tls_policy("policy", "secure", ca_configmaps=["the-ca"]), _well_known),
        (http_route("r", [("secure", 8443, 1), ("plain", 8080, 1)]), _only_first_backend),
        (tls_route("through", "passthrough"), None),
        (tls_route("terminated", "terminate"), None),
    ]


def _decoded(raw: Raw) -> Any:
    dec, errors = decode(raw)
    assert dec is not None and not errors, errors
    return dec


@functools.cache
def universe() -> Universe:
    items = []
    for raw, change in _objects():
        spec = change(raw) if change is not None else metadata_variant(raw)
        base = _decoded(raw)
        items.append(Item(key_of(base), (base, _decoded(spec), _decoded(metadata_variant(raw)))))
    important = tuple(
        i
        for i, it in enumerate(items)
        if it.key.kind in ("Secret", "ConfigMap", "BackendTLSPolicy", "Gateway", "ListenerSet")
    )
    return Universe(tuple(items), important)


def test_spec_letter_set_incremental_equals_full() -> None:
    u = universe()

    check_random_plans(u, 40)


def test_every_spec_letter_object_changed_deleted_and_restored() -> None:
    u = universe()
    rng = random.Random(16)
    plan: list[Op] = []
    for i in rng.sample(range(len(u.items)), len(u.items)):
        plan += [(i, SPEC), (i, META), (-1, rng.randrange(8)), (i, DELETE), (i, BASE)]
    run_plan(u, plan)


def _route_refs(d: Driver) -> tuple[str, str]:
    result = d.translator(d.store.snapshot(), d.options())
    status: dict[str, Any] = result.statuses[("HTTPRoute", "default", "r")]
    (parent,) = status["parents"]
    (cond,) = [c for c in parent["conditions"] if c["type"] == "ResolvedRefs"]
    return cond["status"], cond["reason"]


def _listener_refs(d: Driver, name: str) -> tuple[str, str]:
    result = d.translator(d.store.snapshot(), d.options())
    status: dict[str, Any] = result.statuses[("Gateway", "default", "gw")]
    (entry,) = [e for e in status["listeners"] if e["name"] == name]
    (cond,) = [c for c in entry["conditions"] if c["type"] == "ResolvedRefs"]
    return cond["status"], cond["reason"]


def test_a_ca_configmap_appearing_redoes_the_routes_resolved_refs() -> None:
    u = universe()
    d = Driver(u)
    cm = next(i for i, it in enumerate(u.items) if it.key.kind == "ConfigMap")
    assert _route_refs(d) == ("True", "ResolvedRefs")
    d.apply((cm, DELETE))
    assert _route_refs(d) == ("False", "InvalidBackendTLS")
    d.apply((cm, BASE))
    assert _route_refs(d) == ("True", "ResolvedRefs")


def test_a_certificate_secret_change_redoes_the_listeners_using_it() -> None:
    u = universe()
    d = Driver(u)
    foo = next(
        i for i, it in enumerate(u.items) if it.key.kind == "Secret" and it.key.name == "foo"
    )
    assert _listener_refs(d, "foo") == ("True", "ResolvedRefs")
    d.apply((foo, SPEC))  # the key no longer matches the certificate
    assert _listener_refs(d, "foo") == ("False", "InvalidCertificateRef")
    d.apply((foo, BASE))
    assert _listener_refs(d, "foo") == ("True", "ResolvedRefs")
