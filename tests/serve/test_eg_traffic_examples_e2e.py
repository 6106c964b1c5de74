"""Envoy Gateway's published BackendTrafficPolicy and ClientTrafficPolicy examples served
unchanged, live.

Each directory of tests/data/eg-examples used here holds the YAML of one section of one of
Envoy Gateway's traffic tasks (README.md there says which). It is served with Envoy Gateway's
Kubernetes quickstart, both as published, by a real ``gateweave serve`` with Envoy Gateway's
controller name in a network namespace the test makes; the quickstart's Deployment ``backend``
is played by the conformance echo backend (the stand-in of its image, echo-basic) on port 3000
of one loopback address per replica, with the EndpointSlice Kubernetes would make for its
Service (tests/support/eg_examples.py). Checked: every object is accepted, or, for an example
setting a field gateweave refuses, the policy is refused with that field's name; nothing is
reported as a configuration error; the requests of the task's page get the answers it shows
through the real Envoy.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateweave_conformance import encoding as codings
from tests.support.eg_examples import (
    HOST,
    KUBERNETES,
    Answer,
    Example,
    Key,
    answer,
    echo_pods,
    endpoint_slice,
    serving,
)
from tests.support.netns import Netns
from tests.support.netserve import until
from tests.support.sockopts import Keepalive, keepalive_of

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

RATELIMIT_HOST = "ratelimit.example"  # the rate limit task's HTTPRoute's hostname
LIMITED = [200, 200, 200, 429]  # the rate limit task's 4 requests under its limit of 3


@contextlib.contextmanager
def kube(
    ns: Netns,
    tmp_path: Path,
    *names: str,
    replicas: int = 1,
    refused: Mapping[Key, str] | None = None,
    ready: bool = True,
) -> Iterator[tuple[Example, list[str]]]:
    """The example directories ``names`` served with the Kubernetes quickstart, its Deployment
    at ``replicas`` pods; once the quickstart's route answers a plain GET (unless not
    ``ready``): the example and the pods' names."""
    with (
        echo_pods(ns, replicas) as pods,
        serving(
            ns,
            tmp_path,
            names,
            [endpoint_slice(pods)],
            quickstart=KUBERNETES,
            refused=refused,
        ) as example,
    ):
        if ready:
            until(answer(example, 200), 30, "the quickstart's route answers", example.serve)
        yield example, [pod.name for pod in pods]


def echoed(reply: Answer | None) -> dict[str, Any]:
    """The request as the echo backend saw it (its JSON answer)."""
    assert reply is not None and reply.status == 200, reply
    out: dict[str, Any] = json.loads(reply.body)
    return out


def header(seen: Mapping[str, Any], name: str) -> str:
    """The values of the request header ``name`` the echo backend saw, joined by commas."""
    return ",".join(seen["headers"].get(name, []))


def statuses(
    example: Example,
    n: int,
    path: str,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
    host: str = RATELIMIT_HOST,
) -> list[int]:
    """The statuses of ``n`` requests in a row (0: no answer)."""
    replies = [example.request(method, path, headers, host) for _ in range(n)]
    return [0 if reply is None else reply.status for reply in replies]


def stat(example: Example, name: str) -> int:
    """The sum of Envoy's counters ``name`` over its clusters."""
    text = example.serve.envoy_admin_get(f"/stats?filter={name}$")
    return sum(int(v) for v in re.findall(rf"^cluster\.\S+\.{name}: (\d+)$", text, re.M))


# ---------------------------------------------------------------- BackendTrafficPolicy


def test_retry_task(ns: Netns, tmp_path: Path) -> None:
    """``/status/500`` still answers 500, after Envoy retried it 5 times (the task's stat)."""
    with kube(ns, tmp_path, "retry") as (example, _):
        reply = example.request(path="/status/500", timeout=30)
        assert reply is not None and reply.status == 500
        assert stat(example, "upstream_rq_retry") == 5


