"""The xDS builder: IR -> Envoy protos, checked field by field and by Envoy itself."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import http.client
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2 as ss_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import route_pb2 as udp_route_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import udp_proxy_pb2
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2 as ss_cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2 as ss_header_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.type.v3 import percent_pb2

from gateweave import ir
from gateweave.translate.regex import re2_error
from gateweave.xds import CLUSTER, ENDPOINT, LISTENER, ROUTE, Resources, build, resource_version
from gateweave.xds.routes import pinned_variants, prefix_replacement, retry_on
from gateweave.xds.tls import system_ca_file
from gateweave.xds.validate import envoy_path, render_static_bootstrap, validate_with_envoy
from tests.support.authservers import ALLOWED, USER, USER_HEADER, GrpcAuth, HttpAuth

# ---------------------------------------------------------------- certificates


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: Any) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _issue(
    cn: str,
    sans: list[str],
    issuer: tuple[Any, x509.Name] | None,
    ca: bool = False,
    ecdsa: bool = False,
) -> tuple[str, str, Any]:
    key: Any = (
        ec.generate_private_key(ec.SECP256R1()) if ecdsa else rsa.generate_private_key(65537, 2048)
    )
    now = datetime.datetime.now(datetime.UTC)
    signer_key, issuer_name = issuer if issuer is not None else (key, _name(cn))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]), critical=False
        )
    cert = builder.sign(signer_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key), key


class Certs(msgspec.Struct):
    ca: str
    server_rsa: tuple[str, str]
    server_ec: tuple[str, str]
    client_ca: str
    client: tuple[str, str]


@pytest.fixture(scope="module")
def certs() -> Certs:
    ca_pem, _, ca_key = _issue("test-ca", [], None, ca=True)
    rsa_cert, rsa_key, _ = _issue(
        "example.com", ["example.com", "*.example.com"], (ca_key, _name("test-ca"))
    )
    ec_cert, ec_key, _ = _issue(
        "example.com", ["example.com"], (ca_key, _name("test-ca")), ecdsa=True
    )
    cca_pem, _, cca_key = _issue("client-ca", [], None, ca=True)
    client_cert, client_key, _ = _issue("client", [], (cca_key, _name("client-ca")), ecdsa=True)
    return Certs(
        ca=ca_pem,
        server_rsa=(rsa_cert, rsa_key),
        server_ec=(ec_cert, ec_key),
        client_ca=cca_pem,
        client=(client_cert, client_key),
    )


# ---------------------------------------------------------------- the IR under test

ECHO = "svc/default/echo/8080"
ECHO2 = "svc/default/echo2/8080"
MIRROR = "svc/default/mirror/8080"
GRPC = "svc/default/grpc/9000"
SECURE = "svc/default/secure/443"
SYSTEM = "svc/default/system/443"
EMPTY = "svc/default/empty/80"
WS = "svc/default/ws/80"
TCP1 = "svc/default/tcp/9000"
TCP2 = "svc/default/tcp2/9000"
UDP1 = "svc/default/udp/53"
UDP2 = "svc/default/udp2/53"


def _ep(last: int, port: int) -> ir.Endpoint:
    return ir.Endpoint(address=f"10.0.0.{last}", port=port)


def _to(cluster: str, weight: int = 1, **kw: Any) -> tuple[ir.WeightedCluster, ...]:
    return (ir.WeightedCluster(cluster=cluster, weight=weight, **kw),)


def _prefix(path: str) -> ir.RouteMatch:
    return ir.RouteMatch(path_type="PathPrefix", path=path)


def _http_routes() -> tuple[ir.Route, ...]:
    n = "httproute/default/all/rule"
    return (
        ir.Route(
            name=f"{n}/0/match/0",
            match=ir.RouteMatch(path_type="Exact", path="/exact"),
            backends=_to(ECHO),
        ),
        ir.Route(
            name=f"{n}/1/match/0",
            match=ir.RouteMatch(
                path_type="PathPrefix",
                path="/prefix",
                headers=(
                    ir.StringMatch(name="X-Version", type="Exact", value="v1"),
                    ir.StringMatch(name="x-user", type="RegularExpression", value="^[a-z]+$"),
                ),
                query_params=(
                    ir.StringMatch(name="color", type="Exact", value="blue"),
                    ir.StringMatch(name="size", type="RegularExpression", value="[0-9]+"),
                ),
                method="GET",
            ),
            backends=(
                ir.WeightedCluster(
                    cluster=ECHO,
                    weight=80,
                    request_headers=ir.HeaderMods(set=(("x-backend", "echo"),)),
                    response_headers=ir.HeaderMods(remove=("x-internal",)),
                ),
                ir.WeightedCluster(cluster=ECHO2, weight=20),
                ir.WeightedCluster(cluster=EMPTY, weight=0),
            ),
        ),
        ir.Route(name=f"{n}/2/match/0", match=_prefix("/trailing/"), backends=_to(ECHO)),
        ir.Route(
            name=f"{n}/3/match/0",
            match=ir.RouteMatch(path_type="RegularExpression", path="/re/[a-z]+/[0-9]{2,}"),
            backends=_to(ECHO),
        ),
        ir.Route(
            name="grpcroute/default/g/rule/0/match/0",
            match=ir.RouteMatch(path_type="Exact", path="/pkg.Svc/Method", grpc=True),
            backends=_to(GRPC),
        ),
        ir.Route(
            name=f"{n}/4/match/0",
            match=_prefix("/to-https"),
            redirect=ir.Redirect(scheme="https", status_code=301),
        ),
        ir.Route(
            name=f"{n}/5/match/0",
            match=_prefix("/full-redirect"),
            redirect=ir.Redirect(
                hostname="other.example", path_type="ReplaceFullPath", path="/new", status_code=302
            ),
        ),
        ir.Route(
            name=f"{n}/6/match/0",
            match=_prefix("/prefix-redirect"),
            redirect=ir.Redirect(
                path_type="ReplacePrefixMatch", path="/", status_code=303, port=8443, scheme="https"
            ),
        ),
        ir.Route(
            name=f"{n}/7/match/0",
            match=_prefix("/r307"),
            redirect=ir.Redirect(status_code=307, port=80),
        ),
        ir.Route(
            name=f"{n}/8/match/0", match=_prefix("/r308"), redirect=ir.Redirect(status_code=308)
        ),
        ir.Route(name=f"{n}/9/match/0", match=_prefix("/teapot"), direct_status=418),
        ir.Route(name=f"{n}/10/match/0", match=_prefix("/zero"), backends=_to(ECHO, weight=0)),
        ir.Route(name=f"{n}/11/match/0", match=_prefix("/none")),
        ir.Route(
            name=f"{n}/12/match/0",
            match=_prefix("/rewrite-full"),
            backends=_to(ECHO),
            url_rewrite=ir.URLRewrite(
                hostname="internal.example", path_type="ReplaceFullPath", path="/full"
            ),
        ),
        ir.Route(
            name=f"{n}/13/match/0",
            match=_prefix("/rewrite-prefix"),
            backends=_to(ECHO),
            url_rewrite=ir.URLRewrite(path_type="ReplacePrefixMatch", path="/"),
        ),
        ir.Route(
            name=f"{n}/14/match/0",
            match=_prefix("/rewrite-xyz"),
            backends=_to(ECHO),
            url_rewrite=ir.URLRewrite(path_type="ReplacePrefixMatch", path="/xyz"),
        ),
        ir.Route(
            name=f"{n}/15/match/0",
            match=_prefix("/headers"),
            backends=_to(ECHO),
            request_headers=ir.HeaderMods(
                set=(("x-set", "1"),), add=(("x-add", "2"),), remove=("x-remove",)
            ),
            response_headers=ir.HeaderMods(
                set=(("x-rset", "3"),), add=(("x-radd", "4"),), remove=("server",)
            ),
        ),
        ir.Route(
            name=f"{n}/16/match/0",
            match=_prefix("/mirror"),
            backends=_to(ECHO),
            mirrors=(
                ir.Mirror(cluster=MIRROR),
                ir.Mirror(cluster=ECHO2, numerator=50, denominator=100),
                ir.Mirror(cluster=EMPTY, numerator=1, denominator=3),
            ),
        ),
        ir.Route(
            name=f"{n}/17/match/0",
            match=_prefix("/timeouts"),
            backends=_to(ECHO),
            timeout_s=10,
            backend_timeout_s=2.5,
        ),
        ir.Route(
            name=f"{n}/18/match/0",
            match=_prefix("/backend-timeout"),
            backends=_to(ECHO),
            backend_timeout_s=3,
        ),
        ir.Route(
            name=f"{n}/19/match/0", match=_prefix("/no-timeout"), backends=_to(ECHO), timeout_s=0
        ),
        ir.Route(
            name=f"{n}/20/match/0",
            match=_prefix("/retry"),
            backends=_to(ECHO),
            backend_timeout_s=1,
            retry=ir.Retry(codes=(503, 500), attempts=3, backoff_s=0.1),
        ),
        ir.Route(
            name=f"{n}/21/match/0",
            match=_prefix("/cors"),
            backends=_to(ECHO),
            cors=ir.CORS(
                allow_origins=("https://foo.example", "https://*.example.com", "*"),
                allow_methods=("GET", "POST"),
                allow_headers=("x-a", "x-b"),
                expose_headers=("x-c",),
                allow_credentials=True,
                max_age_s=60,
            ),
        ),
        ir.Route(name=f"{n}/22/match/0", match=_prefix("/ws"), backends=_to(WS)),
        ir.Route(name=f"{n}/23/match/0", match=_prefix("/secure"), backends=_to(SECURE)),
        ir.Route(name=f"{n}/24/match/0", match=_prefix("/system"), backends=_to(SYSTEM)),
        ir.Route(
            name=f"{n}/26/match/0",
            match=_prefix("/host-header"),
            backends=(
                ir.WeightedCluster(
                    cluster=ECHO,
                    weight=1,
                    request_headers=ir.HeaderMods(add=(("Host", "b.example"),)),
                ),
                ir.WeightedCluster(cluster=ECHO2, weight=1),
            ),
            request_headers=ir.HeaderMods(
                set=(("Host", "a.example"), ("x-ok", "1")), remove=("host", ":path", "x-gone")
            ),
            response_headers=ir.HeaderMods(set=((":status", "201"),), remove=(":status",)),
        ),
        ir.Route(
            name=f"{n}/27/match/0",
            match=_prefix("/sticky"),
            backends=(
                ir.WeightedCluster(cluster=ECHO, weight=3),
                ir.WeightedCluster(cluster=ECHO2, weight=1),
            ),
            session=ir.Session(type="Cookie", name="shop", path="/sticky", ttl_s=3600),
        ),
        ir.Route(
            name=f"{n}/28/match/0",
            match=_prefix("/sticky-header"),
            backends=_to(ECHO),
            session=ir.Session(type="Header", name="x-session"),
        ),
        ir.Route(name=f"{n}/25/match/0", match=_prefix("/"), backends=_to(ECHO)),
    )


def _https_routes(tag: str) -> ir.RouteConfig:
    return ir.RouteConfig(
        name=f"default/gw/443/{tag}",
        virtual_hosts=(
            ir.VirtualHost(
                name=f"default/gw/443/{tag}/vh",
                domains=("*",),
                routes=(
                    ir.Route(
                        name=f"{tag}/0",
                        match=_prefix("/plain"),
                        redirect=ir.Redirect(path_type="ReplaceFullPath", path="/p"),
                    ),
                    ir.Route(name=f"{tag}/1", match=_prefix("/"), backends=_to(ECHO)),
                ),
            ),
        ),
    )


def full_gateway(c: Certs) -> ir.XdsGateway:
    tls_rsa = ir.Certificate(name="default/rsa", cert_pem=c.server_rsa[0], key_pem=c.server_rsa[1])
    tls_ec = ir.Certificate(name="default/ec", cert_pem=c.server_ec[0], key_pem=c.server_ec[1])
    clusters = (
        ir.Cluster(name=ECHO, endpoints=(_ep(1, 8080),)),
        ir.Cluster(name=ECHO2, endpoints=(_ep(2, 8080), _ep(3, 8080))),
        ir.Cluster(name=MIRROR, endpoints=(_ep(4, 8080),)),
        ir.Cluster(name=GRPC, protocol="H2C", endpoints=(_ep(5, 9000),)),
        ir.Cluster(
            name=SECURE,
            protocol="HTTP2",
            endpoints=(_ep(6, 443),),
            tls=ir.UpstreamTLS(
                sni="secure.example.com",
                ca_pem=c.ca,
                subject_alt_names=(
                    ir.SANMatch(type="DNS", value="secure.example.com"),
                    ir.SANMatch(type="URI", value="spiffe://cluster.local/ns/default/sa/secure"),
                ),
                client_cert_pem=c.client[0],
                client_key_pem=c.client[1],
            ),
        ),
        ir.Cluster(
            name=SYSTEM, endpoints=(_ep(7, 443),), tls=ir.UpstreamTLS(sni="system.example.org")
        ),
        ir.Cluster(name=EMPTY),
        ir.Cluster(name=WS, protocol="WEBSOCKET", endpoints=(_ep(8, 80),)),
        ir.Cluster(name=TCP1, protocol="TCP", endpoints=(_ep(9, 9000),)),
        ir.Cluster(name=TCP2, protocol="TCP", endpoints=(_ep(10, 9000),)),
        ir.Cluster(name=UDP1, protocol="UDP", endpoints=(_ep(11, 53),)),
        ir.Cluster(name=UDP2, protocol="UDP", endpoints=(_ep(12, 53), _ep(13, 53))),
    )
    http = ir.RouteConfig(
        name="default/gw/80",
        virtual_hosts=(
            ir.VirtualHost(
                name="default/gw/80/example.com",
                domains=("example.com", "*.example.com"),
                routes=_http_routes(),
            ),
            ir.VirtualHost(
                name="default/gw/80/*",
                domains=("*",),
                routes=(ir.Route(name="catchall", match=_prefix("/"), backends=_to(ECHO2)),),
            ),
        ),
    )
    tcp_weighted = ir.TCPProxy(name="default/gw/tcp", backends=(*_to(TCP1, 3), *_to(TCP2, 1)))
    chains = (
        ir.FilterChain(
            name="default/gw/https-example",
            server_names=("example.com", "*.example.com"),
            tls=ir.TLSTermination(
                certificates=(tls_rsa, tls_ec),
                client_validation=ir.ClientValidation(ca_pem=c.client_ca, mode="AllowValidOnly"),
            ),
            http=_https_routes("https-example"),
        ),
        ir.FilterChain(
            name="default/gw/https-any",
            tls=ir.TLSTermination(
                certificates=(tls_rsa,),
                client_validation=ir.ClientValidation(
                    ca_pem=c.client_ca, mode="AllowInsecureFallback"
                ),
            ),
            http=_https_routes("https-any"),
        ),
        ir.FilterChain(
            name="default/gw/passthrough", server_names=("pass.example.net",), tcp=tcp_weighted
        ),
        ir.FilterChain(
            name="default/gw/terminate",
            server_names=("tcp.example.net",),
            tls=ir.TLSTermination(certificates=(tls_ec,)),
            tcp=ir.TCPProxy(name="default/gw/terminate", backends=_to(TCP1)),
        ),
    )
    return ir.XdsGateway(
        name="default/gw",
        address="127.10.0.1",
        ports=(
            ir.Port(name="default/gw/80", port=80, protocol="HTTP", http=http),
            ir.Port(name="default/gw/443", port=443, protocol="TLS", filter_chains=chains),
            ir.Port(name="default/gw/9000", port=9000, protocol="TCP", tcp=tcp_weighted),
            ir.Port(
                name="default/gw/9001",
                port=9001,
                protocol="TCP",
                tcp=ir.TCPProxy(name="default/gw/closed"),
            ),
            ir.Port(
                name="default/gw/5353",
                port=5353,
                protocol="UDP",
                udp=ir.TCPProxy(name="default/gw/udp1", backends=_to(UDP1)),
            ),
            ir.Port(
                name="default/gw/5354",
                port=5354,
                protocol="UDP",
                udp=ir.TCPProxy(name="default/gw/udp2", backends=(*_to(UDP1, 1), *_to(UDP2, 3))),
            ),
            ir.Port(
                name="default/gw/5355",
                port=5355,
                protocol="UDP",
                udp=ir.TCPProxy(name="default/gw/udp0"),
            ),
        ),
        clusters=tuple(sorted(clusters, key=lambda cl: cl.name)),
    )


@pytest.fixture(scope="module")
def gw(certs: Certs) -> ir.XdsGateway:
    return full_gateway(certs)


@pytest.fixture(scope="module")
def res(gw: ir.XdsGateway) -> Resources:
    return build(gw)


# ---------------------------------------------------------------- helpers


def _hcm(listener: listener_pb2.Listener, chain: int = 0) -> hcm_pb2.HttpConnectionManager:
    out = hcm_pb2.HttpConnectionManager()
    assert listener.filter_chains[chain].filters[0].typed_config.Unpack(out)
    return out


def _route(res: Resources, name: str, config: str = "default/gw/80") -> rc.Route:
    for vh in res.routes[config].virtual_hosts:
        for r in vh.routes:
            if r.name == name:
                return r
    raise KeyError(name)


def _r(i: int) -> str:
    return f"httproute/default/all/rule/{i}/match/0"


# ---------------------------------------------------------------- Envoy accepts it all


def test_envoy_validates_the_full_gateway(res: Resources) -> None:
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_resources_by_type_url_and_names(gw: ir.XdsGateway, res: Resources) -> None:
    by_type = res.by_type()
    assert list(by_type) == [
        CLUSTER,
        ENDPOINT,
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        LISTENER,
        ROUTE,
    ]
    assert list(res[LISTENER]) == sorted(p.name for p in gw.ports)
    assert set(res.routes) == {
        "default/gw/80",
        "default/gw/443/https-example",
        "default/gw/443/https-any",
    }
    # every cluster has its ClusterLoadAssignment, the synthesized UDP ones included
    assert set(res.clusters) == set(res.endpoints)
    assert {c.name for c in gw.clusters} | {
        "default/gw/udp2#weighted",
        "default/gw/udp0#weighted",
    } == set(res.clusters)
    assert all(isinstance(msg, cluster_pb2.Cluster) for msg in res.clusters.values())
    assert all(isinstance(msg, listener_pb2.Listener) for msg in res.listeners.values())


# ---------------------------------------------------------------- listeners


def test_http_listener(res: Resources) -> None:
    lis = res.listeners["default/gw/80"]
    assert lis.address.socket_address.address == "127.10.0.1"
    assert lis.address.socket_address.port_value == 80
    assert lis.HasField("enable_reuse_port") and not lis.enable_reuse_port.value
    assert lis.stat_prefix == "default_gw_80"
    hcm = _hcm(lis)
    assert hcm.codec_type == hcm_pb2.HttpConnectionManager.AUTO
    assert hcm.rds.route_config_name == "default/gw/80"
    assert hcm.rds.config_source.HasField("ads")
    assert hcm.rds.config_source.resource_api_version == 2  # V3
    assert [f.name for f in hcm.http_filters] == [
        "envoy.filters.http.cors",
        "envoy.filters.http.fault",
        "envoy.filters.http.stateful_session",
        "envoy.filters.http.router",
    ]
    assert hcm.use_remote_address.value
    assert hcm.HasField("normalize_path") and not hcm.normalize_path.value
    assert not hcm.merge_slashes
    assert hcm.path_with_escaped_slashes_action == hcm_pb2.HttpConnectionManager.KEEP_UNCHANGED
    assert not hcm.strip_any_host_port  # ports are ignored by the route configurations instead
    assert [u.upgrade_type for u in hcm.upgrade_configs] == ["websocket"]
    assert hcm.stat_prefix == "default_gw_80"


def test_tls_listener(res: Resources, certs: Certs) -> None:
    lis = res.listeners["default/gw/443"]
    assert [f.name for f in lis.listener_filters] == ["envoy.filters.listener.tls_inspector"]
    names = [fc.name for fc in lis.filter_chains]
    assert names == [
        "default/gw/https-example",
        "default/gw/https-any",
        "default/gw/passthrough",
        "default/gw/terminate",
    ]
    example, anyhost, passthrough, terminate = lis.filter_chains
    assert list(example.filter_chain_match.server_names) == ["example.com", "*.example.com"]
    assert list(anyhost.filter_chain_match.server_names) == []
    assert example.filter_chain_match.transport_protocol == "tls"

    ctx = tls_pb2.DownstreamTlsContext()
    assert example.transport_socket.typed_config.Unpack(ctx)
    assert example.transport_socket.name == "envoy.transport_sockets.tls"
    assert [c.certificate_chain.inline_string for c in ctx.common_tls_context.tls_certificates] == [
        certs.server_rsa[0],
        certs.server_ec[0],
    ]
    assert (
        ctx.common_tls_context.tls_certificates[0].private_key.inline_string == certs.server_rsa[1]
    )
    assert list(ctx.common_tls_context.alpn_protocols) == ["h2", "http/1.1"]
    assert ctx.require_client_certificate.value is True
    validation = ctx.common_tls_context.validation_context
    assert validation.trusted_ca.inline_string == certs.client_ca
    assert (
        validation.trust_chain_verification
        == common_pb2.CertificateValidationContext.VERIFY_TRUST_CHAIN
    )
    assert _hcm(lis, 0).rds.route_config_name == "default/gw/443/https-example"

    ctx = tls_pb2.DownstreamTlsContext()
    assert anyhost.transport_socket.typed_config.Unpack(ctx)
    assert (
        ctx.HasField("require_client_certificate") and ctx.require_client_certificate.value is False
    )
    assert (
        ctx.common_tls_context.validation_context.trust_chain_verification
        == common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
    )

    # passthrough: no transport socket, weighted tcp_proxy
    assert not passthrough.HasField("transport_socket")
    tcp = tcp_proxy_pb2.TcpProxy()
    assert passthrough.filters[0].typed_config.Unpack(tcp)
    assert [(w.name, w.weight) for w in tcp.weighted_clusters.clusters] == [(TCP1, 3), (TCP2, 1)]

    # terminate then tcp_proxy, no HTTP ALPN
    ctx = tls_pb2.DownstreamTlsContext()
    assert terminate.transport_socket.typed_config.Unpack(ctx)
    assert list(ctx.common_tls_context.alpn_protocols) == []
    assert not ctx.common_tls_context.HasField("validation_context")
    tcp = tcp_proxy_pb2.TcpProxy()
    assert terminate.filters[0].typed_config.Unpack(tcp)
    assert tcp.cluster == TCP1


def test_tcp_listeners(res: Resources) -> None:
    tcp = tcp_proxy_pb2.TcpProxy()
    lis = res.listeners["default/gw/9000"]
    assert lis.filter_chains[0].filters[0].name == "envoy.filters.network.tcp_proxy"
    assert lis.filter_chains[0].filters[0].typed_config.Unpack(tcp)
    assert tcp.stat_prefix == "default_gw_tcp"
    assert [(w.name, w.weight) for w in tcp.weighted_clusters.clusters] == [(TCP1, 3), (TCP2, 1)]
    # no backend: a filter chain without filters, Envoy closes every connection
    closed = res.listeners["default/gw/9001"]
    assert len(closed.filter_chains) == 1 and not closed.filter_chains[0].filters


def test_udp_listeners(res: Resources) -> None:
    def target(port: int) -> str:
        lis = res.listeners[f"default/gw/{port}"]
        assert lis.address.socket_address.protocol == lis.address.socket_address.UDP
        assert lis.HasField("udp_listener_config")
        assert lis.enable_reuse_port.value  # required by Envoy for UDP with several workers
        (flt,) = lis.listener_filters
        assert flt.name == "envoy.filters.udp_listener.udp_proxy"
        cfg = udp_proxy_pb2.UdpProxyConfig()
        assert flt.typed_config.Unpack(cfg)
        route = udp_route_pb2.Route()
        assert cfg.matcher.on_no_match.action.typed_config.Unpack(route)
        return route.cluster

    assert target(5353) == UDP1
    assert target(5354) == "default/gw/udp2#weighted"
    cla = res.endpoints["default/gw/udp2#weighted"]
    assert res.clusters["default/gw/udp2#weighted"].common_lb_config.HasField(
        "locality_weighted_lb_config"
    )
    assert [(len(loc.lb_endpoints), loc.load_balancing_weight.value) for loc in cla.endpoints] == [
        (1, 1),
        (2, 3),
    ]
    assert target(5355) == "default/gw/udp0#weighted"
    assert not res.endpoints["default/gw/udp0#weighted"].endpoints


# ---------------------------------------------------------------- route matches


def test_virtual_hosts(res: Resources) -> None:
    vhs = res.routes["default/gw/80"].virtual_hosts
    assert [(vh.name, list(vh.domains)) for vh in vhs] == [
        ("default/gw/80/example.com", ["example.com", "*.example.com"]),
        ("default/gw/80/*", ["*"]),
    ]
    assert [r.name for r in vhs[0].routes][:2] == [_r(0), _r(1)]  # IR order kept


def test_path_matches(res: Resources) -> None:
    assert _route(res, _r(0)).match.path == "/exact"
    assert _route(res, _r(1)).match.path_separated_prefix == "/prefix"
    assert _route(res, _r(2)).match.path_separated_prefix == "/trailing"  # trailing "/" ignored
    assert _route(res, _r(25)).match.prefix == "/"
    assert _route(res, _r(3)).match.safe_regex.regex == "/re/[a-z]+/[0-9]{2,}"


def test_header_query_method_grpc_matches(res: Resources) -> None:
    m = _route(res, _r(1)).match
    headers = [(h.name, h.string_match.exact, h.string_match.safe_regex.regex) for h in m.headers]
    assert headers == [("x-version", "v1", ""), ("x-user", "", "^[a-z]+$"), (":method", "GET", "")]
    params = [
        (q.name, q.string_match.exact, q.string_match.safe_regex.regex) for q in m.query_parameters
    ]
    assert params == [("color", "blue", ""), ("size", "", "[0-9]+")]
    g = _route(res, "grpcroute/default/g/rule/0/match/0")
    assert g.match.HasField("grpc") and g.match.path == "/pkg.Svc/Method"
    assert not _route(res, _r(0)).match.HasField("grpc")


# ---------------------------------------------------------------- route actions


def test_backends(res: Resources) -> None:
    assert _route(res, _r(0)).route.cluster == ECHO
    weighted = _route(res, _r(1)).route.weighted_clusters.clusters
    assert [(w.name, w.weight.value) for w in weighted] == [
        (ECHO, 80),
        (ECHO2, 20),
    ]  # weight 0 dropped
    (set_echo,) = weighted[0].request_headers_to_add
    assert (set_echo.header.key, set_echo.header.value) == ("x-backend", "echo")
    assert set_echo.append_action == set_echo.OVERWRITE_IF_EXISTS_OR_ADD
    assert list(weighted[0].response_headers_to_remove) == ["x-internal"]
    assert not weighted[1].request_headers_to_add
    assert _route(res, _r(9)).direct_response.status == 418
    assert _route(res, _r(10)).direct_response.status == 500  # all weights zero
    assert _route(res, _r(11)).direct_response.status == 500  # no backends


def test_redirects(res: Resources) -> None:
    codes = rc.RedirectAction
    r = _route(res, _r(4)).redirect
    assert (r.scheme_redirect, r.port_redirect, r.response_code) == (
        "https",
        0,
        codes.MOVED_PERMANENTLY,
    )
    r = _route(res, _r(5)).redirect
    assert (r.host_redirect, r.path_redirect, r.response_code) == (
        "other.example",
        "/new",
        codes.FOUND,
    )
    assert r.port_redirect == 0  # listener port 80 is http's own
    r = _route(res, _r(6)).redirect
    assert (r.scheme_redirect, r.port_redirect, r.response_code) == ("https", 8443, codes.SEE_OTHER)
    assert (
        r.regex_rewrite.pattern.regex == "^/prefix-redirect/*"
        and r.regex_rewrite.substitution == "/"
    )
    r = _route(res, _r(7)).redirect
    assert (r.port_redirect, r.response_code) == (0, codes.TEMPORARY_REDIRECT)
    assert _route(res, _r(8)).redirect.response_code == codes.PERMANENT_REDIRECT
    # on the HTTPS listener (443) a plain redirect keeps https and adds no port
    r = _route(res, "https-any/0", "default/gw/443/https-any").redirect
    assert (r.scheme_redirect, r.port_redirect, r.path_redirect) == ("", 0, "/p")


def test_url_rewrites(res: Resources) -> None:
    a = _route(res, _r(12)).route
    assert a.host_rewrite_literal == "internal.example"
    assert (a.regex_rewrite.pattern.regex, a.regex_rewrite.substitution) == ("^/.*$", "/full")
    a = _route(res, _r(13)).route
    assert (a.regex_rewrite.pattern.regex, a.regex_rewrite.substitution) == (
        "^/rewrite-prefix/*",
        "/",
    )
    assert _route(res, _r(14)).route.prefix_rewrite == "/xyz"


@pytest.mark.parametrize(
    ("matched", "replacement", "expected"),
    [
        ("/foo", "/xyz", ("/xyz", None)),
        ("/foo", "/xyz/", ("/xyz", None)),
        ("/foo/", "/xyz", ("/xyz", None)),  # the match is on "/foo" too
        ("/foo", "/", (None, ("^/foo/*", "/"))),
        ("/foo/", "", (None, ("^/foo/*", "/"))),
        ("/a.b+", "/", (None, ("^/a\\.b\\+/*", "/"))),  # RE2 metacharacters escaped
        ("/", "/xyz", (None, ("^/", "/xyz/"))),
        ("/", "/c\\d", (None, ("^/", "/c\\\\d/"))),  # "\" doubled in a substitution
        ("/", "/", (None, None)),
    ],
)
def test_prefix_replacement(matched: str, replacement: str, expected: Any) -> None:
    prefix, regex = prefix_replacement(
        ir.RouteMatch(path_type="PathPrefix", path=matched), replacement
    )
    got = (prefix, None if regex is None else (regex.pattern.regex, regex.substitution))
    assert got == expected


def test_header_modifiers(res: Resources) -> None:
    r = _route(res, _r(15))
    req = [(h.header.key, h.header.value, h.append_action) for h in r.request_headers_to_add]
    overwrite, append = (
        r.request_headers_to_add[0].OVERWRITE_IF_EXISTS_OR_ADD,
        r.request_headers_to_add[0].APPEND_IF_EXISTS_OR_ADD,
    )
    assert req == [("x-set", "1", overwrite), ("x-add", "2", append)]
    assert list(r.request_headers_to_remove) == ["x-remove"]
    resp = [(h.header.key, h.header.value, h.append_action) for h in r.response_headers_to_add]
    assert resp == [("x-rset", "3", overwrite), ("x-radd", "4", append)]
    assert list(r.response_headers_to_remove) == ["server"]


def test_host_and_pseudo_header_modifiers(res: Resources) -> None:
    """Envoy NACKs a RouteConfiguration touching Host or pseudo-headers: Host becomes
    a host rewrite, the rest is left out (the full gateway validates with Envoy)."""
    r = _route(res, _r(26))
    assert [h.header.key for h in r.request_headers_to_add] == ["x-ok"]
    assert list(r.request_headers_to_remove) == ["x-gone"]
    assert not r.response_headers_to_add and not r.response_headers_to_remove
    assert r.route.host_rewrite_literal == "a.example"
    echo, echo2 = r.route.weighted_clusters.clusters
    assert echo.host_rewrite_literal == "b.example" and not echo.request_headers_to_add
    assert echo2.host_rewrite_literal == ""


def test_mirrors(res: Resources) -> None:
    full, half, third = _route(res, _r(16)).route.request_mirror_policies
    assert full.cluster == MIRROR and not full.HasField("runtime_fraction")
    assert full.disable_shadow_host_suffix_append
    assert half.cluster == ECHO2
    assert (
        half.runtime_fraction.default_value.numerator,
        half.runtime_fraction.default_value.denominator,
    ) == (
        50,
        percent_pb2.FractionalPercent.HUNDRED,
    )
    assert (
        third.runtime_fraction.default_value.numerator,
        third.runtime_fraction.default_value.denominator,
    ) == (
        333333,
        percent_pb2.FractionalPercent.MILLION,
    )


def test_timeouts(res: Resources) -> None:
    a = _route(res, _r(17)).route
    assert (
        a.timeout.ToMilliseconds() == 10_000
        and a.retry_policy.per_try_timeout.ToMilliseconds() == 2500
    )
    assert a.retry_policy.retry_on == ""  # only a per-try bound, no retries
    a = _route(res, _r(18)).route
    assert a.timeout.ToMilliseconds() == 3000 and not a.HasField("retry_policy")
    a = _route(res, _r(19)).route
    assert a.HasField("timeout") and a.timeout.ToMilliseconds() == 0  # disabled
    assert not _route(res, _r(0)).route.HasField("timeout")  # Envoy's default


def test_retry(res: Resources) -> None:
    a = _route(res, _r(20)).route
    p = a.retry_policy
    assert p.retry_on == "retriable-status-codes,connect-failure,refused-stream,reset"
    assert list(p.retriable_status_codes) == [500, 503]
    assert p.num_retries.value == 3
    assert p.retry_back_off.base_interval.ToMilliseconds() == 100
    assert p.per_try_timeout.ToMilliseconds() == 1000
    assert a.timeout.ToMilliseconds() == 0  # each attempt is bounded instead
    assert retry_on((500,)) == "retriable-status-codes"
    assert retry_on((504,)) == "retriable-status-codes,reset"
    assert retry_on(()) == "connect-failure,refused-stream,reset"


def test_cors(res: Resources) -> None:
    r = _route(res, _r(21))
    policy = cors_pb2.CorsPolicy()
    assert r.typed_per_filter_config["envoy.filters.http.cors"].Unpack(policy)
    origins = [(o.exact, o.safe_regex.regex) for o in policy.allow_origin_string_match]
    assert origins == [
        ("https://foo.example", ""),
        ("", "^https://[^/]+\\.example\\.com$"),
        ("", ".*"),
    ]
    assert (policy.allow_methods, policy.allow_headers, policy.expose_headers, policy.max_age) == (
        "GET, POST",
        "x-a, x-b",
        "x-c",
        "60",
    )
    assert policy.allow_credentials.value
    # a preflight from a disallowed origin is answered by Envoy, never forwarded
    assert (
        policy.HasField("forward_not_matching_preflights")
        and not policy.forward_not_matching_preflights.value
    )
    assert "envoy.filters.http.cors" not in _route(res, _r(0)).typed_per_filter_config


def _session(route: rc.Route) -> ss_pb2.StatefulSessionPerRoute:
    out = ss_pb2.StatefulSessionPerRoute()
    assert route.typed_per_filter_config["envoy.filters.http.stateful_session"].Unpack(out)
    return out


def test_session_pin_regex_within_envoy_limit() -> None:
    # The longest cookie name the CRD allows (256): the pin routes' cookie regex still compiles
    # within Envoy's RE2 program size limit (with "<name>-backend" it did not past ~58 bytes).
    route = ir.Route(
        name="httproute/default/long/rule/0/match/0",
        match=_prefix("/"),
        backends=(
            ir.WeightedCluster(cluster=ECHO, weight=1),
            ir.WeightedCluster(cluster=ECHO2, weight=1),
        ),
        session=ir.Session(type="Cookie", name="c" * 256),
    )
    variants = pinned_variants(route)
    assert variants is not None and len(variants) == 3
    for pinned in variants[:2]:
        (cookie_match,) = [m for m in pinned.match.headers if m.name == "cookie"]
        assert re2_error(cookie_match.value) is None


def test_session_persistence(res: Resources) -> None:
    # The filter is in every HCM chain, disabled: only routes with a session enable it.
    hcm = _hcm(res.listeners["default/gw/80"])
    session_filter = next(
        f for f in hcm.http_filters if f.name == "envoy.filters.http.stateful_session"
    )
    assert session_filter.disabled
    assert "envoy.filters.http.stateful_session" not in _route(res, _r(0)).typed_per_filter_config

    header = _session(_route(res, _r(28))).stateful_session.session_state
    assert header.name == "envoy.http.stateful_session.header"
    state = ss_header_pb2.HeaderBasedSessionState()
    assert header.typed_config.Unpack(state) and state.name == "x-session"

    # A cookie session over two backendRefs: one route per backendRef for the clients pinned to it
    # (by the second cookie), before the route that picks by weight and sets that cookie.
    names = [r.name for vh in res.routes["default/gw/80"].virtual_hosts for r in vh.routes]
    at = names.index(_r(27))
    pins = names[at - 2 : at]
    assert all(name.startswith(_r(27) + "/pin/") for name in pins)
    picking = _route(res, _r(27))
    set_cookies = {
        w.name: [h.header.value for h in w.response_headers_to_add if h.header.key == "set-cookie"]
        for w in picking.route.weighted_clusters.clusters
    }
    pin = "backend-" + hashlib.sha256(b"shop").hexdigest()[:12]  # the session cookie's is shop
    for name in pins:
        pinned = _route(res, name)
        value = name.rsplit("/", 1)[1]
        (cookie_match,) = [m for m in pinned.match.headers if m.name == "cookie"]
        pattern = cookie_match.string_match.safe_regex.regex
        assert re.fullmatch(pattern, f"a=1; {pin}={value}; shop=x")
        assert re.fullmatch(pattern, f"{pin}={value}")
        assert not re.fullmatch(pattern, f"{pin}={value}0") and not re.fullmatch(
            pattern, f"{pin}=other"
        )
        assert re2_error(pattern) is None
        assert pinned.match.path_separated_prefix == "/sticky"
        assert set_cookies[pinned.route.cluster] == [
            f"{pin}={value}; Path=/sticky; Max-Age=3600; HttpOnly"
        ]
        assert _session(pinned) == _session(picking)
    assert {_route(res, name).route.cluster for name in pins} == {ECHO, ECHO2}
    cookie_state = _session(picking).stateful_session.session_state
    assert cookie_state.name == "envoy.http.stateful_session.cookie"
    state_c = ss_cookie_pb2.CookieBasedSessionState()
    assert cookie_state.typed_config.Unpack(state_c)
    assert (state_c.cookie.name, state_c.cookie.path, state_c.cookie.ttl.seconds) == (
        "shop",
        "/sticky",
        3600,
    )


# ---------------------------------------------------------------- clusters


def test_clusters(res: Resources, certs: Certs) -> None:
    echo = res.clusters[ECHO]
    assert echo.type == cluster_pb2.Cluster.EDS
    assert echo.eds_cluster_config.eds_config.HasField("ads")
    assert echo.connect_timeout.seconds > 0
    assert echo.alt_stat_name == "svc_default_echo_8080"
    assert not echo.typed_extension_protocol_options and not echo.HasField("transport_socket")

    opts = http_protocol_options_pb2.HttpProtocolOptions()
    grpc = res.clusters[GRPC]
    assert grpc.typed_extension_protocol_options[
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ].Unpack(opts)
    assert opts.explicit_http_config.HasField("http2_protocol_options")
    assert not res.clusters[WS].typed_extension_protocol_options  # HTTP/1.1 for websocket

    ctx = tls_pb2.UpstreamTlsContext()
    secure = res.clusters[SECURE]
    assert secure.transport_socket.typed_config.Unpack(ctx)
    assert ctx.sni == "secure.example.com"
    common = ctx.common_tls_context
    assert common.validation_context.trusted_ca.inline_string == certs.ca
    sans = [
        (m.san_type, m.matcher.exact)
        for m in common.validation_context.match_typed_subject_alt_names
    ]
    assert sans == [
        (common_pb2.SubjectAltNameMatcher.DNS, "secure.example.com"),
        (common_pb2.SubjectAltNameMatcher.URI, "spiffe://cluster.local/ns/default/sa/secure"),
    ]
    assert common.tls_certificates[0].certificate_chain.inline_string == certs.client[0]
    assert list(common.alpn_protocols) == ["h2"]

    ctx = tls_pb2.UpstreamTlsContext()
    assert res.clusters[SYSTEM].transport_socket.typed_config.Unpack(ctx)
    vc = ctx.common_tls_context.validation_context
    assert vc.trusted_ca.filename == system_ca_file()
    assert [(m.san_type, m.matcher.exact) for m in vc.match_typed_subject_alt_names] == [
        (common_pb2.SubjectAltNameMatcher.DNS, "system.example.org")
    ]
    assert not ctx.common_tls_context.tls_certificates


def test_load_assignments(res: Resources) -> None:
    cla = res.endpoints[ECHO2]
    assert cla.cluster_name == ECHO2
    addrs = [
        (e.endpoint.address.socket_address.address, e.endpoint.address.socket_address.port_value)
        for e in cla.endpoints[0].lb_endpoints
    ]
    assert addrs == [("10.0.0.2", 8080), ("10.0.0.3", 8080)]
    empty = res.endpoints[EMPTY]
    assert empty.cluster_name == EMPTY and not empty.endpoints


# ---------------------------------------------------------------- determinism


def test_determinism(gw: ir.XdsGateway, res: Resources, certs: Certs) -> None:
    again = build(msgspec.json.decode(msgspec.json.encode(gw), type=ir.XdsGateway))
    assert again.versions() == res.versions()
    for url, items in res.by_type().items():
        other = again[url]
        assert list(items) == list(other)
        for name, msg in items.items():
            assert msg.SerializeToString(deterministic=True) == other[name].SerializeToString(
                deterministic=True
            )
    # a change moves exactly the resources it touches
    changed_cluster = ir.Cluster(name=ECHO, endpoints=(_ep(99, 8080),))
    changed = msgspec.structs.replace(
        gw, clusters=tuple(changed_cluster if c.name == ECHO else c for c in gw.clusters)
    )
    v1, v2 = res.versions(), build(changed).versions()
    assert v1[CLUSTER] == v2[CLUSTER] and v1[LISTENER] == v2[LISTENER] and v1[ROUTE] == v2[ROUTE]
    assert [n for n in v1[ENDPOINT] if v1[ENDPOINT][n] != v2[ENDPOINT][n]] == [ECHO]
    assert resource_version(res.clusters[ECHO]) == v1[CLUSTER][ECHO]
    assert resource_version(res.clusters[ECHO]) != resource_version(res.clusters[ECHO2])


def test_conflicting_names_are_rejected() -> None:
    gw = ir.XdsGateway(
        name="default/gw",
        address="127.0.0.1",
        clusters=(ir.Cluster(name="a"), ir.Cluster(name="a", protocol="H2C")),
    )
    with pytest.raises(ValueError, match="two different clusters"):
        build(gw)


# ---------------------------------------------------------------- Envoy rejects what it must


def _single_route_gateway(match: ir.RouteMatch) -> ir.XdsGateway:
    route = ir.Route(name="r", match=match, backends=_to("c"))
    config = ir.RouteConfig(
        name="rc", virtual_hosts=(ir.VirtualHost(name="vh", domains=("*",), routes=(route,)),)
    )
    return ir.XdsGateway(
        name="default/bad",
        address="127.0.0.1",
        ports=(ir.Port(name="default/bad/8080", port=8080, protocol="HTTP", http=config),),
        clusters=(ir.Cluster(name="c", endpoints=(ir.Endpoint(address="127.0.0.1", port=1),)),),
    )


@pytest.mark.parametrize(
    "match",
    [
        ir.RouteMatch(path_type="RegularExpression", path="/bad("),
        ir.RouteMatch(headers=(ir.StringMatch(name="x", type="RegularExpression", value="/bad("),)),
    ],
    ids=["path", "header"],
)
def test_bad_re2_regex_is_rejected_with_envoys_message(match: ir.RouteMatch) -> None:
    ok, message = validate_with_envoy(build(_single_route_gateway(match)))
    assert not ok
    assert message == "missing ): /bad("


def test_unknown_cluster_is_rejected() -> None:
    gw = _single_route_gateway(_prefix("/"))
    gw = msgspec.structs.replace(gw, clusters=())
    ok, message = validate_with_envoy(build(gw))
    assert not ok and "unknown cluster 'c'" in message


# ---------------------------------------------------------------- end to end with a real Envoy


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out separately

    def do_GET(self) -> None:
        body = json.dumps(
            {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("x-from-backend", "yes")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def backend() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _e2e_gateway(address: str, port: int, backend_port: int) -> ir.XdsGateway:
    routes = (
        ir.Route(
            name="redirect",
            match=_prefix("/old"),
            redirect=ir.Redirect(
                hostname="new.example", path_type="ReplaceFullPath", path="/new", status_code=302
            ),
        ),
        ir.Route(
            name="strip",
            match=_prefix("/strip"),
            backends=_to("echo"),
            url_rewrite=ir.URLRewrite(path_type="ReplacePrefixMatch", path="/"),
        ),
        ir.Route(
            name="full",
            match=_prefix("/full"),
            backends=_to("echo"),
            url_rewrite=ir.URLRewrite(path_type="ReplaceFullPath", path="/replaced"),
        ),
        ir.Route(
            name="teapot", match=ir.RouteMatch(path_type="Exact", path="/teapot"), direct_status=418
        ),
        ir.Route(
            # an invalid backendRef's share answers 500 (the valid one here has weight 0)
            name="invalid-share",
            match=ir.RouteMatch(path_type="Exact", path="/invalid"),
            backends=(
                ir.WeightedCluster(cluster="echo", weight=0),
                ir.WeightedCluster(cluster=ir.INVALID_BACKEND_CLUSTER, weight=1),
            ),
        ),
        ir.Route(
            name="to-https",
            match=_prefix("/secure"),
            redirect=ir.Redirect(scheme="https", status_code=301),
        ),
        ir.Route(name="dir", match=_prefix("/dir/"), direct_status=204),
        ir.Route(
            name="host",
            match=_prefix("/host"),
            backends=_to("echo"),
            request_headers=ir.HeaderMods(set=(("Host", "rewritten.example"),)),
        ),
        ir.Route(
            name="cors",
            match=_prefix("/cors"),
            backends=_to("echo"),
            cors=ir.CORS(
                allow_origins=("https://*.example.com",), allow_methods=("GET", "PUT"), max_age_s=30
            ),
        ),
        ir.Route(
            name="main",
            match=_prefix("/"),
            backends=_to("echo"),
            request_headers=ir.HeaderMods(set=(("x-set", "gw"),), remove=("x-drop",)),
            response_headers=ir.HeaderMods(add=(("x-resp", "added"),)),
        ),
    )
    config = ir.RouteConfig(
        name="e2e",
        virtual_hosts=(ir.VirtualHost(name="vh", domains=("app.example",), routes=routes),),
    )
    return ir.XdsGateway(
        name="default/e2e",
        address=address,
        ports=(ir.Port(name="default/e2e/http", port=port, protocol="HTTP", http=config),),
        clusters=(
            ir.Cluster(
                name="echo", endpoints=(ir.Endpoint(address="127.0.0.1", port=backend_port),)
            ),
            ir.Cluster(name=ir.INVALID_BACKEND_CLUSTER),
        ),
    )


def _request(
    address: str,
    port: int,
    path: str,
    headers: dict[str, str],
    method: str = "GET",
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(address, port, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


class _Envoy:
    """A static-bootstrap Envoy for one test, killed by its PID on exit."""

    def __init__(self, res: Resources, tmp: str) -> None:
        self.admin = _free_port("127.0.0.1")
        self.path = os.path.join(tmp, "bootstrap.json")
        with open(self.path, "w") as f:
            json.dump(render_static_bootstrap(res, self.admin), f)
        self.log_path = os.path.join(tmp, "envoy.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Envoy:
        command = [envoy_path(), "-c", self.path, "--concurrency", "1", "--disable-hot-restart"]
        with open(self.log_path, "w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [*command, "--log-level", "warn"],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=os.path.dirname(self.path),  # its access log (access.log) goes there
            )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                with open(self.log_path) as f:
                    raise AssertionError(f"Envoy exited: {f.read()}")
            with contextlib.suppress(OSError):
                if _request("127.0.0.1", self.admin, "/ready", {})[0] == 200:
                    return
            assert time.monotonic() < deadline, "Envoy not ready"
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def test_end_to_end_with_envoy(backend: int) -> None:
    address = f"127.0.{os.getpid() % 200 + 20}.{os.getpid() % 250 + 2}"
    port = _free_port(address)
    res = build(_e2e_gateway(address, port, backend))
    with tempfile.TemporaryDirectory() as tmp, _Envoy(res, tmp):
        host = {"Host": f"app.example:{port}"}
        status, headers, body = _request(address, port, "/hello?x=1", {**host, "x-drop": "1"})
        assert status == 200 and headers["x-from-backend"] == "yes"
        seen = json.loads(body)
        assert seen["path"] == "/hello?x=1"
        assert (
            seen["headers"]["host"] == f"app.example:{port}"
        )  # the Host reaches the backend unchanged
        assert seen["headers"]["x-set"] == "gw" and "x-drop" not in seen["headers"]
        assert headers["x-resp"] == "added"

        status, headers, _ = _request(address, port, "/old/page?q=2", host)
        assert status == 302
        # listener port is not http's 80, so the Location keeps it
        assert headers["location"] == f"http://new.example:{port}/new?q=2"

        status, _, body = _request(address, port, "/strip/a/b?q=3", host)
        assert status == 200 and json.loads(body)["path"] == "/a/b?q=3"
        status, _, body = _request(address, port, "/strip", host)
        assert status == 200 and json.loads(body)["path"] == "/"
        status, _, body = _request(address, port, "/full/x?q=4", host)
        assert status == 200 and json.loads(body)["path"] == "/replaced?q=4"

        assert _request(address, port, "/teapot", host)[0] == 418
        assert _request(address, port, "/invalid", host)[0] == 500
        # PathPrefix "/dir/": whole path elements, trailing "/" ignored
        for path, expected in (("/dir", 204), ("/dir/", 204), ("/dir/a", 204), ("/dirx", 200)):
            assert _request(address, port, path, host)[0] == expected, path
        status, _, body = _request(address, port, "/host", host)
        assert status == 200 and json.loads(body)["headers"]["host"] == "rewritten.example"

        # a scheme change drops the listener port: https's own port is implied
        status, headers, _ = _request(address, port, "/secure/x", host)
        assert status == 301 and headers["location"] == "https://app.example/secure/x"

        preflight = {
            **host,
            "Origin": "https://a.b.example.com",
            "Access-Control-Request-Method": "PUT",
        }
        status, headers, _ = _request(address, port, "/cors", preflight, method="OPTIONS")
        assert status == 200
        assert headers["access-control-allow-origin"] == "https://a.b.example.com"
        assert headers["access-control-allow-methods"] == "GET, PUT"
        assert headers["access-control-max-age"] == "30"
        preflight["Origin"] = "https://evil.example.org"
        status, headers, _ = _request(address, port, "/cors", preflight, method="OPTIONS")
        assert "access-control-allow-origin" not in headers
        assert _request(address, port, "/", {"Host": "other.example"})[0] == 404


# ---------------------------------------------------------------- end to end: ExternalAuth


def _auth_gateway(
    address: str, port: int, backend: int, http_auth: int, grpc_auth: int
) -> ir.XdsGateway:
    http = ir.ExtAuth(
        protocol="HTTP", cluster="http-auth", path="/check", allowed_headers=("X-Extra",)
    )
    routes = (
        ir.Route(name="http", match=_prefix("/http"), backends=_to("echo"), ext_auth=http),
        ir.Route(
            name="http-some",
            match=_prefix("/some"),
            backends=_to("echo"),
            ext_auth=ir.ExtAuth(
                protocol="HTTP", cluster="http-auth", allowed_response_headers=("x-auth-user",)
            ),
        ),
        ir.Route(
            name="grpc",
            match=_prefix("/grpc"),
            backends=_to("echo"),
            ext_auth=ir.ExtAuth(protocol="GRPC", cluster="grpc-auth"),
        ),
        ir.Route(
            name="grpc-few",
            match=_prefix("/few"),
            backends=_to("echo"),
            ext_auth=ir.ExtAuth(
                protocol="GRPC", cluster="grpc-auth", allowed_headers=("authorization",)
            ),
        ),
        ir.Route(
            name="body",
            match=_prefix("/body"),
            backends=_to("echo"),
            ext_auth=ir.ExtAuth(protocol="GRPC", cluster="grpc-auth", max_body_bytes=8),
        ),
        ir.Route(name="open", match=_prefix("/"), backends=_to("echo")),
    )
    config = ir.RouteConfig(
        name="auth", virtual_hosts=(ir.VirtualHost(name="vh", domains=("*",), routes=routes),)
    )
    return ir.XdsGateway(
        name="default/auth",
        address=address,
        ports=(ir.Port(name="default/auth/http", port=port, protocol="HTTP", http=config),),
        clusters=(
            ir.Cluster(name="echo", endpoints=(ir.Endpoint(address="127.0.0.1", port=backend),)),
            ir.Cluster(
                name="grpc-auth",
                protocol="H2C",
                endpoints=(ir.Endpoint(address="127.0.0.1", port=grpc_auth),),
            ),
            ir.Cluster(
                name="http-auth", endpoints=(ir.Endpoint(address="127.0.0.1", port=http_auth),)
            ),
        ),
    )


def test_external_auth_with_envoy(backend: int) -> None:
    """Each route asks its own auth service (HTTP or gRPC): what it allows reaches the backend with
    the headers it added, what it denies gets its answer; routes without ExternalAuth ask nobody."""
    address = f"127.0.{os.getpid() % 200 + 20}.{os.getpid() % 250 + 2}"
    port = _free_port(address)
    http_auth, grpc_auth = HttpAuth("127.0.0.1"), GrpcAuth("127.0.0.1")
    good = {"Host": "app.example", "Authorization": ALLOWED, "X-Extra": "e", "X-Other": "o"}
    try:
        res = build(_auth_gateway(address, port, backend, http_auth.port, grpc_auth.port))
        # one ext_authz filter per distinct ExternalAuth, after CORS, each off unless a route turns
        # it on
        filters = _hcm(res.listeners["default/auth/http"]).http_filters
        authz = [f for f in filters if f.name.startswith("envoy.filters.http.ext_authz/")]
        assert (
            len(authz) == 5
            and all(f.disabled for f in authz)
            and filters[0].name == "envoy.filters.http.cors"
        )
        assert [f.name for f in filters[1:6]] == sorted(f.name for f in authz)
        assert not res.routes["auth"].virtual_hosts[0].routes[-1].typed_per_filter_config  # "open"
        with tempfile.TemporaryDirectory() as tmp, _Envoy(res, tmp):
            status, _, body = _request(address, port, "/open", {"Host": "app.example"})
            assert status == 200 and not http_auth.checks and not grpc_auth.checks

            for path, name in (("/http/a?q=1", "http-auth"), ("/grpc/b?q=2", "grpc-auth")):
                status, _, body = _request(address, port, path, good)
                seen = json.loads(body)["headers"]
                assert (
                    status == 200 and json.loads(body)["path"] == path and seen[USER_HEADER] == USER
                )
                # the HTTP service's own Date, Server, Content-Length do not go on with the request
                assert not {"date", "server", "content-length"} & set(seen)
                status, headers, body = _request(
                    address, port, path, {**good, "Authorization": "Bearer bad"}
                )
                assert (status, body, headers["x-denied-by"]) == (
                    403,
                    f"denied by {name}".encode(),
                    name,
                )
            # HTTP: the path goes behind the prefix; the service gets the headers always sent and
            # those allowed
            asked = http_auth.checks[0]
            assert asked.path == "/check/http/a?q=1" and asked.headers["authorization"] == ALLOWED
            assert asked.headers["x-extra"] == "e" and "x-other" not in asked.headers
            # gRPC: every header unless some are listed
            assert grpc_auth.checks[0].headers["x-other"] == "o"
            assert _request(address, port, "/few", good)[0] == 200
            assert (
                "x-other" not in grpc_auth.checks[-1].headers
                and grpc_auth.checks[-1].headers["authorization"] == ALLOWED
            )
            assert _request(address, port, "/some", good)[0] == 200

            # forwardBody: up to maxSize goes to the service; a longer body is refused
            status, _, _ = _request(address, port, "/body", good, method="POST", body=b"1234")
            assert status == 200 and grpc_auth.checks[-1].body == b"1234"
            checks = len(grpc_auth.checks)
            assert _request(address, port, "/body", good, method="POST", body=b"x" * 20)[0] == 413
            assert len(grpc_auth.checks) == checks
    finally:
        http_auth.close()
        grpc_auth.close()


# ---------------------------------------------------------------- end to end: backendRef redirects
# and rewrites


def _split_gateway(address: str, port: int, backend_port: int) -> ir.XdsGateway:
    """Routes whose backendRefs carry their own RequestRedirect / URLRewrite filters."""
    n = "httproute/default/split/rule"
    routes = (
        ir.Route(
            name=f"{n}/0/match/0",
            match=_prefix("/only-redirect"),
            backends=_to(
                "echo", redirect=ir.Redirect(path_type="ReplacePrefixMatch", path="/moved")
            ),
        ),
        ir.Route(
            # the rule rewrites the Host, the backendRef the path: both apply
            name=f"{n}/1/match/0",
            match=_prefix("/only-rewrite"),
            url_rewrite=ir.URLRewrite(hostname="rule.example"),
            backends=_to(
                "echo", url_rewrite=ir.URLRewrite(path_type="ReplaceFullPath", path="/rewritten")
            ),
        ),
        ir.Route(
            name=f"{n}/2/match/0",
            match=_prefix("/mixed"),
            request_headers=ir.HeaderMods(set=(("x-rule", "1"),)),
            backends=(
                ir.WeightedCluster(cluster="echo", weight=1),
                ir.WeightedCluster(
                    cluster="echo",
                    weight=1,
                    url_rewrite=ir.URLRewrite(path_type="ReplaceFullPath", path="/rewritten"),
                ),
                ir.WeightedCluster(
                    cluster="echo", weight=0, redirect=ir.Redirect(hostname="never.example")
                ),
                ir.WeightedCluster(
                    cluster="echo",
                    weight=2,
                    redirect=ir.Redirect(hostname="moved.example", status_code=307),
                ),
            ),
        ),
    )
    config = ir.RouteConfig(
        name="split",
        virtual_hosts=(ir.VirtualHost(name="vh", domains=("*",), routes=routes),),
    )
    return ir.XdsGateway(
        name="default/split",
        address=address,
        ports=(ir.Port(name="default/split/http", port=port, protocol="HTTP", http=config),),
        clusters=(
            ir.Cluster(
                name="echo", endpoints=(ir.Endpoint(address="127.0.0.1", port=backend_port),)
            ),
        ),
    )


def test_backend_ref_redirects_and_rewrites_split_the_route() -> None:
    res = build(_split_gateway("127.0.0.1", 8080, 9))
    ok, message = validate_with_envoy(res)
    assert ok, message
    n = "httproute/default/split/rule"
    (vh,) = res.routes["split"].virtual_hosts
    assert [r.name for r in vh.routes] == [
        f"{n}/0/match/0",
        f"{n}/1/match/0",
        f"{n}/2/match/0/backends/0",
        f"{n}/2/match/0/backends/1",
        f"{n}/2/match/0/backends/2",
    ]
    only_redirect, only_rewrite, plain, rewritten, redirected = vh.routes
    # one group: no runtime fraction, the route simply redirects / rewrites
    assert only_redirect.WhichOneof("action") == "redirect" and not only_redirect.match.HasField(
        "runtime_fraction"
    )
    assert only_redirect.redirect.prefix_rewrite == "/moved"
    assert (
        only_rewrite.route.cluster == "echo"
        and only_rewrite.route.host_rewrite_literal == "rule.example"
    )
    assert only_rewrite.route.regex_rewrite.substitution == "/rewritten"
    # three groups (the weight-0 redirect is dropped): cumulative shares 1/4, 2/4, then the rest
    million = percent_pb2.FractionalPercent.MILLION
    fractions = [
        (
            r.match.runtime_fraction.default_value.numerator,
            r.match.runtime_fraction.default_value.denominator,
        )
        for r in (plain, rewritten)
    ]
    assert fractions == [(250_000, million), (500_000, million)]
    assert not redirected.match.HasField("runtime_fraction")
    assert all(r.match.path_separated_prefix == "/mixed" for r in (plain, rewritten, redirected))
    assert plain.route.cluster == "echo" and not plain.route.HasField("regex_rewrite")
    assert (
        rewritten.route.cluster == "echo"
        and rewritten.route.regex_rewrite.substitution == "/rewritten"
    )
    assert redirected.redirect.host_redirect == "moved.example"
    assert redirected.redirect.response_code == rc.RedirectAction.TEMPORARY_REDIRECT
    # rule-level filters apply to every group
    for r in (plain, rewritten, redirected):
        assert [h.header.key for h in r.request_headers_to_add] == ["x-rule"]


def test_backend_ref_redirects_and_rewrites_with_envoy(backend: int) -> None:
    address = f"127.0.{os.getpid() % 200 + 20}.{(os.getpid() + 3) % 250 + 2}"
    port = _free_port(address)
    res = build(_split_gateway(address, port, backend))
    with tempfile.TemporaryDirectory() as tmp, _Envoy(res, tmp):
        host = {"Host": "app.example"}
        status, headers, _ = _request(address, port, "/only-redirect/a?q=1", host)
        assert status == 302 and headers["location"] == f"http://app.example:{port}/moved/a?q=1"
        status, _, body = _request(address, port, "/only-rewrite/a?q=1", host)
        seen = json.loads(body)
        assert (
            status == 200
            and seen["path"] == "/rewritten?q=1"
            and seen["headers"]["host"] == "rule.example"
        )

        # Weights 1 (as is) : 1 (rewritten) : 2 (redirected). Envoy tests every route's
        # fraction against one random value per request, so the shares are 1/4, 1/4, 1/2
        # (with independent draws the last two would get 3/8 each).
        counts = {"plain": 0, "rewritten": 0, "redirected": 0}
        conn = http.client.HTTPConnection(address, port, timeout=5)
        try:
            for _ in range(800):
                conn.request("GET", "/mixed/x", headers=host)
                resp = conn.getresponse()
                body = resp.read()
                if resp.status == 307:
                    assert resp.getheader("location", "").startswith("http://moved.example")
                    counts["redirected"] += 1
                else:
                    assert resp.status == 200
                    path = json.loads(body)["path"]
                    assert path in ("/mixed/x", "/rewritten")
                    counts["plain" if path == "/mixed/x" else "rewritten"] += 1
        finally:
            conn.close()
        # expected 200 / 200 / 400, standard deviation about 12 / 12 / 14
        assert 140 <= counts["plain"] <= 260, counts
        assert 140 <= counts["rewritten"] <= 260, counts
        assert 340 <= counts["redirected"] <= 460, counts


# ---------------------------------------------------------------- end to end: TLS, TCP, UDP


@pytest.fixture
def udp_echo() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(2048)
            except TimeoutError:
                continue
            sock.sendto(b"echo:" + data, peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(sock.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


def _tls_gateway(
    address: str, ports: dict[str, int], http_port: int, udp_port: int, c: Certs
) -> ir.XdsGateway:
    cert = ir.Certificate(name="default/rsa", cert_pem=c.server_rsa[0], key_pem=c.server_rsa[1])

    def https(tag: str, mode: str) -> ir.FilterChain:
        route = ir.Route(
            name=f"{tag}/r",
            match=_prefix("/"),
            backends=_to("echo"),
            response_headers=ir.HeaderMods(set=(("x-chain", tag),)),
        )
        return ir.FilterChain(
            name=f"default/tls/{tag}",
            server_names=(f"{tag}.example.com",),
            tls=ir.TLSTermination(
                certificates=(cert,),
                client_validation=ir.ClientValidation(ca_pem=c.client_ca, mode=mode),
            ),
            http=ir.RouteConfig(
                name=f"tls/{tag}",
                virtual_hosts=(ir.VirtualHost(name=tag, domains=("*",), routes=(route,)),),
            ),
        )

    chains = (
        https("strict", "AllowValidOnly"),
        https("fallback", "AllowInsecureFallback"),
        ir.FilterChain(
            name="default/tls/raw",
            server_names=("raw.example.com",),
            tls=ir.TLSTermination(certificates=(cert,)),
            tcp=ir.TCPProxy(name="raw", backends=_to("echo")),
        ),
    )
    return ir.XdsGateway(
        name="default/tls",
        address=address,
        ports=(
            ir.Port(
                name="default/tls/tls", port=ports["tls"], protocol="TLS", filter_chains=chains
            ),
            ir.Port(
                name="default/tls/tcp",
                port=ports["tcp"],
                protocol="TCP",
                tcp=ir.TCPProxy(name="tcp", backends=(*_to("echo", 1), *_to("empty", 0))),
            ),
            ir.Port(
                name="default/tls/closed",
                port=ports["closed"],
                protocol="TCP",
                tcp=ir.TCPProxy(name="closed"),
            ),
            ir.Port(
                name="default/tls/udp",
                port=ports["udp"],
                protocol="UDP",
                udp=ir.TCPProxy(name="udp", backends=_to("udp")),
            ),
        ),
        clusters=(
            ir.Cluster(name="echo", endpoints=(ir.Endpoint(address="127.0.0.1", port=http_port),)),
            ir.Cluster(name="empty"),
            ir.Cluster(
                name="udp",
                protocol="UDP",
                endpoints=(ir.Endpoint(address="127.0.0.1", port=udp_port),),
            ),
        ),
    )


def _raw_http(sock: socket.socket, host: str) -> bytes:
    sock.sendall(f"GET /raw HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    chunks = []
    for _ in range(100):
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_end_to_end_tls_tcp_udp(backend: int, udp_echo: int, certs: Certs) -> None:
    import ssl

    address = f"127.0.{os.getpid() % 200 + 20}.{(os.getpid() + 7) % 250 + 2}"
    ports = {
        "tls": _free_port(address),
        "tcp": _free_port(address),
        "closed": _free_port(address),
        "udp": 0,
    }
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((address, 0))
        ports["udp"] = int(probe.getsockname()[1])
    res = build(_tls_gateway(address, ports, backend, udp_echo, certs))
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        untrusted_cert, untrusted_key, _ = _issue("intruder", [], None, ecdsa=True)
        for name, pem in {
            "ca": certs.ca,
            "client": certs.client[0] + certs.client[1],
            "untrusted": untrusted_cert + untrusted_key,
        }.items():
            files[name] = os.path.join(tmp, f"{name}.pem")
            with open(files[name], "w") as f:
                f.write(pem)

        def tls_get(sni: str, client: str | None) -> tuple[int, dict[str, str]]:
            ctx = ssl.create_default_context(cafile=files["ca"])
            ctx.set_alpn_protocols(["http/1.1"])
            if client is not None:
                ctx.load_cert_chain(files[client])
            with (
                socket.create_connection((address, ports["tls"]), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname=sni) as tls_sock,
            ):
                assert tls_sock.selected_alpn_protocol() == "http/1.1"
                tls_sock.sendall(
                    f"GET /x HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode()
                )
                response = http.client.HTTPResponse(tls_sock)
                response.begin()
                response.read()
                return response.status, {k.lower(): v for k, v in response.getheaders()}

        with _Envoy(res, tmp):
            # AllowValidOnly: a valid client certificate is required
            status, headers = tls_get("strict.example.com", "client")
            assert status == 200 and headers["x-chain"] == "strict"
            for client in (None, "untrusted"):
                with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
                    tls_get("strict.example.com", client)
            # AllowInsecureFallback: no certificate or an untrusted one still get through
            for client in (None, "untrusted", "client"):
                status, headers = tls_get("fallback.example.com", client)
                assert status == 200 and headers["x-chain"] == "fallback"
            # TLS terminated, then plain TCP to the backend
            ctx = ssl.create_default_context(cafile=files["ca"])
            with (
                socket.create_connection((address, ports["tls"]), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname="raw.example.com") as raw_tls,
            ):
                assert b"x-from-backend: yes" in _raw_http(raw_tls, "raw")
            # an unknown SNI matches no filter chain
            with pytest.raises((ssl.SSLError, ConnectionError)):
                tls_get("nope.example.org", None)
            # plain TCP proxy (weight-0 backend ignored)
            with socket.create_connection((address, ports["tcp"]), timeout=5) as plain:
                assert b"x-from-backend: yes" in _raw_http(plain, "tcp")
            # TCP without backends: Envoy closes the connection
            # (an orderly close or a reset: either way, nothing gets through)
            with (
                socket.create_connection((address, ports["closed"]), timeout=5) as closed,
                contextlib.suppress(ConnectionResetError),
            ):
                assert closed.recv(1) == b""
            # UDP proxy
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.settimeout(1)
                reply = b""
                for _ in range(5):  # datagrams may race the listener's first poll
                    u.sendto(b"ping", (address, ports["udp"]))
                    try:
                        reply = u.recv(2048)
                        break
                    except TimeoutError:
                        continue
                assert reply == b"echo:ping"
