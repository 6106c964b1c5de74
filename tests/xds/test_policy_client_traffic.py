"""A ClientTrafficPolicy in Envoy's configuration: the connection managers of the listeners it
governs (and only those) take its client settings, validated by Envoy; bad values are refused
with their place and the policy unapplied."""

from __future__ import annotations

from typing import Any

from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import base_pb2, protocol_pb2
from envoy.extensions.filters.listener.proxy_protocol.v3 import proxy_protocol_pb2
from envoy.extensions.filters.network.connection_limit.v3 import connection_limit_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.http.original_ip_detection.custom_header.v3 import custom_header_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.v3 import http_status_pb2

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build
from gateweave.xds.listeners import (
    CONNECTION_LIMIT,
    CUSTOM_HEADER_IP,
    EARLY_HEADER_MUTATION,
    PROXY_PROTOCOL,
)
from gateweave.xds.validate import validate_with_envoy
from tests.support.specletter_objects import certificate, tls_secret
from tests.translate.test_policies import GW, base, models, only, policy, run

XFF2 = {"clientIPDetection": {"xForwardedFor": {"numTrustedHops": 2}}}


def hcm_of(listener: Any) -> hcm_pb2.HttpConnectionManager:
    hcm = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    return hcm


def hops(docs: list[dict[str, Any]]) -> dict[str, int]:
    res = build(run(docs).xds["ns/gw"])
    return {
        name: hcm_of(listener).xff_num_trusted_hops
        for name, listener in sorted(res.listeners.items())
    }


