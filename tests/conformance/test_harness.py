"""The conformance harness itself: expect evaluation, TLS
material, manifests, the offline replay.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from gateweave_conformance import expect as ex
from gateweave_conformance import generated, offline, tlsgen
from gateweave_conformance import manifests as mf
from gateweave_conformance.cases import CaseError, ExpectStep, parse_case, parse_step
from tests.support.data import MANIFESTS

CTRL = "example.io/ctrl"
CTX = ex.ExpectContext(controller_name=CTRL, gateway_class_name="gc-under-test")
G = "gateway.networking.k8s.io"


def step(**body: Any) -> ExpectStep:
    parsed = parse_step(0, {"expect": body}).expect
    assert parsed is not None
    return parsed


def cond(type_: str, status: str = "True", reason: str = "", gen: int = 1) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason or type_, "observedGeneration": gen}


def gateway(generation: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns", "generation": generation},
        "status": status,
    }


def route(
    entries: list[dict[str, Any]], generation: int = 1, kind: str = "HTTPRoute"
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": "r", "namespace": "ns", "generation": generation},
        "status": {"parents": entries},
    }


def parent(
    name: str = "gw",
    conditions: list[dict[str, Any]] | None = None,
    controller: str = CTRL,
    **ref: Any,
) -> dict[str, Any]:
    return {
        "parentRef": {"group": G, "kind": "Gateway", "name": name, **ref},
        "controllerName": controller,
        "conditions": conditions if conditions is not None else [cond("Accepted")],
    }


def check(body: dict[str, Any], obj: dict[str, Any] | None) -> str | None:
    return ex.evaluate(step(**body), obj, CTX)


# ---------------------------------------------------------------- expect: own conditions,
# generation


def test_own_conditions_subset_status_and_reason_optional() -> None:
    gw = gateway(conditions=[cond("Accepted"), cond("Programmed", "False", "Invalid")])
    base = {"kind": "Gateway", "name": "ns/gw"}
    assert check({**base, "conditions": [{"type": "Accepted", "status": "True"}]}, gw) is None
    assert check({**base, "conditions": [{"type": "Programmed"}]}, gw) is None
    assert (
        check(
            {
                **base,
                "conditions": [{"type": "Programmed", "status": "False", "reason": "Invalid"}],
            },
            gw,
        )
        is None
    )
    msg = check(
        {**base, "conditions": [{"type": "Accepted"}, {"type": "Programmed", "status": "True"}]}, gw
    )
    assert msg is not None and "Programmed status=True" in msg and "Programmed=False/Invalid" in msg
    msg = check({**base, "conditions": [{"type": "Accepted", "reason": "Other"}]}, gw)
    assert msg is not None and "reason=Other" in msg
    assert check({**base, "conditions": [{"type": "ResolvedRefs"}]}, gw) is not None


def test_not_found_and_gateway_class_token() -> None:
    assert check({"kind": "Gateway", "name": "ns/gw"}, None) == "Gateway ns/gw: not found"
    s = step(
        kind="GatewayClass",
        name="GATEWAY_CLASS",
        conditions=[{"type": "Accepted", "status": "True"}],
    )
    assert ex.target(s, CTX) == ("GatewayClass", "", "gc-under-test")
    gc = {
        "kind": "GatewayClass",
        "metadata": {"name": "gc-under-test"},
        "status": {"conditions": [cond("Accepted")]},
    }
    assert ex.evaluate(s, gc, CTX) is None


def test_latest_generation_gateway_uses_own_conditions_only() -> None:
    gw = gateway(
        2,
        conditions=[cond("Accepted", gen=2)],
        listeners=[{"name": "l", "conditions": [cond("Accepted", gen=1)]}],
    )
    assert check({"kind": "Gateway", "name": "ns/gw", "latest_generation": True}, gw) is None
    stale = gateway(2, conditions=[cond("Accepted", gen=2), cond("Programmed", gen=1)])
    msg = check({"kind": "Gateway", "name": "ns/gw", "latest_generation": True}, stale)
    assert msg is not None and "Programmed has observedGeneration 1" in msg and "2" in msg


def test_latest_generation_route_covers_every_own_entry() -> None:
    entries = [
        parent("gw", [cond("Accepted", gen=3)]),
        parent("other", [cond("Accepted", gen=2)]),
        parent("gw", [cond("Accepted", gen=1)], controller="someone.else/ctrl"),
    ]
    r = route(entries, generation=3)
    body = {
        "kind": "HTTPRoute",
        "name": "ns/r",
        "parent": "ns/gw",
        "conditions": [{"type": "Accepted"}],
    }
    assert check(body, r) is None
    msg = check({**body, "latest_generation": True}, r)
    assert msg is not None and "Gateway other" in msg and "observedGeneration 2" in msg
    entries[1] = parent("other", [cond("Accepted", gen=3)])
    assert check({**body, "latest_generation": True}, route(entries, generation=3)) is None


# ---------------------------------------------------------------- expect: parent matching


def test_parent_matching_name_namespace_kind_section_and_controller() -> None:
    r = route(
        [
            parent("gw", [cond("Accepted", "False", "NoMatchingParent")], sectionName="a"),
            parent("gw", [cond("Accepted")], namespace="ns", sectionName="b"),
            {
                **parent("ls", [cond("Accepted")]),
                "parentRef": {"group": G, "kind": "ListenerSet", "name": "ls"},
            },
        ]
    )
    base = {"kind": "HTTPRoute", "name": "ns/r", "parent": "ns/gw"}
    # any matching entry may satisfy the conditions
    assert check({**base, "conditions": [{"type": "Accepted", "status": "True"}]}, r) is None
    assert check({**base, "conditions": [{"type": "Accepted", "status": "False"}]}, r) is None
    # parent_section narrows the entries
    msg = check(
        {**base, "parent_section": "a", "conditions": [{"type": "Accepted", "status": "True"}]}, r
    )
    assert msg is not None and "section a" in msg and "Accepted status=True" in msg
    assert (
        check(
            {**base, "parent_section": "b", "conditions": [{"type": "Accepted", "status": "True"}]},
            r,
        )
        is None
    )
    # a namespace in status must equal the expected one
    msg = check(
        {"kind": "HTTPRoute", "name": "ns/r", "parent": "other/gw", "parent_section": "b"}, r
    )
    assert msg is not None and "expected a status.parents entry" in msg
    # parent_kind defaults to Gateway
    assert check({"kind": "HTTPRoute", "name": "ns/r", "parent": "ns/ls"}, r) is not None
    assert (
        check(
            {"kind": "HTTPRoute", "name": "ns/r", "parent": "ns/ls", "parent_kind": "ListenerSet"},
            r,
        )
        is None
    )
    # other controllers' entries are ignored
    foreign = route([parent("gw", controller="x.io/other")])
    assert check({**base, "conditions": [{"type": "Accepted"}]}, foreign) is not None


def test_policy_ancestors() -> None:
    pol = {
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "p", "namespace": "ns", "generation": 2},
        "status": {
            "ancestors": [
                {
                    "ancestorRef": {"group": G, "kind": "Gateway", "name": "gw", "namespace": "ns"},
                    "controllerName": CTRL,
                    "conditions": [cond("Accepted", "False", "Conflicted", 2)],
                }
            ]
        },
    }
    base = {
        "kind": "BackendTLSPolicy",
        "name": "ns/p",
        "parent": "ns/gw",
        "latest_generation": True,
    }
    assert (
        check(
            {
                **base,
                "conditions": [{"type": "Accepted", "status": "False", "reason": "Conflicted"}],
            },
            pol,
        )
        is None
    )
    msg = check({**base, "conditions": [{"type": "Accepted", "status": "True"}]}, pol)
    assert msg is not None and "ancestors" in msg


@pytest.mark.parametrize("kind", ["BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy"])
def test_envoy_gateway_policy_ancestors_and_messages(kind: str) -> None:
    message = (
        "This policy is being overridden by other backendTrafficPolicies for these routes: [ns/r]"
    )
    over = {**cond("Overridden"), "message": message}
    pol = {
        "kind": kind,
        "metadata": {"name": "p", "namespace": "ns", "generation": 1},
        "status": {
            "ancestors": [
                {
                    "ancestorRef": {
                        "group": G,
                        "kind": "Gateway",
                        "name": "gw",
                        "namespace": "ns",
                        "sectionName": "http",
                    },
                    "controllerName": CTRL,
                    "conditions": [cond("Accepted"), over],
                }
            ]
        },
    }
    base = {"kind": kind, "name": "ns/p", "parent": "ns/gw", "parent_section": "http"}
    assert check({**base, "conditions": [{"type": "Overridden", "message": message}]}, pol) is None
    assert (
        check({**base, "conditions": [{"type": "Overridden", "reason": "Overridden"}]}, pol) is None
    )
    msg = check({**base, "conditions": [{"type": "Overridden", "message": "another message"}]}, pol)
    assert msg is not None and "another message" in msg
    assert (
        check({**base, "parent_section": "other", "conditions": [{"type": "Accepted"}]}, pol)
        is not None
    )


def test_listener_conditions_and_attached_routes() -> None:
    gw = gateway(
        listeners=[
            {
                "name": "http",
                "attachedRoutes": 2,
                "conditions": [cond("Accepted"), cond("ResolvedRefs")],
            }
        ]
    )
    base = {"kind": "Gateway", "name": "ns/gw", "listener": "http"}
    assert (
        check(
            {
                **base,
                "conditions": [{"type": "ResolvedRefs", "status": "True"}],
                "attached_routes": 2,
            },
            gw,
        )
        is None
    )
    msg = check({**base, "attached_routes": 1}, gw)
    assert msg is not None and "attachedRoutes 1, found 2" in msg
    msg = check({**base, "conditions": [{"type": "Programmed"}]}, gw)
    assert msg is not None and "listener http" in msg
    msg = check(
        {
            "kind": "Gateway",
            "name": "ns/gw",
            "listener": "https",
            "conditions": [{"type": "Accepted"}],
        },
        gw,
    )
    assert msg is not None and "'https'" in msg and "['http']" in msg
    # listener conditions are not the Gateway's own conditions
    assert (
        check({"kind": "Gateway", "name": "ns/gw", "conditions": [{"type": "ResolvedRefs"}]}, gw)
        is not None
    )


# ---------------------------------------------------------------- expect: addresses and counts


def test_has_address_and_addresses() -> None:
    base = {"kind": "Gateway", "name": "ns/gw"}
    assert (
        check(
            {**base, "has_address": True},
            gateway(addresses=[{"type": "IPAddress", "value": "127.10.0.1"}]),
        )
        is None
    )
    assert (
        check({**base, "has_address": True}, gateway(addresses=[{"value": "127.10.0.1"}]))
        is not None
    )
    assert check({**base, "has_address": True}, gateway()) is not None
    gw = gateway(
        addresses=[{"type": "IPAddress", "value": "a"}, {"type": "Hostname", "value": "b"}]
    )
    assert (
        check({**base, "addresses": [{"type": "Hostname", "value": "b"}, {"value": "a"}]}, gw)
        is None
    )
    msg = check({**base, "addresses": [{"type": "IPAddress", "value": "b"}]}, gw)
    assert msg is not None and '"value":"b"' in msg


def test_attached_listeners_listener_count_zero_routes() -> None:
    base = {"kind": "Gateway", "name": "ns/gw"}
    assert check({**base, "attached_listeners": 0}, gateway()) is None
    assert check({**base, "attached_listeners": 2}, gateway(attachedListenerSets=2)) is None
    assert check({**base, "attached_listeners": 1}, gateway(attachedListenerSets=2)) is not None
    two = gateway(
        listeners=[{"name": "a", "attachedRoutes": 0}, {"name": "b", "attachedRoutes": 0}]
    )
    assert check({**base, "listener_count": 2}, two) is None
    assert check({**base, "listener_count": 1}, two) is not None
    assert check({**base, "zero_routes": True}, gateway()) is None
    assert (
        check(
            {**base, "zero_routes": True}, gateway(listeners=[{"name": "a", "attachedRoutes": 0}])
        )
        is None
    )
    assert (
        check(
            {**base, "zero_routes": True}, gateway(listeners=[{"name": "a", "attachedRoutes": 1}])
        )
        is not None
    )
    assert check({**base, "zero_routes": True}, two) is not None


def test_no_accepted_parents() -> None:
    base = {"kind": "TLSRoute", "name": "ns/r", "no_accepted_parents": True}
    assert check(base, route([], kind="TLSRoute")) is None
    assert check(base, route([parent(controller="x.io/other")], kind="TLSRoute")) is None
    assert (
        check(
            base,
            route(
                [parent(conditions=[cond("Accepted", "False", "NotAllowedByListeners")])],
                kind="TLSRoute",
            ),
        )
        is None
    )
    assert check(base, route([parent()], kind="TLSRoute")) is not None
    bad_two = [parent("a", [cond("Accepted", "False")]), parent("b", [cond("Accepted", "False")])]
    assert check(base, route(bad_two, kind="TLSRoute")) is not None


def test_parents_namespace_required_and_group_kind_set() -> None:
    want = [
        {
            "parentRef": {"group": G, "kind": "Gateway", "name": "gw", "namespace": "ns"},
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}],
        }
    ]
    base = {"kind": "HTTPRoute", "name": "ns/r", "parents": want}
    no_ns = route([parent("gw"), parent("extra")])  # extras are allowed
    assert check({**base, "namespace_required": False}, no_ns) is None
    msg = check({**base, "namespace_required": True}, no_ns)
    assert msg is not None and "namespace required" in msg
    assert (
        check({**base, "namespace_required": True}, route([parent("gw", namespace="ns")])) is None
    )
    # group and kind must be set in status
    bare = route(
        [{"parentRef": {"name": "gw"}, "controllerName": CTRL, "conditions": [cond("Accepted")]}]
    )
    assert check(base, bare) is not None
    # conditions subset, sectionName compared only when listed
    assert check(base, route([parent("gw", [cond("Accepted", "False")])])) is not None
    assert check(base, route([parent("gw", sectionName="x")])) is None
    with_section = [
        {
            "parentRef": {"group": G, "kind": "Gateway", "name": "gw", "sectionName": "y"},
            "conditions": [],
        }
    ]
    assert (
        check(
            {"kind": "HTTPRoute", "name": "ns/r", "parents": with_section},
            route([parent("gw", sectionName="x")]),
        )
        is not None
    )
    # another controller's entry does not count
    assert check(base, route([parent("gw", controller="x.io/other")])) is not None


def test_listeners_same_count_by_name_kinds_routes_conditions() -> None:
    actual = gateway(
        listeners=[
            {
                "name": "b",
                "attachedRoutes": 0,
                "supportedKinds": [],
                "conditions": [cond("Accepted", "False", "UnsupportedValue")],
            },
            {
                "name": "a",
                "attachedRoutes": 1,
                "supportedKinds": [{"group": G, "kind": "HTTPRoute"}, {"kind": "GRPCRoute"}],
                "conditions": [cond("Accepted")],
            },
        ]
    )
    want_a = {
        "name": "a",
        "supportedKinds": [{"kind": "GRPCRoute"}],
        "attachedRoutes": 1,
        "conditions": [{"type": "Accepted", "status": "True"}],
    }
    want_b = {
        "name": "b",
        "supportedKinds": [],
        "attachedRoutes": 0,
        "conditions": [{"type": "Accepted", "status": "False", "reason": "UnsupportedValue"}],
    }
    base = {"kind": "Gateway", "name": "ns/gw"}
    assert check({**base, "listeners": [want_a, want_b]}, actual) is None
    assert "expected 1 status.listeners" in (check({**base, "listeners": [want_a]}, actual) or "")
    assert "attachedRoutes 2" in (
        check({**base, "listeners": [{**want_a, "attachedRoutes": 2}, want_b]}, actual) or ""
    )
    msg = check(
        {**base, "listeners": [want_a, {**want_b, "supportedKinds": [{"kind": "TLSRoute"}]}]},
        actual,
    )
    assert msg is not None and "TLSRoute" in msg
    msg = check({**base, "listeners": [{**want_a, "supportedKinds": []}, want_b]}, actual)
    assert msg is not None and "expected empty supportedKinds" in msg
    msg = check({**base, "listeners": [want_a, {**want_b, "name": "c"}]}, actual)
    assert msg is not None and "'c'" in msg
    msg = check(
        {**base, "listeners": [{**want_a, "conditions": [{"type": "Programmed"}]}, want_b]}, actual
    )
    assert msg is not None and "Programmed" in msg


# ---------------------------------------------------------------- case files


def test_case_parsing_is_strict() -> None:
    case = parse_case(
        {
            "name": "X",
            "steps": [
                {"expect": {"kind": "Gateway", "name": "a/b"}},
                {"http": {"gateway": "a/b"}},
                {"unsupported": "why"},
            ],
        }
    )
    assert [s.kind for s in case.steps] == ["expect", "http", "unsupported"]
    assert case.unsupported[0].text == "why"
    with pytest.raises(CaseError, match="unknown step kind"):
        parse_case({"name": "X", "steps": [{"websocket": {}}]})
    with pytest.raises(CaseError, match="exactly one key"):
        parse_case(
            {"name": "X", "steps": [{"expect": {"kind": "Gateway", "name": "a/b"}, "http": {}}]}
        )
    with pytest.raises(CaseError, match="unknown keys"):
        parse_case({"name": "X", "bogus": 1})
    with pytest.raises(CaseError):
        parse_case(
            {
                "name": "X",
                "steps": [{"expect": {"kind": "Gateway", "name": "a/b", "has_adress": True}}],
            }
        )


def test_generated_objects_step() -> None:
    body = {
        "gateway": "ns/gw",
        "kinds": ["ServiceAccount", "Service"],
        "labels": {"a": "1"},
        "annotations": {"n": "x"},
    }
    parsed = parse_step(0, {"generated_objects": body}).generated
    assert (
        parsed is not None
        and parsed.kinds == ("ServiceAccount", "Service")
        and parsed.timeout_s is None
    )
    with pytest.raises(CaseError):
        parse_step(0, {"generated_objects": {**body, "label": {}}})

    def obj(name: str, namespace: str = "ns", gateway: str = "gw", **meta: Any) -> dict[str, Any]:
        labels = {"gateway.networking.k8s.io/gateway-name": gateway, **meta.pop("labels", {})}
        return {"metadata": {"name": name, "namespace": namespace, "labels": labels, **meta}}

    good = obj("sa", labels={"a": "1", "more": "ok"}, annotations={"n": "x"})
    listed = [obj("other", gateway="gw2"), obj("elsewhere", namespace="ns2"), good, obj("second")]
    # upstream's selector: the Gateway's namespace and name label; the first of each kind is checked
    assert generated.labelled(listed, "ns", "gw") == [good, listed[3]]
    assert generated.check(parsed, {"ServiceAccount": [good, obj("second")], "Service": []}) is None
    assert generated.check(
        parsed, {"Service": [obj("svc", labels={"a": "2"}, annotations={"n": "x"})]}
    ) == (
        "Service svc: labels {'gateway.networking.k8s.io/gateway-name': 'gw', 'a': '2'} lack {'a': "
        "'1'}"
    )
    assert "annotations {} lack {'n': 'x'}" in str(
        generated.check(parsed, {"Service": [obj("svc", labels={"a": "1"})]})
    )
    # a gateweave Envoy on one machine: its node metadata, as /server_info reports it
    envoy = generated.envoy_object(
        {"node": {"id": "ns/gw", "metadata": {"labels": {"a": "1"}, "annotations": {"n": "x"}}}}
    )
    assert (
        envoy["metadata"]["name"] == "ns/gw" and generated.check(parsed, {"Envoy": [envoy]}) is None
    )
    assert (
        generated.check(parsed, {"Envoy": [generated.envoy_object({"node": {"id": "ns/gw"}})]})
        is not None
    )


# ---------------------------------------------------------------- TLS material


def _manifest(kind: str, ref: str) -> dict[str, Any]:
    ns, name = ref.split("/")
    found = [
        m
        for m in tlsgen.builtin().manifests()
        if m["kind"] == kind and m["metadata"] == {"namespace": ns, "name": name}
    ]
    assert len(found) == 1
    return found[0]


def _cert(pem: str | bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem if isinstance(pem, bytes) else pem.encode())


def test_tls_table_is_complete_and_cached() -> None:
    material = tlsgen.builtin()
    assert tlsgen.builtin() is material
    secrets = {
        f"{m['metadata']['namespace']}/{m['metadata']['name']}"
        for m in material.manifests()
        if m["kind"] == "Secret"
    }
    maps = {
        f"{m['metadata']['namespace']}/{m['metadata']['name']}"
        for m in material.manifests()
        if m["kind"] == "ConfigMap"
    }
    assert "gateway-conformance-app-backend/tls-passthrough-checks-certificate" in secrets
    assert "gateway-conformance-infra/tls-passthrough-checks-certificate" in secrets
    assert len(secrets) == 9 and len(maps) == 5
    for m in material.manifests():
        if m["kind"] == "Secret":
            assert m["type"] == "kubernetes.io/tls" and set(m["data"]) == {"tls.crt", "tls.key"}
            base64.b64decode(m["data"]["tls.key"], validate=True)
        else:
            assert (
                _cert(m["data"]["ca.crt"])
                .extensions.get_extension_for_class(x509.BasicConstraints)
                .value.ca
            )


def test_tls_chain_and_hosts() -> None:
    ca = _cert(
        _manifest("ConfigMap", "gateway-conformance-infra/tls-checks-ca-certificate")["data"][
            "ca.crt"
        ]
    )
    leaf = _cert(
        base64.b64decode(
            _manifest("Secret", "gateway-conformance-infra/tls-checks-certificate")["data"][
                "tls.crt"
            ]
        )
    )
    leaf.verify_directly_issued_by(ca)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["abc.example.com", "other.example.com"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [
        "spiffe://abc.example.com/test-identity"
    ]
    client = _cert(
        base64.b64decode(
            _manifest("Secret", "gateway-conformance-infra/tls-checks-client-certificate")["data"][
                "tls.crt"
            ]
        )
    )
    client.verify_directly_issued_by(ca)
    assert (
        ExtendedKeyUsageOID.CLIENT_AUTH
        in client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    mismatch = _cert(
        _manifest("ConfigMap", "gateway-conformance-infra/mismatch-ca-certificate")["data"][
            "ca.crt"
        ]
    )
    with pytest.raises((ValueError, InvalidSignature)):
        leaf.verify_directly_issued_by(mismatch)
    wildcard = _cert(
        base64.b64decode(
            _manifest("Secret", "gateway-conformance-infra/tls-validity-checks-certificate")[
                "data"
            ]["tls.crt"]
        )
    )
    assert wildcard.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName) == ["*", "*.org", "*.wildcard.org"]
    wildcard.verify_directly_issued_by(wildcard)  # self-signed


def _handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, sni: str
) -> tuple[Exception | None, Exception | None]:
    """One TLS handshake over 127.0.0.1; returns (server error, client error)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    errors: dict[str, Exception] = {}

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")
        except (OSError, ssl.SSLError) as exc:
            errors["server"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with (
            socket.create_connection(listener.getsockname(), timeout=5) as raw,
            client_ctx.wrap_socket(raw, server_hostname=sni) as tls,
        ):
            assert tls.recv(2) == b"ok"
    except (OSError, ssl.SSLError) as exc:
        errors["client"] = exc
    finally:
        thread.join(5)
        listener.close()
    return errors.get("server"), errors.get("client")


def test_tls_handshake_with_generated_material(tmp_path: Path) -> None:
    """A real TLS server on 127.0.0.1 with the CA-signed certificate, requiring a client certificate
    signed by the same CA; a client trusting only CA "C" and presenting the generated client
    certificate."""
    material = tlsgen.builtin()
    pems = {
        "s.crt": material.get(
            "Secret", "gateway-conformance-infra/tls-checks-certificate"
        ).cert_pem,
        "s.key": material.get("Secret", "gateway-conformance-infra/tls-checks-certificate").key_pem,
        "c.crt": material.get(
            "Secret", "gateway-conformance-infra/tls-checks-client-certificate"
        ).cert_pem,
        "c.key": material.get(
            "Secret", "gateway-conformance-infra/tls-checks-client-certificate"
        ).key_pem,
    }
    for name, data in pems.items():
        (tmp_path / name).write_bytes(data)
    ca_pem = _manifest("ConfigMap", "gateway-conformance-infra/tls-checks-ca-certificate")["data"][
        "ca.crt"
    ]
    mismatch_pem = _manifest("ConfigMap", "gateway-conformance-infra/mismatch-ca-certificate")[
        "data"
    ]["ca.crt"]

    def server() -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
        ctx.load_verify_locations(cadata=ca_pem)
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def client(ca: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cadata=ca)
        ctx.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
        return ctx

    assert _handshake(server(), client(ca_pem), "abc.example.com") == (None, None)
    assert _handshake(server(), client(ca_pem), "other.example.com") == (None, None)
    _, client_error = _handshake(server(), client(mismatch_pem), "abc.example.com")
    assert isinstance(client_error, ssl.SSLCertVerificationError)
    _, client_error = _handshake(server(), client(ca_pem), "nope.example.com")
    assert isinstance(client_error, ssl.SSLCertVerificationError)
    # a self-signed certificate is its own trust anchor
    selfsigned = material.get("Secret", "gateway-conformance-infra/tls-validity-checks-certificate")
    (tmp_path / "ss.crt").write_bytes(selfsigned.cert_pem)
    (tmp_path / "ss.key").write_bytes(selfsigned.key_pem)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(tmp_path / "ss.crt", tmp_path / "ss.key")
    cctx = ssl.create_default_context(cadata=selfsigned.cert_pem.decode())
    assert _handshake(sctx, cctx, "x.wildcard.org") == (None, None)


def test_case_generated_entries_extend_the_table() -> None:
    extra = (
        tlsgen.TLSSpec("ConfigMap", "ns", "my-ca"),
        tlsgen.TLSSpec("Secret", "ns", "my-cert", ("a.example",), "ns/my-ca"),
    )
    material = tlsgen.with_extra(extra)
    assert tlsgen.with_extra(extra) is material
    cert, ca = material.get("Secret", "ns/my-cert").cert, material.get("ConfigMap", "ns/my-ca").cert
    cert.verify_directly_issued_by(ca)
    assert ("Secret", "ns/my-cert") not in tlsgen.builtin().issued
    with pytest.raises(ValueError, match="unknown CA"):
        tlsgen.generate([tlsgen.TLSSpec("Secret", "ns", "x", ("h",), "ns/nope")])


# ---------------------------------------------------------------- manifests


def test_substitution_of_names_and_addresses() -> None:
    subs = mf.Substitutions(
        gateway_class_name="cls",
        controller_name="ex.io/c",
        usable_addresses=(mf.Address("IPAddress", "127.10.9.9"),),
        unusable_addresses=(mf.Address("IPAddress", "203.0.113.7"),),
    )
    gw: dict[str, Any] = {
        "kind": "Gateway",
        "metadata": {"name": "g", "annotations": {"x": "{GATEWAY_CLASS_NAME}"}},
        "spec": {
            "gatewayClassName": "{GATEWAY_CLASS_NAME}",
            "addresses": [
                {"value": "PLACEHOLDER_USABLE_ADDRS"},
                {"type": "test/fake-invalid-type", "value": "x"},
                {"value": "PLACEHOLDER_UNUSABLE_ADDRS"},
            ],
        },
    }
    out = mf.substitute(gw, subs)
    assert out["spec"]["gatewayClassName"] == "cls" and out["metadata"]["annotations"]["x"] == "cls"
    assert out["spec"]["addresses"] == [
        {"type": "test/fake-invalid-type", "value": "x"},
        {"type": "IPAddress", "value": "127.10.9.9"},
        {"type": "IPAddress", "value": "203.0.113.7"},
    ]
    assert gw["spec"]["gatewayClassName"] == "{GATEWAY_CLASS_NAME}"  # input untouched
    gc = mf.substitute(
        {"kind": "GatewayClass", "spec": {"controllerName": "{GATEWAY_CONTROLLER_NAME}"}}, subs
    )
    assert gc["spec"]["controllerName"] == "ex.io/c"
    patch = {
        "spec": {
            "addresses": [{"type": "PLACEHOLDER_USABLE_TYPE", "value": "PLACEHOLDER_USABLE_ADDRS"}]
        }
    }
    assert mf.substitute_step_data(patch, subs) == {
        "spec": {"addresses": [{"type": "IPAddress", "value": "127.10.9.9"}]}
    }


def test_copy_tokens_resolve_from_current_objects() -> None:
    objs = {("ConfigMap", "ns", "ca"): {"data": {"ca.crt": "PEM"}}}

    def lookup(kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return objs.get((kind, ns, name))

    assert mf.resolve_copies(
        {"data": {"ca.crt": "<copy of data[ca.crt] of ConfigMap ns/ca>"}}, lookup
    ) == {"data": {"ca.crt": "PEM"}}
    with pytest.raises(KeyError):
        mf.resolve_copies("<copy of data[ca.crt] of ConfigMap ns/missing>", lookup)


def _deployment(
    name: str, labels: dict[str, str], replicas: int | None = None, ns: str = "ns"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "containers": [{"name": "c", "ports": [{"name": "web", "containerPort": 3000}]}]
            },
        }
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _service(
    name: str, selector: dict[str, str] | None, ports: list[dict[str, Any]], ns: str = "ns"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": ports}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def test_endpoint_slices_for_selected_deployments() -> None:
    objects = [
        _deployment("web", {"app": "web", "tier": "x"}, replicas=2),
        _deployment("solo", {"app": "solo"}),
        _service(
            "web",
            {"app": "web"},
            [
                {"name": "http", "port": 8080, "targetPort": 3000},
                {
                    "name": "h2c",
                    "port": 8081,
                    "targetPort": 3001,
                    "appProtocol": "kubernetes.io/h2c",
                },
                {"name": "named", "port": 80, "targetPort": "web"},
            ],
        ),
        _service("solo", {"app": "solo"}, [{"port": 9000}]),
        _service("manual", None, [{"port": 8080, "targetPort": 3000}]),
        _service("nomatch", {"app": "none"}, [{"port": 1}]),
        _service("web", {"app": "web"}, [{"port": 1}], ns="elsewhere"),
    ]
    slices = {
        s["metadata"]["labels"]["kubernetes.io/service-name"]: s
        for s in mf.endpoint_slices(objects)
    }
    assert set(slices) == {"web", "solo"}
    web = slices["web"]
    assert web["metadata"]["namespace"] == "ns" and web["addressType"] == "IPv4"
    assert web["ports"] == [
        {"name": "http", "port": 3000, "protocol": "TCP"},
        {"name": "h2c", "port": 3001, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
        {"name": "named", "port": 3000, "protocol": "TCP"},
    ]
    pods = [e["targetRef"]["name"] for e in web["endpoints"]]
    assert len(pods) == 2 and len(set(pods)) == 2
    for pod in pods:
        prefix, hash_, suffix = pod.rsplit("-", 2)
        assert prefix == "web" and hash_.isalnum() and suffix.isalnum()
    addresses = [e["addresses"][0] for e in web["endpoints"]]
    assert all(a.startswith("127.20.") for a in addresses) and len(set(addresses)) == 2
    assert slices["solo"]["ports"] == [{"name": "", "port": 9000, "protocol": "TCP"}]
    assert len(slices["solo"]["endpoints"]) == 1  # replicas default to 1
    custom = mf.endpoint_slices(objects, lambda pod, i: f"10.0.0.{pod.replica + 1}")
    assert {e["addresses"][0] for e in custom[0]["endpoints"]} == {"10.0.0.1", "10.0.0.2"}


def test_case_manifests_base_order_and_placeholders() -> None:
    case = parse_case({"name": "X", "manifests": ["tests/gateway-static-addresses.yaml"]})
    subs = mf.Substitutions()
    prepared = mf.case_manifests(MANIFESTS, case, subs)
    first = prepared.objects[0].obj
    assert (
        first["kind"] == "GatewayClass" and first["spec"]["controllerName"] == subs.controller_name
    )
    text = repr([s.obj for s in prepared.objects])
    assert "{GATEWAY_CLASS_NAME}" not in text and "PLACEHOLDER_" not in text
    gw = prepared.objects[-1].obj
    assert [a["value"] for a in gw["spec"]["addresses"]] == [
        "fake address teehee!",
        "198.51.100.1",
        "127.10.255.1",
    ]
    assert sum(1 for s in prepared.objects if s.origin == "generated TLS material") == 14
    slices = mf.endpoint_slices([s.obj for s in prepared.objects])
    infra_v1 = [
        s
        for s in slices
        if s["metadata"]["labels"]["kubernetes.io/service-name"] == "infra-backend-v1"
    ]
    assert len(infra_v1) == 1 and len(infra_v1[0]["endpoints"]) == 2
    assert [p["port"] for p in infra_v1[0]["ports"]] == [3000, 3001, 3000]


# ---------------------------------------------------------------- the offline replay


def _gw_manifest(listener_port: int = 80) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {
            "gatewayClassName": "c",
            "listeners": [{"name": "http", "port": listener_port, "protocol": "HTTP"}],
        },
        "status": {"conditions": [{"type": "Bogus", "status": "True"}]},
    }


def test_object_set_generation_timestamps_and_status() -> None:
    objs = offline.ObjectSet()
    objs.apply(_gw_manifest(), "t")
    stored = objs.get("Gateway", "ns", "gw")
    assert stored is not None
    assert (
        stored["metadata"]["generation"] == 1 and "status" not in stored
    )  # status is not written by create
    created = stored["metadata"]["creationTimestamp"]
    stored["status"] = {"conditions": [cond("Accepted")]}
    objs.tick += 5
    relabelled = _gw_manifest()
    relabelled["metadata"]["labels"] = {"a": "c"}
    objs.apply(relabelled, "t")
    after = objs.get("Gateway", "ns", "gw")
    assert (
        after is not None and after["metadata"]["generation"] == 1
    )  # metadata change: same generation
    assert after["status"] == {"conditions": [cond("Accepted")]}  # status kept across updates
    objs.patch(
        ("Gateway", "ns", "gw"),
        {"spec": {"listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}},
        "t",
    )
    patched = objs.get("Gateway", "ns", "gw")
    assert patched is not None and patched["metadata"]["generation"] == 2
    assert patched["metadata"]["creationTimestamp"] == created and patched["metadata"][
        "labels"
    ] == {"a": "c"}
    model = objs.snapshot().gateways[("ns", "gw")]
    assert model.metadata.generation == 2 and model.metadata.creation_timestamp == created
    assert model.spec.listeners[0].port == 8080
    objs.apply({**_gw_manifest(), "metadata": {"name": "gw2", "namespace": "ns"}}, "t")
    later = objs.get("Gateway", "ns", "gw2")
    assert later is not None and later["metadata"]["creationTimestamp"] > created
    objs.delete(("Gateway", "ns", "gw"))
    assert objs.get("Gateway", "ns", "gw") is None
    with pytest.raises(offline.ReplayError, match="not found"):
        objs.delete(("Gateway", "ns", "gw"))


def test_object_set_rejects_invalid_objects() -> None:
    objs = offline.ObjectSet()
    with pytest.raises(offline.ReplayError):
        objs.apply(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"namespace": "ns"},
            },
            "t",
        )


def test_merge_patch_rfc7386() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert offline.merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": 1}}) == {
        "a": {"c": [3]},
        "d": 1,
        "e": {"f": 1},
    }
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_merge_statuses_keeps_other_controllers_entries() -> None:
    objs = offline.ObjectSet()
    objs.apply(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "gw"}]},
        },
        "t",
    )
    raw = objs.get("HTTPRoute", "ns", "r")
    assert raw is not None
    raw["status"] = {"parents": [parent("gw", controller="x.io/other"), parent("old")]}
    offline.merge_statuses(objs, {("HTTPRoute", "ns", "r"): {"parents": [parent("gw")]}}, CTRL)
    assert [(p["controllerName"], p["parentRef"]["name"]) for p in raw["status"]["parents"]] == [
        ("x.io/other", "gw"),
        (CTRL, "gw"),
    ]
    offline.merge_statuses(objs, {}, CTRL)  # no computed status: none of our entries remain
    assert [p["controllerName"] for p in raw["status"]["parents"]] == ["x.io/other"]


