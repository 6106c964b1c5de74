"""Backends by name in translate: ExternalName Services, FQDN EndpointSlices and Envoy Gateway
Backends - the clusters they become, ReferenceGrants, route and Backend status.

The objects are tests/data/backends/system.yaml (one system using every kind of backend by
name), changed per test where a test needs it.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateweave import ir
from gateweave.api.decode import decode
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from tests.support.backends import raws

EG = "gateway.envoyproxy.io"


def run(docs: list[dict[str, Any]] | None = None, **options: Any) -> Result:
    models = []
    for raw in docs if docs is not None else raws():
        dec, errors = decode(raw)
        assert dec is not None, errors
        models.append(dec.model)
    return translate(Snapshot.from_objects(models), TranslateOptions(**options))


def edited(
    kind: str, name: str, change: Any, docs: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The system (or ``docs``) with one object changed (``change(obj)`` edits it in place;
    returning False drops it)."""
    out = []
    for raw in docs if docs is not None else raws():
        raw = copy.deepcopy(raw)
        if raw["kind"] == kind and raw["metadata"]["name"] == name and change(raw) is False:
            continue
        out.append(raw)
    return out


def clusters(result: Result) -> dict[str, ir.Cluster]:
    return {c.name: c for c in result.xds["apps/gw"].clusters}


def refs_condition(result: Result, name: str, kind: str = "HTTPRoute") -> dict[str, Any]:
    status: dict[str, Any] = result.statuses[(kind, "apps", name)]
    entry = status["parents"][0]
    return next(c for c in entry["conditions"] if c["type"] == "ResolvedRefs")


