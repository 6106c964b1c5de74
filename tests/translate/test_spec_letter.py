"""The Gateway API v1.6 spec to the letter (issue 16, items 1-6), each from a minimal input
through ``translate``, asserting the exact conditions (type, status, reason)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateweave import ir
from gateweave.translate import certs, tlsoverlap
from gateweave.xds import tls as xds_tls
from tests.support.specletter_objects import (
    backend_tls_policy,
    ca_configmap,
    certificate,
    conditions,
    endpoint_slice,
    gateway,
    gateway_class,
    http_route,
    https,
    key_pem,
    listener,
    listener_conditions,
    listener_set,
    route_conditions,
    run,
    secret_for,
    service,
    tls_route,
    tls_secret,
)

OVERLAP = "OverlappingTLSConfig"
BY_HOSTNAMES = ("True", "OverlappingHostnames")
BY_CERTIFICATES = ("True", "OverlappingCertificates")


# ---------------------------------------------------------------- 1. OverlappingTLSConfig


def test_overlapping_hostnames_mark_both_listeners() -> None:
    """The spec's example: A foo.example.com, B foo.example.org, C *.example.com on one port.
    A and C overlap, B does not. Their certificates (a.test, b.test, c.test) do not overlap."""
    result = run(
        [
            gateway_class(),
            secret_for("a", "a.test"),
            secret_for("b", "b.test"),
            secret_for("c", "c.test"),
            gateway(
                [
                    https("a", "foo.example.com", "a"),
                    https("b", "foo.example.org", "b"),
                    https("c", "*.example.com", "c"),
                ]
            ),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "a")[OVERLAP] == BY_HOSTNAMES
    assert listener_conditions(result, "Gateway", "gw", "c")[OVERLAP] == BY_HOSTNAMES
    b = listener_conditions(result, "Gateway", "gw", "b")
    assert OVERLAP not in b  # negative polarity: absent, never False
    assert b["Accepted"] == ("True", "Accepted") and b["Programmed"] == ("True", "Programmed")


def test_overlapping_hostnames_and_certificates_say_certificates() -> None:
    """foo.example.com with a certificate for foo.example.com, *.example.com with one for
    *.example.com: both overlaps hold, and the spec says OverlappingCertificates wins."""
    result = run(
        [
            gateway_class(),
            secret_for("foo", "foo.example.com"),
            secret_for("wild", "*.example.com"),
            gateway(
                [https("foo", "foo.example.com", "foo"), https("wild", "*.example.com", "wild")]
            ),
        ]
    )
    for name in ("foo", "wild"):
        conds = listener_conditions(result, "Gateway", "gw", name)
        assert conds[OVERLAP] == BY_CERTIFICATES
        assert conds["Programmed"] == ("True", "Programmed")  # a warning, not a rejection


def test_wildcards_differ_for_hostnames_and_certificates() -> None:
    """A listener *.example.com covers a.b.example.com (any depth); a certificate for
    *.example.com does not (one label): hostnames overlap, certificates do not."""
    result = run(
        [
            gateway_class(),
            secret_for("deep", "a.b.example.com"),
            secret_for("wild", "*.example.com"),
            gateway(
                [https("deep", "a.b.example.com", "deep"), https("wild", "*.example.com", "wild")]
            ),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "deep")[OVERLAP] == BY_HOSTNAMES
    assert listener_conditions(result, "Gateway", "gw", "wild")[OVERLAP] == BY_HOSTNAMES


def test_one_certificate_on_two_distinct_hostnames_overlaps() -> None:
    """foo.example.com and bar.example.com do not overlap, but both serve a certificate for
    *.example.com: a client may reuse a connection to one for the other."""
    result = run(
        [
            gateway_class(),
            secret_for("shared", "*.example.com"),
            gateway(
                [
                    https("foo", "foo.example.com", "shared"),
                    https("bar", "bar.example.com", "shared"),
                ]
            ),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "foo")[OVERLAP] == BY_CERTIFICATES
    assert listener_conditions(result, "Gateway", "gw", "bar")[OVERLAP] == BY_CERTIFICATES


def test_no_overlap_no_condition() -> None:
    """Distinct hostnames and certificates, and the same hostnames on different ports."""
    result = run(
        [
            gateway_class(),
            secret_for("foo", "foo.example.com"),
            secret_for("bar", "bar.example.com"),
            secret_for("wild", "*.example.com"),
            gateway(
                [
                    https("foo", "foo.example.com", "foo"),
                    https("bar", "bar.example.com", "bar"),
                    https("wild", "*.example.com", "wild", port=8443),
                    listener("plain", 80, "HTTP", "foo.example.com"),
                ]
            ),
        ]
    )
    for name in ("foo", "bar", "wild", "plain"):
        assert OVERLAP not in listener_conditions(result, "Gateway", "gw", name), name


def test_a_listener_without_hostname_overlaps_every_other() -> None:
    result = run(
        [
            gateway_class(),
            secret_for("any", "any.test"),
            secret_for("foo", "foo.test"),
            gateway([https("any", None, "any"), https("foo", "foo.example.com", "foo")]),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "any")[OVERLAP] == BY_HOSTNAMES
    assert listener_conditions(result, "Gateway", "gw", "foo")[OVERLAP] == BY_HOSTNAMES


def test_tls_passthrough_listeners_overlap_by_hostname() -> None:
    passthrough = {"mode": "Passthrough"}
    result = run(
        [
            gateway_class(),
            gateway(
                [
                    listener("wild", 443, "TLS", "*.example.com", tls=passthrough),
                    listener("foo", 443, "TLS", "foo.example.com", tls=passthrough),
                ]
            ),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "wild")[OVERLAP] == BY_HOSTNAMES
    assert listener_conditions(result, "Gateway", "gw", "foo")[OVERLAP] == BY_HOSTNAMES


def test_overlap_across_a_gateway_and_its_listener_set() -> None:
    result = run(
        [
            gateway_class(),
            secret_for("wild", "wild.test"),
            secret_for("foo", "foo.test"),
            gateway([https("wild", "*.example.com", "wild")], allow_sets=True),
            listener_set("ls", [https("foo", "foo.example.com", "foo")]),
        ]
    )
    assert listener_conditions(result, "Gateway", "gw", "wild")[OVERLAP] == BY_HOSTNAMES
    foo = listener_conditions(result, "ListenerSet", "ls", "foo")
    assert foo[OVERLAP] == BY_HOSTNAMES
    assert foo["Accepted"] == ("True", "Accepted")


def test_listeners_not_in_effect_are_not_compared() -> None:
    """A listener whose certificate is missing serves no TLS: nothing overlaps with it."""
    result = run(
        [
            gateway_class(),
            secret_for("foo", "foo.test"),
            gateway(
                [https("foo", "foo.example.com", "foo"), https("wild", "*.example.com", "missing")]
            ),
        ]
    )
    assert OVERLAP not in listener_conditions(result, "Gateway", "gw", "foo")
    wild = listener_conditions(result, "Gateway", "gw", "wild")
    assert OVERLAP not in wild and wild["ResolvedRefs"] == ("False", "InvalidCertificateRef")


_LABELS = ("a", "b", "example", "com")


@st.composite
def _names(draw: st.DrawFn, wildcards: bool) -> str:
    labels = draw(st.lists(st.sampled_from(_LABELS), min_size=1, max_size=4))
    wild = wildcards and draw(st.booleans())
    return ".".join(["*", *labels] if wild else labels)


def _hostnames_overlap(a: str | None, b: str | None) -> bool:
    """Some name matched by both listener hostnames (Gateway API: a wildcard covers any depth)."""
    if a is None or b is None or a == b:
        return True
    return (a.startswith("*.") and b.endswith(a[1:])) or (b.startswith("*.") and a.endswith(b[1:]))


def _sans_overlap(a: str, b: str) -> bool:
    """Some name matched by both certificate SANs (RFC 6125: a wildcard is one label)."""
    if a == b:
        return True
    for wild, name in ((a, b), (b, a)):
        if (
            wild.startswith("*.")
            and not name.startswith("*.")
            and name.partition(".")[2] == wild[2:]
        ):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(hosts=st.lists(st.one_of(st.none(), _names(wildcards=True)), min_size=1, max_size=8))
def test_hostname_overlap_index_agrees_with_the_definition(hosts: list[str | None]) -> None:
    found = tlsoverlap.hostname_overlaps(hosts)
    for i, h in enumerate(hosts):
        peers = [j for j, other in enumerate(hosts) if j != i and _hostnames_overlap(h, other)]
        assert (found[i] in peers) if peers else found[i] == -1, (hosts, i)


@settings(max_examples=300, deadline=None)
@given(
    sans=st.lists(
        st.lists(_names(wildcards=True), max_size=3).map(lambda names: tuple(sorted(set(names)))),
        min_size=1,
        max_size=6,
    )
)
def test_certificate_overlap_index_agrees_with_the_definition(sans: list[tuple[str, ...]]) -> None:
    found = tlsoverlap.certificate_overlaps(sans)
    for i, mine in enumerate(sans):
        peers = {
            j
            for j, theirs in enumerate(sans)
            if j != i and any(_sans_overlap(a, b) for a in mine for b in theirs)
        }
        got = found[i]
        if not peers:
            assert got is None, (sans, i)
        else:
            assert got is not None, (sans, i)
            (j, theirs), own = got
            assert j in peers and own in mine and theirs in sans[j] and _sans_overlap(own, theirs)


# ---------------------------------------------------------------- 2. a certificate's key must be
# its own


def _mismatched_secret(name: str, cert_algorithm: str, key_algorithm: str) -> dict[str, Any]:
    cert, _ = certificate(("foo.example.com",), cert_algorithm)
    return tls_secret(name, cert, key_pem(key_algorithm, variant=1))


@pytest.mark.parametrize(
    "cert_algorithm,key_algorithm",
    [
        ("rsa", "rsa"),
        ("ecdsa", "ecdsa"),
        ("ed25519", "ed25519"),
        ("rsa", "ecdsa"),
        ("ecdsa", "ed25519"),
    ],
)
def test_a_key_that_is_not_the_certificates_is_an_invalid_certificate_ref(
    cert_algorithm: str, key_algorithm: str
) -> None:
    result = run(
        [
            gateway_class(),
            _mismatched_secret("mismatched", cert_algorithm, key_algorithm),
            gateway(
                [https("https", "foo.example.com", "mismatched"), listener("http", 80, "HTTP")]
            ),
        ]
    )
    conds = listener_conditions(result, "Gateway", "gw", "https")
    assert conds["ResolvedRefs"] == ("False", "InvalidCertificateRef")
    assert conds["Programmed"] == ("False", "Invalid")
    assert conds["Accepted"] == ("True", "Accepted")
    message = _listener_condition(result, "https", "ResolvedRefs")["message"]
    assert "default/mismatched" in message and "not the private key" in message
    # What Envoy gets: no listener on 443 (a mismatched pair would make it reject the update).
    assert [p.port for p in result.xds["default/gw"].ports] == [80]


@pytest.mark.parametrize("algorithm", ["rsa", "ecdsa", "ed25519"])
def test_a_certificate_with_its_own_key_resolves(algorithm: str) -> None:
    cert, key = certificate(("foo.example.com",), algorithm)
    result = run(
        [
            gateway_class(),
            tls_secret("ok", cert, key),
            gateway([https("https", "foo.example.com", "ok")]),
        ]
    )
    conds = listener_conditions(result, "Gateway", "gw", "https")
    assert conds["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert conds["Programmed"] == ("True", "Programmed")
    (port,) = result.xds["default/gw"].ports
    assert port.port == 443


def test_the_key_comparison_is_made_once_per_secret_content() -> None:
    """Many listeners and translations using one Secret: its pair is parsed and compared once."""
    cert, _ = certificate(("*.example.com",), "rsa")
    secret = tls_secret("shared", cert, key_pem("rsa", variant=7))
    objects = [
        gateway_class(),
        secret,
        gateway([https(f"l{i}", f"h{i}.example.com", "shared") for i in range(8)]),
    ]
    certs._keypair_problem.cache_clear()
    run(objects)
    run(objects)
    info = certs._keypair_problem.cache_info()
    assert (info.misses, info.hits) == (1, 15)


def _listener_condition(result: Any, listener_name: str, type_: str) -> dict[str, Any]:
    (entry,) = [
        e
        for e in result.statuses[("Gateway", "default", "gw")]["listeners"]
        if e["name"] == listener_name
    ]
    (cond,) = [c for c in entry["conditions"] if c["type"] == type_]
    return dict(cond)


# ---------------------------------------------------------------- 3. wellKnownCACertificates


def _backend_setup(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        gateway_class(),
        gateway([listener("http", 80, "HTTP")]),
        service("secure"),
        endpoint_slice("secure", "127.0.0.9"),
        service("plain", port=8080, port_name="http"),
        endpoint_slice("plain", "127.0.0.8", port=8080, port_name="http"),
        *extra,
    ]


def _policy_conditions(result: Any, name: str) -> dict[str, tuple[str, str]]:
    (ancestor,) = result.statuses[("BackendTLSPolicy", "default", name)]["ancestors"]
    return {cond["type"]: (cond["status"], cond["reason"]) for cond in ancestor["conditions"]}


def test_well_known_ca_certificates_system_is_read() -> None:
    result = run(
        _backend_setup(
            backend_tls_policy("system-ca", "secure", well_known="System"),
            http_route("r", [("secure", 8443, 1)]),
        )
    )
    assert _policy_conditions(result, "system-ca") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    assert route_conditions(result, "r")["ResolvedRefs"] == ("True", "ResolvedRefs")
    (cluster,) = [
        c for c in result.xds["default/gw"].clusters if c.name.startswith("default/secure/")
    ]
    assert (
        cluster.tls is not None
        and cluster.tls.sni == "backend.example.com"
        and cluster.tls.ca_pem == ""
    )
    # What Envoy gets: the upstream certificate is verified against the system trust store.
    context = xds_tls.upstream_context(cluster.tls)
    assert (
        context.common_tls_context.validation_context.trusted_ca.filename
        == xds_tls.system_ca_file()
    )


# ---------------------------------------------------------------- 4. no winner inside one
# ListenerSet


def test_a_protocol_conflict_inside_one_listener_set_has_no_winner() -> None:
    result = run(
        [
            gateway_class(),
            gateway([listener("gateway-listener", 80, "HTTP")], allow_sets=True),
            listener_set(
                "ls", [listener("internal-http", 82, "HTTP"), listener("internal-tcp", 82, "TCP")]
            ),
        ]
    )
    for name in ("internal-http", "internal-tcp"):
        conds = listener_conditions(result, "ListenerSet", "ls", name)
        assert conds["Conflicted"] == ("True", "ProtocolConflict"), name
        assert conds["Accepted"] == ("False", "ProtocolConflict"), name
        assert conds["Programmed"][0] == "False", name
    assert conditions(result, "ListenerSet", "ls") == {
        "Accepted": ("False", "ListenersNotValid"),
        "Programmed": ("False", "ListenersNotValid"),
    }
    gw = result.statuses[("Gateway", "default", "gw")]
    assert gw["attachedListenerSets"] == 0
    # What Envoy gets: nothing on port 82.
    assert [p.port for p in result.xds["default/gw"].ports] == [80]


def test_a_hostname_conflict_inside_one_listener_set_has_no_winner() -> None:
    """HTTPS and TLS share a port by SNI; on the same hostname they are indistinct (the
    schema forbids two listeners with the same port, protocol and hostname)."""
    result = run(
        [
            gateway_class(),
            secret_for("foo", "foo.example.com"),
            gateway([listener("gateway-listener", 80, "HTTP")], allow_sets=True),
            listener_set(
                "ls",
                [
                    https("a", "foo.example.com", "foo", port=82),
                    listener("b", 82, "TLS", "foo.example.com", tls={"mode": "Passthrough"}),
                    listener("c", 83, "HTTP"),
                ],
            ),
        ]
    )
    for name in ("a", "b"):
        conds = listener_conditions(result, "ListenerSet", "ls", name)
        assert conds["Conflicted"] == ("True", "HostnameConflict"), name
        assert conds["Accepted"] == ("False", "HostnameConflict"), name
    assert listener_conditions(result, "ListenerSet", "ls", "c")["Programmed"] == (
        "True",
        "Programmed",
    )
    assert conditions(result, "ListenerSet", "ls")["Accepted"] == ("True", "ListenersNotValid")
    assert result.statuses[("Gateway", "default", "gw")]["attachedListenerSets"] == 1
    assert [p.port for p in result.xds["default/gw"].ports] == [80, 83]


def test_a_listener_set_listener_that_lost_to_the_gateway_leaves_its_sibling_the_port() -> None:
    """Against a higher-precedence source precedence decides first; what is left of the
    ListenerSet is then judged on its own (the one that lost holds no port)."""
    result = run(
        [
            gateway_class(),
            gateway([listener("gateway-listener", 82, "HTTP")], allow_sets=True),
            listener_set(
                "ls", [listener("tcp", 82, "TCP"), listener("http", 82, "HTTP", "foo.example.com")]
            ),
        ]
    )
    assert listener_conditions(result, "ListenerSet", "ls", "tcp")["Conflicted"] == (
        "True",
        "ProtocolConflict",
    )
    http = listener_conditions(result, "ListenerSet", "ls", "http")
    assert http["Conflicted"] == ("False", "NoConflicts") and http["Programmed"] == (
        "True",
        "Programmed",
    )


# ---------------------------------------------------------------- 5. Programmed=False reasons of
# conflicted listeners


def test_conflicted_gateway_listeners_are_programmed_false_invalid() -> None:
    result = run(
        [
            gateway_class(),
            secret_for("foo", "foo.example.com"),
            gateway(
                [
                    listener("http", 80, "HTTP"),
                    listener("tcp", 80, "TCP"),
                    https("https", "foo.example.com", "foo"),
                    listener(
                        "passthrough", 443, "TLS", "foo.example.com", tls={"mode": "Passthrough"}
                    ),
                    listener("ok", 8080, "HTTP"),
                ]
            ),
        ]
    )
    for name, reason in (
        ("http", "ProtocolConflict"),
        ("tcp", "ProtocolConflict"),
        ("https", "HostnameConflict"),
        ("passthrough", "HostnameConflict"),
    ):
        conds = listener_conditions(result, "Gateway", "gw", name)
        assert conds["Programmed"] == ("False", "Invalid"), name
        assert conds["Conflicted"] == ("True", reason), name
        assert conds["Accepted"] == ("False", reason), name
    assert listener_conditions(result, "Gateway", "gw", "ok")["Programmed"] == (
        "True",
        "Programmed",
    )
    assert conditions(result, "Gateway", "gw")["Accepted"] == ("True", "ListenersNotValid")


def test_conflicted_listener_set_entries_keep_the_conflict_reason_on_programmed() -> None:
    """What the v1.6 conformance test ListenerSetProtocolConflict asserts of a ListenerSet
    entry that lost its port to the Gateway (the spec allows reasons beyond its list)."""
    result = run(
        [
            gateway_class(),
            gateway([listener("gateway-listener", 80, "HTTP")], allow_sets=True),
            listener_set("ls", [listener("tcp", 80, "TCP"), listener("ok", 81, "HTTP")]),
        ]
    )
    conds = listener_conditions(result, "ListenerSet", "ls", "tcp")
    assert conds["Programmed"] == ("False", "ProtocolConflict")
    assert conds["Conflicted"] == ("True", "ProtocolConflict")


# ---------------------------------------------------------------- 6. a BackendTLSPolicy that cannot
# be met


def _route_ir(result: Any) -> ir.Route:
    (port,) = result.xds["default/gw"].ports
    assert port.http is not None
    (vhost,) = port.http.virtual_hosts
    (route,) = vhost.routes
    return route


def test_a_backend_whose_policy_cannot_be_met_is_an_invalid_backend_ref() -> None:
    """Every CA ref of the policy is missing: the route is ResolvedRefs=False and that
    backend's share of the requests answers 500."""
    result = run(
        _backend_setup(
            backend_tls_policy("no-ca", "secure", ca_configmaps=["missing-ca"]),
            http_route("r", [("secure", 8443, 1), ("plain", 8080, 3)]),
        )
    )
    conds = route_conditions(result, "r")
    assert conds["ResolvedRefs"] == ("False", "InvalidBackendTLS")
    assert conds["Accepted"] == ("True", "Accepted")
    assert _policy_conditions(result, "no-ca") == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    route = _route_ir(result)
    assert route.direct_status is None
    assert [(b.cluster, b.weight) for b in route.backends] == [
        (ir.INVALID_BACKEND_CLUSTER, 1),
        ("default/plain/8080/http1", 3),
    ]
    assert not [
        c for c in result.xds["default/gw"].clusters if c.name.startswith("default/secure/")
    ]