def test_trusted_hops_on_every_listener_of_the_gateway_and_validated_by_envoy() -> None:
    result = run([*base(), policy("c", "ClientTrafficPolicy", spec=XFF2)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    assert {name: hcm_of(lis).xff_num_trusted_hops for name, lis in res.listeners.items()} == {
        "ns/gw/8080": 2,
        "ns/gw/8081": 2,
    }
    assert all(hcm_of(lis).use_remote_address.value for lis in res.listeners.values())
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_a_listener_policy_governs_its_own_listener_over_the_gateways() -> None:
    one = {"clientIPDetection": {"xForwardedFor": {"numTrustedHops": 1}}}
    assert hops([*base(), policy("c", "ClientTrafficPolicy", section="other", spec=XFF2)]) == {
        "ns/gw/8080": 0,
        "ns/gw/8081": 2,
    }
    assert hops(
        [
            *base(),
            policy("g", "ClientTrafficPolicy", spec=one),
            policy("l", "ClientTrafficPolicy", section="other", spec=XFF2),
        ]
    ) == {"ns/gw/8080": 1, "ns/gw/8081": 2}


def stored(spec: dict[str, Any]) -> Any:
    """The translation with a ClientTrafficPolicy ``c`` on the Gateway as stored (not validated
    against the CRD again: a file edited by hand, an object older than the CRD's rules)."""
    bad = m.ClientTrafficPolicy(
        metadata=m.ObjectMeta(name="c", namespace="ns"),
        spec={"targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}], **spec},
    )
    return translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())


def test_bad_hops_are_refused_with_their_place_and_not_applied() -> None:
    for bad in (-1, "2", True):
        result = stored({"clientIPDetection": {"xForwardedFor": {"numTrustedHops": bad}}})
        acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
        assert (acc["status"], acc["reason"]) == ("False", "Invalid")
        assert acc["message"] == (
            f"spec.clientIPDetection.xForwardedFor.numTrustedHops: {bad!r} is not a number of hops"
            " (an integer, 0 or more)"
        )
        assert result.xds == run(base()).xds


def proxy_protocols(docs: list[dict[str, Any]]) -> dict[str, bool | None]:
    """Per listener: whether its first listener filter reads the PROXY protocol optionally (None:
    none).
    """
    out: dict[str, bool | None] = {}
    for name, listener in sorted(build(run(docs).xds["ns/gw"]).listeners.items()):
        filters = [f for f in listener.listener_filters if f.name == PROXY_PROTOCOL]
        out[name] = None
        if filters:
            assert listener.listener_filters[0].name == PROXY_PROTOCOL
            config = proxy_protocol_pb2.ProxyProtocol()
            filters[0].typed_config.Unpack(config)
            out[name] = config.allow_requests_without_proxy_protocol
    return out


def test_proxy_protocol_required_optional_and_deprecated_switch() -> None:
    def ctp(spec: dict[str, Any], section: str | None = None) -> list[dict[str, Any]]:
        return [*base(), policy("c", "ClientTrafficPolicy", section=section, spec=spec)]

    assert proxy_protocols(ctp({"proxyProtocol": {}})) == {"ns/gw/8080": False, "ns/gw/8081": False}
    assert proxy_protocols(ctp({"proxyProtocol": {"optional": True}}, "other")) == {
        "ns/gw/8080": None,
        "ns/gw/8081": True,
    }
    assert proxy_protocols(ctp({"enableProxyProtocol": True})) == {
        "ns/gw/8080": False,
        "ns/gw/8081": False,
    }
    assert proxy_protocols(ctp({"enableProxyProtocol": False})) == {
        "ns/gw/8080": None,
        "ns/gw/8081": None,
    }
    # proxyProtocol takes precedence over the deprecated switch
    assert proxy_protocols(
        ctp({"enableProxyProtocol": False, "proxyProtocol": {"optional": True}})
    ) == {"ns/gw/8080": True, "ns/gw/8081": True}
    ok, message = validate_with_envoy(
        build(run(ctp({"proxyProtocol": {"optional": True}, **XFF2})).xds["ns/gw"])
    )
    assert ok, message


def test_bad_proxy_protocol_values_are_refused_with_their_place() -> None:
    result = stored({"enableProxyProtocol": "yes", "proxyProtocol": {"optional": 1}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.enableProxyProtocol: 'yes' is not true or false; spec.proxyProtocol.optional: 1 "
        "is not true or false"
    )
    assert result.xds == run(base()).xds
    acc = only(stored({"proxyProtocol": "on"}), "c", "ClientTrafficPolicy")["Accepted"]
    assert acc["message"] == "spec.proxyProtocol: 'on' is not an object"


def with_tcp() -> list[dict[str, Any]]:
    """base() with a TCP listener ``tcp`` (port 9000) and a TCPRoute to the Service on it."""
    docs = base()
    gateway = next(d for d in docs if d["kind"] == "Gateway")
    gateway["spec"]["listeners"].append({"name": "tcp", "port": 9000, "protocol": "TCP"})
    docs.append(
        {
            "apiVersion": f"{GW}/v1alpha2",
            "kind": "TCPRoute",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {
                "parentRefs": [{"name": "gw", "sectionName": "tcp"}],
                "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}],
            },
        }
    )
    return docs


def test_timeouts_on_the_connection_managers_and_tcp_proxies() -> None:
    spec = {
        "timeout": {
            "http": {"requestReceivedTimeout": "2s", "idleTimeout": "1m30s"},
            "tcp": {"idleTimeout": "500ms"},
        }
    }
    result = run([*with_tcp(), policy("c", "ClientTrafficPolicy", spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    for name in ("ns/gw/8080", "ns/gw/8081"):
        hcm = hcm_of(res.listeners[name])
        assert hcm.request_timeout.ToMilliseconds() == 2000
        assert hcm.common_http_protocol_options.idle_timeout.ToSeconds() == 90
    proxy = tcp_proxy_pb2.TcpProxy()
    res.listeners["ns/gw/9000"].filter_chains[0].filters[0].typed_config.Unpack(proxy)
    assert proxy.idle_timeout.ToMilliseconds() == 500
    ok, message = validate_with_envoy(res)
    assert ok, message
    # without a policy: Envoy's defaults (no field set)
    plain = build(run(with_tcp()).xds["ns/gw"])
    assert not hcm_of(plain.listeners["ns/gw/8080"]).HasField("request_timeout")
    assert not hcm_of(plain.listeners["ns/gw/8080"]).common_http_protocol_options.HasField(
        "idle_timeout"
    )
    plain.listeners["ns/gw/9000"].filter_chains[0].filters[0].typed_config.Unpack(
        proxy := tcp_proxy_pb2.TcpProxy()
    )
    assert not proxy.HasField("idle_timeout")


def test_bad_timeouts_are_refused_with_their_place() -> None:
    result = stored({"timeout": {"http": {"idleTimeout": "soon"}, "tcp": {"idleTimeout": "1d"}}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.timeout.http.idleTimeout 'soon' is not a duration; "
        "spec.timeout.tcp.idleTimeout '1d' is not a duration"
    )
    assert result.xds == run(base()).xds
    acc = only(stored({"timeout": {"http": "2s"}}), "c", "ClientTrafficPolicy")["Accepted"]
    assert acc["message"] == "spec.timeout: Expected `object | null`, got `str` - at `$.http`"


def test_connection_limit_and_buffer_limit() -> None:
    spec = {"connection": {"connectionLimit": {"value": 3}, "bufferLimit": "64Ki"}}
    result = run([*with_tcp(), policy("c", "ClientTrafficPolicy", spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    for name in ("ns/gw/8080", "ns/gw/8081", "ns/gw/9000"):
        listener = res.listeners[name]
        assert listener.per_connection_buffer_limit_bytes.value == 65536
        assert listener.max_connections_to_accept_per_socket_event.value == 1  # the CRD's default
        first, terminal = listener.filter_chains[0].filters
        assert first.name == CONNECTION_LIMIT and terminal.name != CONNECTION_LIMIT
        config = connection_limit_pb2.ConnectionLimit()
        first.typed_config.Unpack(config)
        assert config.max_connections.value == 3
    ok, message = validate_with_envoy(res)
    assert ok, message
    plain = build(run(with_tcp()).xds["ns/gw"])
    assert all(
        not lis.HasField("per_connection_buffer_limit_bytes")
        and len(lis.filter_chains[0].filters) == 1
        for lis in plain.listeners.values()
    )


def test_bad_connection_values_are_refused_with_their_place() -> None:
    result = stored({"connection": {"connectionLimit": {"value": 0}, "bufferLimit": "8Gi"}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.connection.connectionLimit.value: 0 is not a number of connections (1 to "
        "4294967295); "
        "spec.connection.bufferLimit '8Gi' is more than 4294967295 bytes"
    )
    assert result.xds == run(base()).xds
    acc = only(stored({"connection": {"bufferLimit": "lots"}}), "c", "ClientTrafficPolicy")[
        "Accepted"
    ]
    assert acc["message"] == "spec.connection.bufferLimit 'lots' is not a number of bytes"
    refused = only(
        run(
            [
                *base(),
                policy(
                    "c",
                    "ClientTrafficPolicy",
                    spec={"connection": {"connectionLimit": {"value": 2, "closeDelay": "1s"}}},
                ),
            ]
        ),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert (
        refused["message"]
        == "spec.connection.connectionLimit.closeDelay is not supported by gateweave"
    )
    unlimited = build(
        run(
            [
                *base(),
                policy(
                    "c", "ClientTrafficPolicy", spec={"connection": {"maxAcceptPerSocketEvent": 0}}
                ),
            ]
        ).xds["ns/gw"]
    )
    assert not unlimited.listeners["ns/gw/8080"].HasField(
        "max_connections_to_accept_per_socket_event"
    )


def test_headers_with_underscores_action() -> None:
    for action, want in (
        ("RejectRequest", protocol_pb2.HttpProtocolOptions.REJECT_REQUEST),
        ("DropHeader", protocol_pb2.HttpProtocolOptions.DROP_HEADER),
        ("Allow", protocol_pb2.HttpProtocolOptions.ALLOW),
    ):
        res = build(
            run(
                [
                    *base(),
                    policy(
                        "c",
                        "ClientTrafficPolicy",
                        spec={"headers": {"withUnderscoresAction": action}},
                    ),
                ]
            ).xds["ns/gw"]
        )
        assert {
            hcm_of(lis).common_http_protocol_options.headers_with_underscores_action
            for lis in res.listeners.values()
        } == {want}
    ok, message = validate_with_envoy(res)
    assert ok, message
    acc = only(
        stored({"headers": {"withUnderscoresAction": "Ignore"}}), "c", "ClientTrafficPolicy"
    )["Accepted"]
    assert acc["message"] == (
        "spec.headers.withUnderscoresAction: 'Ignore' is not one of Allow, RejectRequest, "
        "DropHeader"
    )
    refused = only(
        run(
            [
                *base(),
                policy("c", "ClientTrafficPolicy", spec={"headers": {"preserveXRequestID": True}}),
            ]
        ),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert refused["message"] == "spec.headers.preserveXRequestID is not supported by gateweave"


def with_https() -> list[dict[str, Any]]:
    """base() with an HTTPS listener ``https`` (port 8443) terminating with a Secret's
    certificate."""
    docs = base()
    gateway = next(d for d in docs if d["kind"] == "Gateway")
    gateway["spec"]["listeners"].append(
        {
            "name": "https",
            "port": 8443,
            "protocol": "HTTPS",
            "tls": {"certificateRefs": [{"name": "cert"}]},
        }
    )
    cert, key = certificate(("secure.test",))
    return [*docs, tls_secret("cert", cert, key, namespace="ns")]


def downstream_tls(listener: Any) -> tls_pb2.DownstreamTlsContext:
    context = tls_pb2.DownstreamTlsContext()
    listener.filter_chains[0].transport_socket.typed_config.Unpack(context)
    return context


def test_tls_versions_ciphers_and_alpn_on_the_terminating_chains() -> None:
    spec = {
        "tls": {
            "minVersion": "1.1",
            "maxVersion": "1.2",
            "ciphers": [
                "[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]",
                "AES256-SHA",
            ],
            "alpnProtocols": ["http/1.1"],
        }
    }
    result = run([*with_https(), policy("c", "ClientTrafficPolicy", spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    common = downstream_tls(res.listeners["ns/gw/8443"]).common_tls_context
    params = common.tls_params
    assert params.tls_minimum_protocol_version == common_pb2.TlsParameters.TLSv1_1
    assert params.tls_maximum_protocol_version == common_pb2.TlsParameters.TLSv1_2
    assert list(params.cipher_suites) == spec["tls"]["ciphers"]
    assert list(common.alpn_protocols) == ["http/1.1"]
    ok, message = validate_with_envoy(res)
    assert ok, message
    # "Auto" is Envoy's choice; without a policy the chain keeps its own ALPN and Envoy's defaults
    auto = {"tls": {"minVersion": "Auto", "maxVersion": "1.3"}}
    res = build(run([*with_https(), policy("c", "ClientTrafficPolicy", spec=auto)]).xds["ns/gw"])
    params = downstream_tls(res.listeners["ns/gw/8443"]).common_tls_context.tls_params
    assert params.tls_minimum_protocol_version == common_pb2.TlsParameters.TLS_AUTO
    assert params.tls_maximum_protocol_version == common_pb2.TlsParameters.TLSv1_3
    plain = downstream_tls(build(run(with_https()).xds["ns/gw"]).listeners["ns/gw/8443"])
    assert not plain.common_tls_context.HasField("tls_params")
    assert list(plain.common_tls_context.alpn_protocols) == ["h2", "http/1.1"]


def test_bad_tls_values_are_refused_with_their_place() -> None:
    result = stored(
        {
            "tls": {
                "minVersion": "1.3",
                "maxVersion": "1.2",
                "ciphers": ["AES128-SHA", "NOT-A-CIPHER", "[AES256-SHA|RC4]"],
                "alpnProtocols": ["h3"],
            }
        }
    )
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.tls.maxVersion: 1.2 is below spec.tls.minVersion 1.3; "
        "spec.tls.ciphers: no cipher suite is chosen when the minimum version is 1.3; "
        "spec.tls.ciphers[1]: 'NOT-A-CIPHER' is not a cipher suite Envoy knows; "
        "spec.tls.ciphers[2]: '[AES256-SHA|RC4]' is not a cipher suite Envoy knows; "
        "spec.tls.alpnProtocols[0]: 'h3' is not one of http/1.0, http/1.1, h2"
    )
    assert result.xds == run(base()).xds
    acc = only(
        stored({"tls": {"minVersion": "1.4", "ciphers": "AES128-SHA"}}), "c", "ClientTrafficPolicy"
    )["Accepted"]
    assert acc["message"] == (
        "spec.tls.minVersion: '1.4' is not one of Auto, 1.0, 1.1, 1.2, 1.3; "
        "spec.tls.ciphers: 'AES128-SHA' is not a list of strings"
    )
    refused = only(
        run(
            [
                *with_https(),
                policy("c", "ClientTrafficPolicy", spec={"tls": {"fingerprints": ["JA3"]}}),
            ]
        ),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert refused["message"] == "spec.tls.fingerprints is not supported by gateweave"
    acc = only(stored({"tls": {"maxVersion": "1.1"}}), "c", "ClientTrafficPolicy")["Accepted"]
    assert acc["message"] == "spec.tls.maxVersion: 1.1 is below spec.tls.minVersion 1.2"


def early_mutations(listener: Any) -> list[mutation_rules_pb2.HeaderMutation]:
    extensions = hcm_of(listener).early_header_mutation_extensions
    if not extensions:
        return []
    assert [e.name for e in extensions] == [EARLY_HEADER_MUTATION]
    config = header_mutation_pb2.HeaderMutation()
    extensions[0].typed_config.Unpack(config)
    return list(config.mutations)


def test_early_request_headers_set_added_and_removed_first() -> None:
    spec = {
        "headers": {
            "earlyRequestHeaders": {
                "add": [{"name": "x-added", "value": "a"}],
                "set": [{"name": "x-set", "value": "s"}],
                "remove": ["x-gone"],
            }
        }
    }
    result = run([*base(), policy("c", "ClientTrafficPolicy", section="other", spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    overwrite = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
    append = base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD
    got = [
        (m.append.header.key, m.append.header.value, m.append.append_action)
        if m.HasField("append")
        else ("remove", m.remove)
        for m in early_mutations(res.listeners["ns/gw/8081"])
    ]
    assert got == [("x-set", "s", overwrite), ("x-added", "a", append), ("remove", "x-gone")]
    assert early_mutations(res.listeners["ns/gw/8080"]) == []  # another listener's
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_bad_early_request_headers_are_refused_with_their_place() -> None:
    early = {
        "set": [{"name": "x ok", "value": "v"}, {"name": "x-line", "value": "a\r\nb"}],
        "remove": [":path"],
    }
    result = stored({"headers": {"earlyRequestHeaders": early}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.headers.earlyRequestHeaders.set[0].name: 'x ok' is not a header name; "
        "spec.headers.earlyRequestHeaders.set[1].value: 'a\\r\\nb' has a line break or NUL; "
        "spec.headers.earlyRequestHeaders.remove[0]: ':path' is not a header name"
    )
    assert result.xds == run(base()).xds
    acc = only(
        stored({"headers": {"earlyRequestHeaders": {"add": "x-a"}}}), "c", "ClientTrafficPolicy"
    )["Accepted"]
    assert acc["message"].startswith("spec.headers.earlyRequestHeaders: Expected `array`")
    spec = {"headers": {"earlyRequestHeaders": {"addIfAbsent": [{"name": "x-a", "value": "1"}]}}}
    refused = only(
        run([*base(), policy("c", "ClientTrafficPolicy", spec=spec)]), "c", "ClientTrafficPolicy"
    )["Accepted"]
    assert refused["message"] == (
        "spec.headers.earlyRequestHeaders.addIfAbsent is not supported by gateweave"
    )


def test_client_address_from_a_custom_header() -> None:
    for closed in (False, True):
        custom: dict[str, Any] = {"name": "X-Real-IP", "failClosed": closed}
        spec = {"clientIPDetection": {"customHeader": custom}}
        result = run([*base(), policy("c", "ClientTrafficPolicy", spec=spec)])
        assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
        res = build(result.xds["ns/gw"])
        for listener in res.listeners.values():
            hcm = hcm_of(listener)
            assert not hcm.use_remote_address.value
            (extension,) = hcm.original_ip_detection_extensions
            assert extension.name == CUSTOM_HEADER_IP
            config = custom_header_pb2.CustomHeaderConfig()
            extension.typed_config.Unpack(config)
            assert config.header_name == "X-Real-IP"
            assert config.HasField("reject_with_status") == closed
            assert config.reject_with_status.code == (http_status_pb2.Forbidden if closed else 0)
        ok, message = validate_with_envoy(res)
        assert ok, message
    plain = hcm_of(build(run(base()).xds["ns/gw"]).listeners["ns/gw/8080"])
    assert plain.use_remote_address.value and not plain.original_ip_detection_extensions


def test_bad_custom_header_values_are_refused_with_their_place() -> None:
    detection = {
        "customHeader": {"name": "X Real", "failClosed": "yes"},
        "xForwardedFor": {"numTrustedHops": 1},
    }
    result = stored({"clientIPDetection": detection})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.clientIPDetection.customHeader.name: 'X Real' is not a header name (letters, "
        "digits, '-'); "
        "spec.clientIPDetection.customHeader.failClosed: 'yes' is not true or false; "
        "spec.clientIPDetection.customHeader: set with spec.clientIPDetection.xForwardedFor "
        "(one only)"
    )
    assert result.xds == run(base()).xds