def accepted(result: Result, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = result.statuses[("Backend", ns, name)]
    conds = status["conditions"]
    assert [c["type"] for c in conds] == ["Accepted"]
    return dict(conds[0])


def fqdn(name: str, port: int) -> ir.Endpoint:
    return ir.Endpoint(address=name, port=port, type=ir.ENDPOINT_FQDN)


# ---------------------------------------------------------------- Services by name


def test_an_external_name_service_is_its_name_on_the_backend_refs_port() -> None:
    cl = clusters(run())
    assert cl["apps/external/8080/http1"].endpoints == (fqdn("api.example.internal", 8080),)
    assert cl["apps/external/8080/http1"].dns
    # without ports, any port of the backendRef
    assert cl["apps/external-no-ports/9090/http1"].endpoints == (fqdn("db.example.internal", 9090),)
    # with ports, only those
    docs = edited(
        "HTTPRoute", "by-name", lambda r: r["spec"]["rules"][0]["backendRefs"][0].update(port=8081)
    )
    assert refs_condition(run(docs), "by-name")["reason"] == "BackendNotFound"
    assert (
        "Service apps/external has no port 8081" in refs_condition(run(docs), "by-name")["message"]
    )


def test_an_external_name_that_is_an_ip_address_is_an_address() -> None:
    docs = edited(
        "Service", "external-no-ports", lambda s: s["spec"].update(externalName="10.9.9.9")
    )
    c = clusters(run(docs))["apps/external-no-ports/9090/http1"]
    assert c.endpoints == (ir.Endpoint(address="10.9.9.9", port=9090),) and not c.dns


def test_fqdn_slices_give_ready_host_names_after_ip_addresses() -> None:
    cl = clusters(run())
    assert cl["apps/fqdn-svc/80/http1"].endpoints == (
        fqdn("web-1.example.internal", 8000),
        fqdn("web-2.example.internal", 8000),
    )  # sorted; the not-ready one left out
    assert cl["apps/mixed-svc/80/http1"].endpoints == (
        ir.Endpoint(address="10.1.0.2", port=8000),
        fqdn("mixed.example.internal", 8000),
    )
    # an FQDN slice address that is no host name is not an endpoint
    docs = edited(
        "EndpointSlice",
        "fqdn-svc-names",
        lambda s: s["endpoints"][0].update(addresses=["Not_A.Name"]),
    )
    assert clusters(run(docs))["apps/fqdn-svc/80/http1"].endpoints == (
        fqdn("web-1.example.internal", 8000),
    )


def test_a_cross_namespace_external_name_service_needs_a_grant() -> None:
    assert "backends/remote-external/443/http1" in clusters(run())
    docs = edited(
        "HTTPRoute", "cross", lambda r: r["spec"]["rules"].pop(1)
    )  # the Backend it may not use
    assert refs_condition(run(docs), "cross")["status"] == "True"
    docs = edited("ReferenceGrant", "routes-from-apps", lambda g: g["spec"]["to"].pop(1), docs)
    cond = refs_condition(run(docs), "cross")
    assert (cond["status"], cond["reason"]) == ("False", "RefNotPermitted")
    assert (
        cond["message"]
        == "backendRef Service backends/remote-external: not permitted by any ReferenceGrant"
    )


# ---------------------------------------------------------------- Envoy Gateway Backends


def test_backend_endpoints_of_each_type_and_their_protocols() -> None:
    cl = clusters(run())
    ip = cl["apps/ip/Backend/http1"]
    assert (
        ip.endpoints
        == (
            ir.Endpoint(address="10.2.0.1", port=3000),
            ir.Endpoint(address="10.2.0.2", port=3000, hostname="two.example.internal"),
        )
        and not ip.dns
    )
    assert cl["apps/fqdn/Backend/http1"].endpoints == (fqdn("app.example.internal", 8443),)
    assert cl["apps/unix/Backend/http1"].endpoints == (
        ir.Endpoint(address="/run/app/app.sock", port=0, type=ir.ENDPOINT_UNIX),
    )
    assert cl["apps/h2c/Backend/h2c"].protocol == "H2C"
    # the same Backends from a TCPRoute and a UDPRoute
    assert cl["apps/unix/Backend/tcp"].protocol == "TCP"
    assert cl["apps/fqdn/Backend/udp"].dns and cl["apps/ip/Backend/udp"].protocol == "UDP"


def test_backend_tls_maps_to_upstream_tls() -> None:
    result = run()
    tls = clusters(result)["apps/tls/Backend/http1"].tls
    ca = next(d for d in raws() if d["kind"] == "ConfigMap")["data"]["ca.crt"]
    client = next(d for d in raws() if d["kind"] == "Secret")["stringData"]
    assert tls == ir.UpstreamTLS(
        sni="secure.example.internal",
        ca_pem=ca,
        client_cert_pem=client["tls.crt"],
        client_key_pem=client["tls.key"],
    )
    # no SNI, system CAs; or no verification at all
    docs = edited(
        "Backend", "tls", lambda b: b["spec"].update(tls={"wellKnownCACertificates": "System"})
    )
    assert clusters(run(docs))["apps/tls/Backend/http1"].tls == ir.UpstreamTLS(sni="")
    docs = edited("Backend", "tls", lambda b: b["spec"].update(tls={"insecureSkipVerify": True}))
    assert clusters(run(docs))["apps/tls/Backend/http1"].tls == ir.UpstreamTLS(
        sni="", insecure_skip_verify=True
    )


def test_backend_tls_that_does_not_resolve_is_not_accepted() -> None:
    def no_ca(b: dict[str, Any]) -> None:
        b["spec"]["tls"]["caCertificateRefs"][0]["name"] = "nope"

    result = run(edited("Backend", "tls", no_ca))
    cond = accepted(result, "apps", "tls")
    assert (cond["status"], cond["reason"]) == ("False", "Invalid")
    assert cond["message"] == (
        "The Backend was not accepted: spec.tls.caCertificateRefs[0]: ConfigMap apps/nope not found"
    )
    result = run(edited("Backend", "tls", lambda b: b["spec"]["tls"].pop("caCertificateRefs")))
    assert accepted(result, "apps", "tls")["message"] == (
        "The Backend was not accepted: must specify either CACertificateRefs or "
        "WellKnownCACertificates "
        "when InsecureSkipVerify is unset or false"
    )
    result = run(
        edited(
            "Backend",
            "tls",
            lambda b: b["spec"]["tls"]["clientCertificateRef"].update(namespace="backends"),
        )
    )
    assert (
        "Secret namespace: backends does not match Backend namespace: apps"
        in accepted(result, "apps", "tls")["message"]
    )


def _keypair(name: str) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


def test_a_backends_own_client_certificate_wins_over_the_gateways() -> None:
    cert, key = _keypair("gateway client")
    gw_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "gateway-client", "namespace": "apps"},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": cert, "tls.key": key},
    }
    docs = edited(
        "Gateway",
        "gw",
        lambda g: g["spec"].update(
            tls={"backend": {"clientCertificateRef": {"name": "gateway-client"}}}
        ),
    )
    docs = edited(
        "Backend",
        "fqdn",
        lambda b: b["spec"].update(
            tls={"sni": "app.example.internal", "wellKnownCACertificates": "System"}
        ),
        docs,
    )
    cl = clusters(run([*docs, gw_secret]))
    own = next(d for d in raws() if d["kind"] == "Secret")["stringData"]
    tls_own, tls_gw = cl["apps/tls/Backend/http1"].tls, cl["apps/fqdn/Backend/http1"].tls
    assert tls_own is not None and (tls_own.client_cert_pem, tls_own.client_key_pem) == (
        own["tls.crt"],
        own["tls.key"],
    )
    # a Backend without a client certificate of its own presents the Gateway's
    assert tls_gw is not None and (tls_gw.client_cert_pem, tls_gw.client_key_pem) == (cert, key)


