"""The invariants over systems with backends by name: incremental translation equals a full one,
the same objects in any order translate byte for byte the same, and whatever the order of
events the runtime publishes ``translate(final objects)``.

The objects are tests/data/backends/system.yaml: Envoy Gateway Backends of every endpoint
type (with TLS, refused fields, across namespaces), ExternalName Services, FQDN and mixed
EndpointSlices, the ReferenceGrant, ConfigMap and Secret they depend on.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.api.decode import Decoded, decode
from gateweave.store import key_of
from tests.support.backends import raws
from tests.support.fingerprint import fingerprint
from tests.support.incremental import Op, ops, run_plan
from tests.support.orders import Step, plans, run_on_store
from tests.support.variants import Item, Universe, metadata_variant, spec_variant


def _spec_change(raw: dict[str, Any]) -> dict[str, Any]:
    """A change that matters to translate, for the kinds this system is about (the shared
    variants for the others)."""
    kind, name = raw["kind"], raw["metadata"]["name"]
    out = copy.deepcopy(raw)
    spec = out.get("spec") or {}
    if kind == "Backend":
        if name == "fallback":  # no longer refused
            spec.pop("fallback")
            spec["endpoints"][0].pop("zone")
        elif name == "tls":
            spec["tls"] = {"insecureSkipVerify": True}
        else:
            ep = spec["endpoints"][0]
            for what in ("ip", "fqdn"):
                if what in ep:
                    ep[what]["port"] += 1
            if "unix" in ep:
                ep["unix"]["path"] += ".2"
    elif kind == "Service" and spec.get("type") == "ExternalName":
        spec["externalName"] = "moved." + spec["externalName"]
    elif kind == "EndpointSlice" and out.get("addressType") == "FQDN":
        out["endpoints"][0]["addresses"] = ["moved.example.internal"]
    elif kind in ("TCPRoute", "UDPRoute"):  # their first backendRef is a Backend: no port to change
        spec["rules"][0]["backendRefs"][0]["weight"] = 7
    elif kind == "Secret":
        out["stringData"] = {"tls.crt": "not a certificate", "tls.key": "not a key"}
    else:
        return spec_variant(raw)
    return out


def _decoded(raw: dict[str, Any]) -> Decoded:
    dec, errors = decode(raw)
    assert dec is not None, errors
    return dec


@functools.cache
def system() -> Universe:
    items = tuple(
        Item(key_of(base), (base, _decoded(_spec_change(raw)), _decoded(metadata_variant(raw))))
        for raw in raws()
        for base in [_decoded(raw)]
    )
    # what other objects depend on most: changed more often
    important = tuple(
        i
        for i, it in enumerate(items)
        if it.key.kind in ("Secret", "ConfigMap", "ReferenceGrant", "Gateway")
        or (it.key.kind, it.key.name)
        in (
            ("Backend", "tls"),
            ("Backend", "fallback"),
            ("Backend", "shared"),
            ("Service", "external"),
        )
    )
    return Universe(items, important)


def _index(kind: str, name: str) -> int:
    return next(
        i for i, it in enumerate(system().items) if (it.key.kind, it.key.name) == (kind, name)
    )


def test_the_variants_change_what_they_should() -> None:
    for item in system().items:
        base, spec, _ = (v.raw for v in item.versions)
        if item.key.kind in (
            "Backend",
            "Service",
            "EndpointSlice",
            "Secret",
            "HTTPRoute",
            "TCPRoute",
            "UDPRoute",
            "Gateway",
        ):
            assert {k: v for k, v in spec.items() if k != "metadata"} != {
                k: v for k, v in base.items() if k != "metadata"
            }, item.key


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=ops(system(), max_size=40), batch=st.sampled_from((1, 1, 4)))
def test_incremental_equals_full(plan: list[Op], batch: int) -> None:
    run_plan(system(), plan, batch)  # IncrementalMismatch on the first difference


def test_incremental_equals_full_when_what_a_backend_depends_on_changes() -> None:
    """The changes the random plans may miss: each dependency of a Backend changes, then back."""
    for kind, name in (
        ("Secret", "client"),
        ("ConfigMap", "ca"),
        ("ReferenceGrant", "routes-from-apps"),
        ("Backend", "tls"),
        ("Backend", "fallback"),
        ("Service", "external"),
    ):
        i = _index(kind, name)
        run_plan(system(), [(i, 1), (i, 2), (i, 3), (i, 0)])


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=ops(system(), max_size=20))
def test_incremental_equals_full_in_kubernetes_address_mode(plan: list[Op]) -> None:
    run_plan(system(), plan, address_mode="kubernetes")


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_any_permutation_gives_identical_output(data: st.DataObject) -> None:
    objects = [it.versions[0].model for it in system().items]
    expected = fingerprint(objects)
    assert (
        b"Backend/" in expected and b"example.internal" in expected
    )  # the system is in the output
    assert fingerprint(data.draw(st.permutations(objects))) == expected


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=plans(system(), max_extra=30))
def test_any_interleaving_through_the_store_converges(steps: list[Step]) -> None:
    asyncio.run(run_on_store(system(), steps))