def test_circuit_breaker_task(ns: Netns, tmp_path: Path) -> None:
    """The policy's thresholds on the route's cluster (``max_requests`` 10,
    ``max_pending_requests`` 0, the others Envoy Gateway's 1024), and requests to a slow backend
    (``?delay=``) failing fast with 503, overflowed.

    The page shows 10 of its 100 requests proxied: Envoy counts a request waiting for a new
    upstream connection as pending, so with no pending request allowed and no connection in the
    pool yet, every request overflows (so does Envoy Gateway's own end-to-end test with all
    thresholds 0). 30 requests at once in place of the page's 100, a delay of 3 s for its 10 s."""
    with kube(ns, tmp_path, "circuit-breaker", ready=False) as (example, _):
        until(answer(example, 503), 30, "the circuit breaker applied", example.serve)
        clusters = example.serve.envoy_admin_get("/config_dump?resource=dynamic_active_clusters")
        thresholds = [
            t
            for c in json.loads(clusters)["configs"]
            for t in c["cluster"].get("circuit_breakers", {}).get("thresholds", [])
        ]
        assert thresholds == [
            {
                "max_connections": 1024,
                "max_pending_requests": 0,
                "max_requests": 10,
                "max_retries": 1024,
            }
        ], thresholds
        got = example.concurrently(30, "/?delay=3s")
        assert all(
            r is not None and r.status == 503 and r.headers.get("x-envoy-overloaded") == "true"
            for r in got
        ), got
        assert stat(example, "upstream_rq_pending_overflow") >= 30


def test_local_rate_limit_specific_user_task(ns: Netns, tmp_path: Path) -> None:
    """``x-user-id: one``: the 4th request 429; ``x-user-id: two``: all 4 answered."""
    with kube(ns, tmp_path, "local-rate-limit-specific-user") as (example, _):
        one = {"x-user-id": "one"}
        assert statuses(example, 4, path="/get", headers=one) == LIMITED
        two = {"x-user-id": "two"}
        assert statuses(example, 4, path="/get", headers=two) == [200] * 4


def test_local_rate_limit_unless_test_org_task(ns: Netns, tmp_path: Path) -> None:
    """User one of org1: the 4th request 429; of the test org: all 4 answered."""
    with kube(ns, tmp_path, "local-rate-limit-unless-test-org") as (example, _):
        org1 = {"x-user-id": "one", "x-org-id": "org1"}
        assert statuses(example, 4, path="/get", headers=org1) == LIMITED
        test = {"x-user-id": "one", "x-org-id": "test"}
        assert statuses(example, 4, path="/get", headers=test) == [200] * 4


def test_local_rate_limit_all_requests_task(ns: Netns, tmp_path: Path) -> None:
    """Any request: the 4th 429 (the page's sample answer also shows ``x-envoy-ratelimited``,
    which Envoy Gateway v1.9 sets from its global rate limit filter only)."""
    with kube(ns, tmp_path, "local-rate-limit-all-requests") as (example, _):
        assert statuses(example, 4, path="/get") == LIMITED


def test_local_rate_limit_path_task(ns: Netns, tmp_path: Path) -> None:
    """``/api/users``: the 4th request 429; ``/api/products``: all 4 answered."""
    with kube(ns, tmp_path, "local-rate-limit-path") as (example, _):
        users = statuses(example, 4, path="/api/users")
        assert users == LIMITED
        assert statuses(example, 4, path="/api/products") == [200] * 4


def test_local_rate_limit_method_task(ns: Netns, tmp_path: Path) -> None:
    """POST: the 4th request 429; GET: all 4 answered."""
    with kube(ns, tmp_path, "local-rate-limit-method") as (example, _):
        posts = statuses(example, 4, method="POST", path="/api/data")
        assert posts == LIMITED
        gets = statuses(example, 4, method="GET", path="/api/data")
        assert gets == [200] * 4