def test_feature_skip() -> None:
    case = parse_case(
        {"name": "TLSRouteListenerTerminateNotSupported", "features": ["Gateway", "TLSRoute"]}
    )
    assert offline.feature_skip(case, {"Gateway", "TLSRoute"}) is None
    assert "TLSRouteModeTerminate" in (
        offline.feature_skip(case, {"Gateway", "TLSRoute", "TLSRouteModeTerminate"}) or ""
    )
    assert "TLSRoute" in (offline.feature_skip(case, {"Gateway"}) or "")


def _write_case(tmp_path: Path, steps: list[dict[str, Any]]) -> tuple[Path, Path]:
    manifests = tmp_path / "manifests"
    (manifests / "base").mkdir(parents=True, exist_ok=True)
    (manifests / "base" / "manifests.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: "
        "ns}\n"
        'spec:\n  gatewayClassName: "{GATEWAY_CLASS_NAME}"\n  listeners: [{name: http, port: 80, '
        "protocol: HTTP}]\n"
    )
    (manifests / "tests").mkdir(exist_ok=True)
    import yaml

    case = tmp_path / "X.yaml"
    case.write_text(
        yaml.safe_dump(
            {"name": "X", "features": ["Gateway"], "manifests": [], "generated": [], "steps": steps}
        )
    )
    return case, manifests