def test_unimplemented_fields_are_refused_by_name() -> None:
    result = run()
    cond = accepted(result, "apps", "fallback")
    assert (cond["status"], cond["reason"]) == ("False", "Invalid")
    assert cond["message"] == (
        "The Backend was not accepted: spec.fallback is not supported by gateweave; "
        "spec.endpoints[0].zone is not supported by gateweave"
    )
    for field, value in (
        ("minVersion", "1.3"),
        ("ciphers", ["AES128-SHA"]),
        ("alpnProtocols", ["h2"]),
        ("autoSNIFromEndpointHostname", True),
    ):

        def change(b: dict[str, Any], f: str = field, v: Any = value) -> None:
            b["spec"]["tls"].pop("sni")  # autoSNIFromEndpointHostname excludes it
            b["spec"]["tls"][f] = v

        docs = edited("Backend", "tls", change)
        assert (
            f"spec.tls.{field} is not supported by gateweave"
            in accepted(run(docs), "apps", "tls")["message"]
        )


def test_route_status_for_missing_refused_and_unsupported_backends() -> None:
    result = run()
    cond = refs_condition(result, "eg-backends")
    # the first problem of the route: the refused Backend, named with why
    assert (cond["status"], cond["reason"]) == ("False", "BackendNotFound")
    assert cond["message"].startswith(
        "Backend apps/fallback is not accepted: spec.fallback is not supported"
    )
    docs = edited("HTTPRoute", "eg-backends", lambda r: r["spec"]["rules"].pop(5))
    cond = refs_condition(run(docs), "eg-backends")
    assert (cond["reason"], cond["message"]) == (
        "BackendNotFound",
        "Backend apps/missing not found",
    )
    # an unknown kind of the group is still an unsupported kind
    docs = edited(
        "HTTPRoute",
        "eg-backends",
        lambda r: r["spec"]["rules"][0]["backendRefs"][0].update(kind="Thing"),
    )
    cond = refs_condition(run(docs), "eg-backends")
    assert (cond["reason"], cond["message"]) == (
        "InvalidKind",
        f"backendRef {EG}/Thing ip: unsupported kind",
    )
    # a rule whose only backend is refused answers 500; the others still flow
    http = next(p.http for p in result.xds["apps/gw"].ports if p.http is not None)
    by_rule = {
        r.name.split("/match/")[0].rsplit("/", 1)[1]: r
        for vh in http.virtual_hosts
        for r in vh.routes
        if r.name.startswith("httproute/apps/eg-backends/")
    }
    assert (
        by_rule["5"].direct_status == 500 and by_rule["6"].direct_status == 500
    )  # fallback, missing
    assert [(w.cluster, w.weight) for w in by_rule["4"].backends] == [
        ("apps/h2c/Backend/h2c", 3),
        ("apps/external/8080/http1", 1),
    ]