def test_load_balancing_task(ns: Netns, tmp_path: Path) -> None:
    """With the Deployment at 4 pods: round robin, random and least request reach every pod;
    a consistent hash on the client address, or on the ``FooBar`` header, sends every request
    to one pod, and so does a consistent hash on the ``FooBar`` cookie, which Envoy sets, with
    the policy's TTL and ``SameSite`` attribute, for a client that has none. The endpoint override
    sends every request naming a pod's address in ``x-custom-host`` to that pod, and the others
    round robin."""
    examples = [
        f"load-balancing-{name}"
        for name in (
            "round-robin",
            "random",
            "least-request",
            "source-ip",
            "header",
            "cookie",
            "endpoint-override",
        )
    ]
    with kube(ns, tmp_path, *examples, replicas=4) as (example, pods):

        def pods_reached(path: str, n: int = 100, **headers: str) -> Counter[str]:
            return Counter(
                str(echoed(example.request(path=path, headers=headers))["pod"]) for _ in range(n)
            )

        for path in ("/round", "/random", "/least"):
            assert set(pods_reached(path)) == set(pods), path
        assert len(pods_reached("/source")) == 1
        assert len(pods_reached("/header", FooBar="1.2.3.4")) == 1
        assert len(pods_reached("/header", FooBar="5.6.7.8")) == 1
        assert len(pods_reached("/cookie", 10, Cookie="FooBar=1.2.3.4")) == 1
        reply = example.request(path="/cookie")
        assert reply is not None and reply.status == 200
        name, *attributes = reply.headers["set-cookie"].split("; ")
        assert name.startswith("FooBar=")
        assert {"Max-Age=60", "SameSite=Strict"} <= set(attributes), attributes
        # the pods are at 127.0.1.1, .2 ... in their order (tests/support/eg_examples.py)
        chosen = pods_reached(
            "/endpoint-override-header", 20, **{"x-custom-host": "127.0.1.3:3000"}
        )
        assert set(chosen) == {pods[2]}, chosen
        assert len(pods_reached("/endpoint-override-header", 40)) > 1


def test_response_compression_task(ns: Netns, tmp_path: Path) -> None:
    """``Accept-Encoding: br;q=1.0, gzip;q=0.8``: the answer in brotli; gzip alone: gzip."""
    with kube(ns, tmp_path, "response-compression") as (example, _):
        for accept, coding in (("br;q=1.0, gzip;q=0.8", "br"), ("gzip", "gzip"), ("zstd", "zstd")):
            reply = example.request(headers={"Accept-Encoding": accept})
            assert reply is not None and reply.status == 200
            assert reply.headers.get("content-encoding") == coding, (accept, reply.headers)
            seen = json.loads(codings.decode(coding, reply.body))
            assert seen["path"] == "/" and seen["host"] == HOST


def test_response_compression_deprecated_task(ns: Netns, tmp_path: Path) -> None:
    """The deprecated ``compression`` field: the same negotiation."""
    with kube(ns, tmp_path, "response-compression-deprecated") as (example, _):
        reply = example.request(headers={"Accept-Encoding": "br;q=1.0, gzip;q=0.8"})
        assert reply is not None and reply.headers.get("content-encoding") == "br"
        assert json.loads(codings.decode("br", reply.body))["path"] == "/"


def test_response_compression_min_content_length_task(ns: Netns, tmp_path: Path) -> None:
    """``minContentLength: 1024``: the echo of ``/`` (shorter) comes as it is, the echo of a
    path long enough to make it longer comes in gzip."""
    with kube(ns, tmp_path, "response-compression-min-content-length") as (example, _):
        reply = example.request(headers={"Accept-Encoding": "gzip"})
        assert reply is not None and reply.status == 200
        assert "content-encoding" not in reply.headers and len(reply.body) < 1024
        assert echoed(reply)["path"] == "/"
        path = "/" + "long/" * 220
        reply = example.request(path=path, headers={"Accept-Encoding": "gzip"})
        assert reply is not None and reply.status == 200
        assert reply.headers.get("content-encoding") == "gzip", reply.headers
        seen = codings.decode("gzip", reply.body)
        assert len(seen) >= 1024 and json.loads(seen)["path"] == path