def test_replay_drives_statuses_and_mutations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake translate that reports each Gateway's port as a condition reason shows that mutations
    re-translate, generations move, and the first failing step is reported."""
    calls: list[int] = []

    def fake(snapshot: Any, controller_name: str) -> dict[tuple[str, str, str], dict[str, Any]]:
        calls.append(1)
        out: dict[tuple[str, str, str], dict[str, Any]] = {
            ("GatewayClass", "", "gateweave-conformance"): {
                "supportedFeatures": [{"name": "Gateway"}]
            }
        }
        for (ns, name), gw in snapshot.gateways.items():
            gen = gw.metadata.generation
            out[("Gateway", ns, name)] = {
                "conditions": [cond("Accepted", reason=f"port{gw.spec.listeners[0].port}", gen=gen)]
            }
        return out

    monkeypatch.setattr(offline, "compute_statuses", fake)
    gw = "ns/gw"
    steps: list[dict[str, Any]] = [
        {
            "expect": {
                "kind": "Gateway",
                "name": gw,
                "conditions": [{"type": "Accepted", "reason": "port80"}],
                "latest_generation": True,
            }
        },
        {"remember_generation": {"kind": "Gateway", "name": gw}},
        {"http": {"gateway": gw}},
        {
            "patch": {
                "kind": "Gateway",
                "name": gw,
                "merge": {
                    "spec": {"listeners": [{"name": "http", "port": 81, "protocol": "HTTP"}]}
                },
            }
        },
        {
            "expect": {
                "kind": "Gateway",
                "name": gw,
                "conditions": [{"type": "Accepted", "reason": "port81"}],
                "latest_generation": True,
            }
        },
        {"expect_generation_changed": {"kind": "Gateway", "name": gw}},
        {"delete": {"kind": "Gateway", "name": gw}},
        {"expect": {"kind": "Gateway", "name": gw}},
    ]
    case, manifests = _write_case(tmp_path, steps)
    result = offline.run_file(case, manifests)
    assert result.outcome == "FAIL" and result.step == 7
    assert result.message.endswith("Gateway ns/gw: not found")
    assert result.expects_checked == 3 and result.traffic_skipped == 1
    assert len(calls) == 3  # setup, after the patch, after the delete: one translation per change

    case, manifests = _write_case(
        tmp_path,
        [
            *steps[:3],
            {
                "expect": {
                    "kind": "Gateway",
                    "name": gw,
                    "conditions": [{"type": "Accepted", "reason": "port81"}],
                }
            },
        ],
    )
    result = offline.run_file(case, manifests)
    assert (
        result.outcome == "FAIL"
        and result.step == 3
        and "reason=port81" in result.message
        and "port80" in result.message
    )


def test_replay_reports_translate_errors_and_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(snapshot: Any, controller_name: str) -> dict[tuple[str, str, str], dict[str, Any]]:
        raise offline.ReplayError(
            "translate raised KeyError: 'x' (at gateweave/translate/core.py:1 in f)"
        )

    monkeypatch.setattr(offline, "compute_statuses", broken)
    case, manifests = _write_case(tmp_path, [{"expect": {"kind": "Gateway", "name": "ns/gw"}}])
    result = offline.run_file(case, manifests)
    assert result.outcome == "FAIL" and "translate raised KeyError" in result.message
    case, manifests = _write_case(
        tmp_path,
        [{"unsupported": "cannot express this"}, {"expect": {"kind": "Gateway", "name": "ns/gw"}}],
    )
    result = offline.run_file(case, manifests)
    assert result.outcome == "SKIP" and "cannot express this" in result.message