def test_a_unix_socket_cannot_carry_udp() -> None:
    docs = edited(
        "UDPRoute", "udp", lambda r: r["spec"]["rules"][0]["backendRefs"][1].update(name="unix")
    )
    cond = refs_condition(run(docs), "udp", "UDPRoute")
    assert (cond["reason"], cond["message"]) == (
        "UnsupportedProtocol",
        "Backend apps/unix: a unix socket endpoint cannot carry UDP",
    )


def test_cross_namespace_backends_need_a_grant_to_the_backend_kind() -> None:
    result = run()
    assert "backends/shared/Backend/http1" in clusters(result)
    cond = refs_condition(result, "cross")
    # the grant names Service "private", not Backend "private"
    assert (cond["reason"], cond["message"]) == (
        "RefNotPermitted",
        "backendRef Backend backends/private: not permitted by any ReferenceGrant",
    )
    docs = edited(
        "ReferenceGrant",
        "routes-from-apps",
        lambda g: g["spec"]["to"].append({"group": EG, "kind": "Backend"}),
    )
    result = run(docs)
    assert refs_condition(result, "cross")["status"] == "True"
    assert "backends/private/Backend/http1" in clusters(result)
    docs = edited("ReferenceGrant", "routes-from-apps", lambda g: False)
    assert (
        refs_condition(run(docs), "cross")["message"]
        == "backendRef Backend backends/shared: not permitted by any ReferenceGrant"
    )


def test_backend_status_only_while_a_route_of_ours_refers_to_it() -> None:
    result = run()
    backends = sorted(k for k in result.statuses if k[0] == "Backend")
    # not "unused" (its route's parent is not ours), not "private" (not permitted)
    assert backends == [
        ("Backend", "apps", n) for n in ("fallback", "fqdn", "h2c", "ip", "tls", "unix")
    ] + [("Backend", "backends", "shared")]
    assert accepted(result, "apps", "ip") == {
        "type": "Accepted",
        "status": "True",
        "reason": "Accepted",
        "message": "The Backend was accepted",
        "observedGeneration": 1,
    }
    docs = edited(
        "HTTPRoute",
        "elsewhere",
        lambda r: r["spec"].update(parentRefs=[{"name": "gw", "sectionName": "http"}]),
    )
    assert ("Backend", "apps", "unused") in run(docs).statuses


def test_envoy_gateway_address_checks_depend_on_where_envoy_runs() -> None:
    """Standalone Envoys run on the host: loopback addresses and one-label names are fine
    (as in Envoy Gateway's host mode); in Kubernetes they are refused, in its words."""

    def loopback(b: dict[str, Any]) -> None:
        b["spec"]["endpoints"] = [
            {"ip": {"address": "127.0.0.1", "port": 3000}},
            {"ip": {"address": "10.2.0.2", "port": 3000}},
        ]

    def short(b: dict[str, Any]) -> None:
        b["spec"]["endpoints"] = [{"fqdn": {"hostname": "backend", "port": 3000}}]

    def ip_as_name(b: dict[str, Any]) -> None:
        b["spec"]["endpoints"] = [{"fqdn": {"hostname": "10.1.2.3", "port": 3000}}]

    for change, k8s_message in (
        (
            loopback,
            "IP address 127.0.0.1 in the loopback range is only supported when using the Host "
            "infrastructure",
        ),
        (short, "hostname backend should be a domain with at least two segments separated by dots"),
    ):
        docs = edited("Backend", "ip", change)
        assert accepted(run(docs), "apps", "ip")["status"] == "True"
        assert (
            accepted(run(docs, address_mode="kubernetes"), "apps", "ip")["message"]
            == "The Backend was not accepted: " + k8s_message
        )
    assert accepted(run(edited("Backend", "ip", ip_as_name)), "apps", "ip")["message"] == (
        "The Backend was not accepted: hostname 10.1.2.3 is an IP address"
    )