def test_response_override_task(ns: Netns, tmp_path: Path) -> None:
    """The page's three requests: the backend's 404 answered with the inline text, its 403
    redirected inside Envoy to ``https://www.example.com/get`` (the same route), whose echo
    reaches the client as a 302, its 500 answered with the ConfigMap's JSON."""
    with kube(ns, tmp_path, "response-override") as (example, _):
        reply = example.request(path="/status/404")
        assert reply is not None
        assert (reply.status, reply.headers.get("content-type"), reply.body) == (
            404,
            "text/plain",
            b"Oops! Your request is not found.",
        )
        reply = example.request(path="/status/403")
        assert reply is not None and reply.status == 302, reply
        assert reply.headers.get("content-type") == "application/json"
        assert json.loads(reply.body)["path"] == "/get"
        reply = example.request(path="/status/500")
        assert reply is not None
        assert (reply.status, reply.headers.get("content-type"), reply.body) == (
            500,
            "application/json",
            b'{"error": "Internal Server Error"}',
        )


# ---------------------------------------------------------------- ClientTrafficPolicy


def raw_connection(example: Example) -> socket.socket:
    return socket.create_connection((example.address, example.port), timeout=5)


def request_bytes(path: str = "/get", extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n{extra}\r\n".encode()


def read_answer(sock: socket.socket) -> bytes:
    """An answer's bytes up to the end of its body (Content-Length), b"" when closed first."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return b""
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        while length and len(body) < int(length.group(1)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body
    except OSError:
        return b""


def served_connection(example: Example) -> socket.socket | None:
    """A new connection whose request was answered 200, kept open (None: not served)."""
    sock = raw_connection(example)
    with contextlib.suppress(OSError):
        sock.sendall(request_bytes())
    if read_answer(sock).startswith(b"HTTP/1.1 200"):
        return sock
    sock.close()
    return None


def test_connection_limit_task(ns: Netns, tmp_path: Path) -> None:
    """With 5 connections open, a 6th is closed without an answer; once one of the 5 closes,
    a new connection is served."""
    with kube(ns, tmp_path, "connection-limit") as (example, _):

        def limited() -> None:
            held: list[socket.socket] = []
            try:
                for i in range(5):  # (a connection closed just before may still count a moment)
                    held.append(until(lambda: served_connection(example), 10, f"connection {i}"))
                assert served_connection(example) is None, "a 6th connection served"
                held.pop().close()
                until(lambda: served_connection(example), 10, "served again below it").close()
            finally:
                for sock in held:
                    sock.close()

        example.serve.ns.call(limited)


def test_proxy_protocol_task(ns: Netns, tmp_path: Path) -> None:
    """``enableProxyProtocol``: a request without a PROXY header gets no answer; with one, 200,
    and the header's source address is the ``X-Forwarded-For`` the backend sees."""
    with kube(ns, tmp_path, "proxy-protocol", ready=False) as (example, _):

        def without() -> bytes:
            with raw_connection(example) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(request_bytes(extra="Connection: close\r\n"))
                return read_answer(sock)

        def proxied() -> bytes:
            with raw_connection(example) as sock:
                preface = f"PROXY TCP4 192.168.255.6 {example.address} 40000 {example.port}\r\n"
                sock.sendall(preface.encode() + request_bytes(extra="Connection: close\r\n"))
                return read_answer(sock)

        def served() -> bytes | None:
            got = example.serve.ns.call(proxied)
            return got if got.startswith(b"HTTP/1.1 200") else None

        reply = until(served, 30, "a request with a PROXY header served")
        body = reply.partition(b"\r\n\r\n")[2]
        assert header(json.loads(body), "X-Forwarded-For") == "192.168.255.6"
        assert example.serve.ns.call(without) == b""


def test_client_ip_detection_task(ns: Netns, tmp_path: Path) -> None:
    """``numTrustedHops: 2``: with ``X-Forwarded-For: 1.1.1.1,2.2.2.2`` the client address
    (``X-Envoy-External-Address``) is 1.1.1.1; ``X-Forwarded-Proto`` is kept."""
    with kube(ns, tmp_path, "client-ip-detection") as (example, _):
        seen = echoed(
            example.request(
                path="/get",
                headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "1.1.1.1,2.2.2.2"},
            )
        )
        assert header(seen, "X-Envoy-External-Address") == "1.1.1.1"
        assert header(seen, "X-Forwarded-Proto") == "https"
        assert header(seen, "X-Forwarded-For").startswith("1.1.1.1,2.2.2.2,")