def test_a_route_whose_only_backend_policy_cannot_be_met_answers_500() -> None:
    result = run(
        _backend_setup(
            backend_tls_policy("no-ca", "secure", ca_configmaps=["missing-ca"]),
            http_route("r", [("secure", 8443, 1)]),
        )
    )
    assert route_conditions(result, "r")["ResolvedRefs"] == ("False", "InvalidBackendTLS")
    route = _route_ir(result)
    assert route.direct_status == 500 and route.backends == ()


def test_the_policys_ca_appearing_resolves_the_route() -> None:
    result = run(
        _backend_setup(
            ca_configmap("the-ca"),
            backend_tls_policy("with-ca", "secure", ca_configmaps=["the-ca"]),
            http_route("r", [("secure", 8443, 1)]),
        )
    )
    assert route_conditions(result, "r")["ResolvedRefs"] == ("True", "ResolvedRefs")
    (backend,) = _route_ir(result).backends
    (cluster,) = [c for c in result.xds["default/gw"].clusters if c.name == backend.cluster]
    assert cluster.tls is not None and cluster.tls.ca_pem


def test_a_tls_route_is_judged_by_the_policy_only_behind_a_terminating_listener() -> None:
    """Behind passthrough the client's own TLS reaches the backend and no BackendTLSPolicy
    applies; behind a terminating listener it does."""
    result = run(
        [
            gateway_class(),
            secret_for("tls", "tls.example.com"),
            gateway(
                [
                    listener(
                        "passthrough", 443, "TLS", "tls.example.com", tls={"mode": "Passthrough"}
                    ),
                    https("terminate", "tls.example.com", "tls", port=8443, protocol="TLS"),
                ]
            ),
            service("secure"),
            endpoint_slice("secure", "127.0.0.9"),
            backend_tls_policy("no-ca", "secure", ca_configmaps=["missing-ca"]),
            tls_route("through", "passthrough"),
            tls_route("terminated", "terminate"),
        ]
    )
    assert route_conditions(result, "through", "TLSRoute")["ResolvedRefs"] == (
        "True",
        "ResolvedRefs",
    )
    assert route_conditions(result, "terminated", "TLSRoute")["ResolvedRefs"] == (
        "False",
        "InvalidBackendTLS",
    )
    ports = {p.port: p for p in result.xds["default/gw"].ports}
    (through,) = ports[443].filter_chains
    (terminated,) = ports[8443].filter_chains
    assert through.tcp is not None and [b.cluster for b in through.tcp.backends] == [
        "default/secure/8443/tcp"
    ]
    assert (
        terminated.tcp is not None and terminated.tcp.backends == ()
    )  # no valid backend: connections are refused