def test_request_received_timeout_task(ns: Netns, tmp_path: Path) -> None:
    """A request announcing ``Content-Length: 10000`` and sending no body gets 408. (The echo
    stand-in answers without reading a body, where echo-basic, a Go server, waits for it before
    answering: the request asks it to wait 5 s, past the policy's 2 s.)"""
    with kube(ns, tmp_path, "request-received-timeout") as (example, _):

        def unfinished() -> bytes:
            with raw_connection(example) as sock:
                sock.settimeout(15)
                sock.sendall(request_bytes("/get?delay=5s", "Content-Length: 10000\r\n"))
                return read_answer(sock)

        head, _, body = example.serve.ns.call(unfinished).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), head
        assert body == b"request timeout"


def test_idle_timeout_task(ns: Netns, tmp_path: Path) -> None:
    """A connection left idle after its request is closed by Envoy (``idleTimeout: 5s``)."""
    with kube(ns, tmp_path, "idle-timeout") as (example, _):

        def closed_when_idle() -> bool:
            with raw_connection(example) as sock:
                sock.sendall(request_bytes())
                assert read_answer(sock).startswith(b"HTTP/1.1 200")
                sock.settimeout(20)
                try:
                    return sock.recv(1) == b""
                except TimeoutError:
                    return False

        assert example.serve.ns.call(closed_when_idle)


def test_buffer_limit_task(ns: Netns, tmp_path: Path) -> None:
    """``bufferLimit: 1024``: Envoy's listener has that per-connection buffer limit and
    serves."""
    with kube(ns, tmp_path, "buffer-limit") as (example, _):
        dump = example.serve.envoy_admin_get("/config_dump?resource=dynamic_listeners")
        assert re.search(r'"per_connection_buffer_limit_bytes": 1024\b', dump), dump[:2000]
        assert echoed(example.request(path="/get"))["path"] == "/get"


def test_early_request_headers_task(ns: Netns, tmp_path: Path) -> None:
    """The client's headers, changed early (the policy) then late (the route's filter): added
    to, set over, removed before the route adds its own, as the backend sees them."""
    with kube(ns, tmp_path, "early-request-headers") as (example, _):
        client = {f"early-{verb}-header": "client" for verb in ("added", "set", "removed")}
        seen = echoed(example.request(path="/get", host="headers.example", headers=client))
        assert header(seen, "Early-Added-Header") == "client,early,late"
        assert header(seen, "Early-Set-Header") == "early,late"
        assert header(seen, "Early-Removed-Header") == "late"


def test_tcp_keepalive_task(ns: Netns, tmp_path: Path) -> None:
    """``tcpKeepalive``: the page's two requests on one connection are answered, and that
    connection's socket in the Envoy keeps it alive as the policy says (probes 3, idle 20m,
    interval 60s)."""
    with kube(ns, tmp_path, "tcp-keepalive") as (example, _):
        pids = example.serve.envoys()

        def two_on_one_connection() -> tuple[list[bytes], list[Keepalive]]:
            with raw_connection(example) as sock:
                out = []
                for path in ("/get", "/headers"):
                    sock.sendall(request_bytes(path))
                    out.append(read_answer(sock))
                return out, keepalive_of(pids, sock.getsockname()[:2])

        answers, sockets = example.serve.ns.call(two_on_one_connection)
        for got in answers:
            assert got.startswith(b"HTTP/1.1 200"), got
        assert sockets == [Keepalive(on=True, probes=3, idle_s=1200, interval_s=60)]
