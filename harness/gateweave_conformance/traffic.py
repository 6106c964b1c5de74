"""Traffic steps of conformance cases (FORMAT.md): http, grpc, tls, tcp, udp, distribution.

Each step runs against a :class:`Env` (where a Gateway listens, TLS material, the mirror
backends' logs) and returns ``None`` when it holds, or the first unmet expectation. Steps
are eventually consistent: they are retried (every ~100 ms) until they hold or their
timeout passes, with upstream's rules (3 consecutive successes for http and grpc, one
completed wrong TCP exchange fails at once, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import ssl
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

import httpx

from gateweave_conformance import encoding

POLL = 0.1
REQUEST_TIMEOUT = 10.0
TRAFFIC_TIMEOUT = 30.0
CONSECUTIVE = 3
WELCOME = b"Gateway API Test TCP Server\n"
_HANDSHAKE = 22
_CERTIFICATE_REQUEST = 13


class StepFailed(Exception):
    """A definitive failure: the step fails at once, without retrying."""


class NotYet(Exception):
    """A transient failure: the step is retried until its timeout."""


@dataclass(frozen=True)
class Target:
    address: str
    port: int

    @property
    def hostport(self) -> str:
        return f"{self.address}:{self.port}"


class Env(Protocol):
    async def target(self, gateway: str, listener: str | None, default_port: int) -> Target:
        """Where the Gateway's listener is reached (raises NotYet while it has no address)."""
        ...

    def trusted_pem(self, ref: str) -> str:
        """A Secret's tls.crt or a ConfigMap's ca.crt (``namespace/name``)."""
        ...

    def client_cert(self, ref: str) -> tuple[str, str]:
        """(cert file, key file) of a kubernetes.io/tls Secret."""
        ...

    def mirror_logs(self, namespace: str, name: str) -> list[list[str]]:
        """The log lines of each pod labelled app=<name> in namespace."""
        ...


# ---------------------------------------------------------------- shared helpers


def backend_of(pod: str) -> str:
    """The Deployment of a pod: the name without its last two ``-`` parts."""
    parts = pod.split("-")
    return "-".join(parts[:-2]) if len(parts) > 2 else pod


_CONTEXTS: dict[tuple[str, str, str, tuple[str, ...]], ssl.SSLContext] = {}
# SSL objects (by id) whose server sent a CertificateRequest during the handshake.
_ASKED: set[int] = set()


def _msg_callback(
    conn: Any, direction: str, version: Any, content_type: Any, msg_type: Any, data: Any
) -> None:
    if direction == "read" and int(msg_type) == _CERTIFICATE_REQUEST:
        _ASKED.add(id(conn))


def client_context(
    trusted: str | None, client: tuple[str, str] | None = None, alpn: tuple[str, ...] = ()
) -> ssl.SSLContext:
    """A client TLS context trusting ``trusted`` (PEM; None: no verification)."""
    key = (trusted or "", client[0] if client else "", client[1] if client else "", alpn)
    ctx = _CONTEXTS.get(key)
    if ctx is not None:
        return ctx
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if trusted:
        ctx.load_verify_locations(cadata=trusted)
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        # The chain is verified by OpenSSL; the name as Go's crypto/x509 does (verify_host), which
        # accepts wildcards such as "*.org" that OpenSSL refuses.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if client:
        ctx.load_cert_chain(client[0], client[1])
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    with contextlib.suppress(AttributeError):
        ctx._msg_callback = _msg_callback  # type: ignore[attr-defined]
    _CONTEXTS[key] = ctx
    return ctx


def _go_match(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    p_labels, h_labels = pattern.split("."), host.split(".")
    if len(p_labels) != len(h_labels):
        return False
    return all(
        (i == 0 and p == "*") or p == h
        for i, (p, h) in enumerate(zip(p_labels, h_labels, strict=True))
    )


def verify_host(sslobj: Any, host: str) -> None:
    """Raise ssl.SSLCertVerificationError unless the verified peer certificate names ``host``."""
    if not host or sslobj is None:
        return
    cert = sslobj.getpeercert()
    if not cert:
        return  # not verified (no trusted root given)
    names = [v for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    if not any(_go_match(n, host) for n in names):
        raise ssl.SSLCertVerificationError(f"certificate is valid for {names}, not {host!r}")


async def eventually(
    attempt: Callable[[], Awaitable[None]],
    timeout: float,
    needed: int = 1,
    describe: Callable[[str], str] = lambda s: s,
) -> str | None:
    """Run ``attempt`` until it succeeds ``needed`` times in a row or ``timeout`` passes.

    ``NotYet`` (or any transport error) resets the count; ``StepFailed`` ends at once.
    """
    deadline = time.monotonic() + timeout
    streak = 0
    last = "no attempt completed"
    while True:
        try:
            await attempt()
            streak += 1
            if streak >= needed:
                return None
            continue
        except StepFailed as exc:
            return describe(str(exc))
        except NotYet as exc:
            last = str(exc)
        except (
            OSError,
            TimeoutError,
            ssl.SSLError,
            httpx.HTTPError,
            asyncio.IncompleteReadError,
        ) as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        streak = 0
        if time.monotonic() >= deadline:
            return describe(f"not met within {timeout:g}s; last: {last}")
        await asyncio.sleep(POLL)


def _timeout_of(spec: dict[str, Any]) -> float:
    return float(spec.get("timeout_s") or TRAFFIC_TIMEOUT)


# ---------------------------------------------------------------- HTTP


@dataclass
class HttpAnswer:
    status: int
    headers: httpx.Headers
    body: bytes
    echo: dict[str, Any] | None  # parsed only with Content-Type: application/json exactly
    asked_client_cert: bool = False


@dataclass
class HttpRequest:
    scheme: str
    target: Target
    path: str
    method: str = "GET"
    host: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    protocol: str = "HTTP/1.1"
    sni: str = ""
    trusted: str | None = None
    client: tuple[str, str] | None = None


def _header_items(headers: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, value in (headers or {}).items():
        if isinstance(value, list):
            out.extend((str(name), str(v)) for v in value)
        else:
            out.append((str(name), str(value)))
    return out


async def send_http(req: HttpRequest) -> HttpAnswer:
    """One request; transport errors propagate."""
    http2 = req.protocol in ("H2", "H2C_PRIOR_KNOWLEDGE")
    verify: ssl.SSLContext | bool = False
    if req.scheme == "https":
        verify = client_context(
            req.trusted, req.client, ("h2",) if req.protocol == "H2" else ("http/1.1",)
        )
    default_port = 443 if req.scheme == "https" else 80
    netloc = req.target.address if req.target.port == default_port else req.target.hostport
    url = httpx.URL(f"{req.scheme}://{netloc}").copy_with(raw_path=req.path.encode())
    headers = list(req.headers)
    if req.host:
        headers.insert(0, ("Host", req.host))
    extensions: dict[str, Any] = {
        "timeout": {
            "connect": REQUEST_TIMEOUT,
            "read": REQUEST_TIMEOUT,
            "write": REQUEST_TIMEOUT,
            "pool": REQUEST_TIMEOUT,
        }
    }
    if req.sni:
        extensions["sni_hostname"] = req.sni
    async with httpx.AsyncClient(
        verify=verify, http1=not http2, http2=http2, timeout=REQUEST_TIMEOUT, trust_env=False
    ) as client:
        request = client.build_request(req.method, url, headers=headers, content=req.body or None)
        request.extensions.update(extensions)
        # The raw bytes (httpx would decode only the codings whose packages it finds): decoded here.
        resp = await client.send(request, follow_redirects=False, stream=True)
        try:
            raw = b"".join([chunk async for chunk in resp.aiter_raw()])
        finally:
            await resp.aclose()
        try:
            body = encoding.decode(resp.headers.get("content-encoding"), raw)
        except encoding.EncodingError as exc:
            raise StepFailed(str(exc)) from exc
        asked = False
        stream = resp.extensions.get("network_stream")
        if stream is not None:
            sslobj = stream.get_extra_info("ssl_object")
            if sslobj is not None:
                asked = id(sslobj) in _ASKED
                _ASKED.discard(id(sslobj))
                verify_host(sslobj, req.sni)
    echo = None
    if resp.headers.get("content-type") == "application/json" and body:
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
            if isinstance(parsed, dict):
                echo = parsed
    return HttpAnswer(resp.status_code, resp.headers, body, echo, asked)


def _is_timeout(status: int) -> bool:
    return status in (408, 504)


def _echo_headers(echo: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, values in (echo.get("headers") or {}).items():
        vals = values if isinstance(values, list) else [values]
        out.setdefault(name.lower(), []).extend(str(v) for v in vals)
    return out


def _default_port(scheme: str) -> str:
    return {"http": "80", "https": "443"}.get(scheme, "")


def compare_http(spec: dict[str, Any], sent: HttpRequest, answer: HttpAnswer) -> str | None:
    """Upstream CompareRoundTrip: None when ``answer`` meets ``spec``, else what did not."""
    response = spec.get("response") or {}
    statuses = [int(s) for s in response.get("statuses") or []]
    if "status" in response:
        statuses.append(int(response["status"]))
    if not statuses:
        statuses = [200]
    if not any(
        s == answer.status or (_is_timeout(s) and _is_timeout(answer.status)) for s in statuses
    ):
        want = statuses[0] if len(statuses) == 1 else statuses
        return f"expected status {want}, got {answer.status}"
    request = spec.get("request") or {}
    if answer.status in (200, 204):
        problem = _compare_backend_request(spec, request, sent, answer)
        if problem:
            return problem
    elif 300 <= answer.status < 400 and spec.get("redirect"):
        problem = _compare_redirect(spec["redirect"], sent, answer)
        if problem:
            return problem
    for name, value in (response.get("headers") or {}).items():
        actual = answer.headers.get_list(name)
        if not actual:
            return (
                f"expected response header {name} to be set, it is not (headers: "
                f"{dict(answer.headers)})"
            )
        if ",".join(actual) != str(value):
            return f"expected response header {name}: {value!r}, got {','.join(actual)!r}"
    for name, allowed in (response.get("valid_header_values") or {}).items():
        actual_v = ",".join(answer.headers.get_list(name))
        if actual_v not in [str(a) for a in allowed]:
            return f"expected response header {name} to be one of {allowed}, got {actual_v!r}"
    for name in response.get("absent_headers") or []:
        if name in answer.headers:
            return f"expected response header {name} to be absent, got {answer.headers.get(name)!r}"
    if "body" in response and answer.body != str(response["body"]).encode():
        return f"expected the answer's body {response['body']!r}, got {answer.body[:200]!r}"
    return None


def _compare_backend_request(
    spec: dict[str, Any], request: dict[str, Any], sent: HttpRequest, answer: HttpAnswer
) -> str | None:
    expected = spec.get("expected_request")
    if expected is None:
        expected = {
            "host": request.get("host", ""),
            "method": request.get("method", "GET"),
            "path": sent.path,
            "headers": request.get("headers") or {},
        }
    elif (
        "path" in expected
        and sent.path != request.get("path")
        and "gateway-api-conformance-request-id" in sent.path
    ):
        expected = {**expected, "path": _with_request_id(str(expected["path"]), sent.path)}
    echo = answer.echo
    if echo is None:
        # Not an echo (e.g. answered by the gateway itself): upstream assumes the request was made
        # as sent and captures only its method; path, host, namespace and pod are empty.
        echo = {"method": sent.method, "path": "", "host": "", "namespace": "", "pod": ""}
    if expected.get("host") and expected["host"] != echo.get("host"):
        return f"expected the backend to see host {expected['host']!r}, got {echo.get('host')!r}"
    if str(expected.get("path", "")) != echo.get("path"):
        return (
            f"expected the backend to see path {expected.get('path')!r}, got {echo.get('path')!r}"
        )
    method = expected.get("method") or "GET"
    if method != echo.get("method"):
        return f"expected the backend to see method {method}, got {echo.get('method')}"
    if "namespace" in spec and str(spec.get("namespace") or "") != echo.get("namespace"):
        return f"expected namespace {spec.get('namespace')!r}, got {echo.get('namespace')!r}"
    seen = _echo_headers(echo)
    for name, value in (expected.get("headers") or {}).items():
        actual = seen.get(str(name).lower())
        if actual is None:
            return (
                f"expected request header {name} to reach the backend, it did not (headers: "
                f"{sorted(seen)})"
            )
        if ",".join(actual) != str(value):
            return (
                f"expected request header {name}: {value!r} at the backend, got "
                f"{','.join(actual)!r}"
            )
    for name in expected.get("absent_headers") or []:
        if str(name).lower() in seen:
            return (
                f"expected request header {name} to be absent at the backend, got "
                f"{seen[str(name).lower()]}"
            )
    backend = spec.get("backend")
    pod = str(echo.get("pod") or "")
    if backend and not pod.startswith(str(backend)):
        return f"expected pod name to start with {backend}, got {pod!r}"
    tls = echo.get("tls") or {}
    if expected.get("sni") and tls.get("serverName") != expected["sni"]:
        return f"expected the backend to see SNI {expected['sni']!r}, got {tls.get('serverName')!r}"
    if expected.get("client_cert") and not tls.get("peerCertificates"):
        return "expected the backend to receive a client certificate, it did not"
    return None


def _compare_redirect(want: dict[str, Any], sent: HttpRequest, answer: HttpAnswer) -> str | None:
    location = answer.headers.get("location")
    if not location:
        return f"expected a redirect with a Location header, got status {answer.status} without one"
    url = httpx.URL(location)
    scheme = url.scheme or sent.scheme
    host = url.host if url.is_absolute_url else (sent.host or sent.target.address)
    port = str(url.port) if url.port is not None else ""
    path = url.raw_path.decode().split("?", 1)[0] if url.raw_path else ""
    if "scheme" in want and str(want["scheme"]) != scheme:
        return (
            f"expected redirect scheme {want['scheme']!r}, got {scheme!r} (Location {location!r})"
        )
    if want.get("host") and str(want["host"]) != host:
        return f"expected redirect host {want['host']!r}, got {host!r} (Location {location!r})"
    if want.get("port") not in (None, ""):
        if str(want["port"]) != port:
            return f"expected redirect port {want['port']!r}, got {port!r} (Location {location!r})"
    elif port not in ("", _default_port(scheme)):
        return (
            f"expected no redirect port (or the scheme's default), got {port!r} (Location "
            f"{location!r})"
        )
    if "path" in want and str(want["path"]) != path:
        return f"expected redirect path {want['path']!r}, got {path!r} (Location {location!r})"
    return None


def _with_request_id(path: str, reference: str) -> str:
    """``path`` with the request-id query parameter of ``reference`` added (keys sorted)."""
    rid = dict(parse_qsl(reference.split("?", 1)[1])).get("gateway-api-conformance-request-id", "")
    return add_query(path, "gateway-api-conformance-request-id", rid)


def add_query(path: str, key: str, value: str) -> str:
    base, _, query = path.partition("?")
    items = [*parse_qsl(query, keep_blank_values=True), (key, value)]
    return f"{base}?{urlencode(sorted(items))}"


class Http:
    """Builds the requests of an ``http`` step body (also used by distributions)."""

    def __init__(self, env: Env, spec: dict[str, Any]) -> None:
        self.env = env
        self.spec = spec
        self.request = spec.get("request") or {}
        self.scheme = str(spec.get("scheme") or "http")

    async def build(self, path: str | None = None, entropy: bool = False) -> HttpRequest:
        spec, request = self.spec, self.request
        target = await self.env.target(
            str(spec["gateway"]), spec.get("listener"), 443 if self.scheme == "https" else 80
        )
        headers = _header_items(request.get("headers"))
        set_headers = spec.get("backend_set_response_headers") or {}
        headers.append(("X-Echo-Set-Header", ",".join(f"{k}:{v}" for k, v in set_headers.items())))
        if entropy and random.random() < 0.5:
            headers.append(("X-Jitter", str(random.randint(0, 9999))))
        req = HttpRequest(
            scheme=self.scheme,
            target=target,
            path=path if path is not None else str(request.get("path") or "/"),
            method=str(request.get("method") or "GET"),
            host=str(request.get("host") or ""),
            headers=headers,
            body=str(request.get("body") or "").encode(),
            protocol=str(request.get("protocol") or "HTTP/1.1"),
            sni=str(request.get("sni") or ""),
        )
        if self.scheme == "https":
            if not spec.get("server_certificate") or not req.sni:
                raise StepFailed("scheme https needs server_certificate and request.sni")
            req.trusted = self.env.trusted_pem(str(spec["server_certificate"]))
        if request.get("client_cert"):
            req.client = self.env.client_cert(str(request["client_cert"]))
        return req


# In an http step's request.path: a new random UUID on every try (upstream's retry tests send a
# fresh uuid query parameter per probe, so the echo's retry simulation starts afresh each time).
FRESH_UUID = "{UUID}"


def fresh_path(path: str) -> str:
    """``path`` with each :data:`FRESH_UUID` replaced by a new random UUID (version 4)."""
    return path.replace(FRESH_UUID, str(uuid.uuid4())) if FRESH_UUID in path else path


async def http_step(env: Env, spec: dict[str, Any]) -> str | None:
    timeout = _timeout_of(spec)
    maker = Http(env, spec)
    path = str((spec.get("request") or {}).get("path") or "/")
    mirrors = spec.get("mirrored_to") or []
    if mirrors:
        path = add_query(path, "gateway-api-conformance-request-id", str(uuid.uuid4()))
    started = {
        (m["namespace"], m["name"]): [
            len(lines) for lines in env.mirror_logs(m["namespace"], m["name"])
        ]
        for m in mirrors
    }

    if spec.get("expect_failure"):

        async def failing() -> None:
            req = await maker.build(fresh_path(path))
            try:
                answer = await send_http(req)
            except (OSError, httpx.HTTPError, ssl.SSLError) as exc:
                raise NotYet(f"connection error: {type(exc).__name__}: {exc}") from None
            if answer.status == 200:
                raise StepFailed("expected the request to fail, got status 200")
            if _is_timeout(answer.status):
                raise NotYet(f"status {answer.status} (timeout) does not count as a failure")

        return await eventually(failing, timeout, CONSECUTIVE)

    async def once() -> None:
        req = await maker.build(fresh_path(path))
        answer = await send_http(req)
        problem = compare_http(spec, req, answer)
        if problem is None and req.client is not None and not answer.asked_client_cert:
            problem = "the server did not ask for a client certificate during the handshake"
        if problem:
            raise NotYet(problem)

    problem = await eventually(once, timeout, CONSECUTIVE)
    if problem or not mirrors:
        return problem
    return await _check_mirrors(env, mirrors, path, started)


async def _check_mirrors(
    env: Env, mirrors: list[dict[str, Any]], path: str, started: dict[tuple[str, str], list[int]]
) -> str | None:
    needle = f"Echoing back request made to {path} to client"
    for m in mirrors:
        key = (m["namespace"], m["name"])
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while True:
            logs = env.mirror_logs(*key)
            offsets = started.get(key, [])
            found = any(
                needle in line
                for i, lines in enumerate(logs)
                for line in lines[(offsets[i] if i < len(offsets) else 0) :]
            )
            if found:
                break
            if time.monotonic() >= deadline:
                return (
                    f"mirror backend {key[0]}/{key[1]} did not log the mirrored request {path!r} "
                    f"within {REQUEST_TIMEOUT:g}s"
                )
            await asyncio.sleep(POLL)
    return None


# ---------------------------------------------------------------- gRPC


_GRPC_SERVICE = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/"


async def grpc_call(target: Target, request: dict[str, Any]) -> tuple[Any, Any]:
    """One unary call; returns (status code, EchoResponse | None)."""
    import grpc

    from gateweave_conformance import grpcecho_pb2 as pb

    options: list[tuple[str, Any]] = [("grpc.enable_retries", 0)]
    if request.get("authority"):
        options.append(("grpc.default_authority", str(request["authority"])))
    method = str(request.get("method") or "Echo")
    metadata = tuple((str(k).lower(), str(v)) for k, v in (request.get("metadata") or {}).items())
    async with grpc.aio.insecure_channel(target.hostport, options=options) as channel:
        call = channel.unary_unary(
            _GRPC_SERVICE + method,
            request_serializer=pb.EchoRequest.SerializeToString,
            response_deserializer=pb.EchoResponse.FromString,
        )
        try:
            response = await call(pb.EchoRequest(), metadata=metadata, timeout=REQUEST_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), None
        return grpc.StatusCode.OK, response


def _grpc_code(name: str) -> Any:
    import grpc

    wanted = re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() if not name.isupper() else name
    try:
        return grpc.StatusCode[wanted]
    except KeyError:
        raise StepFailed(f"unknown gRPC code {name!r}") from None


def compare_grpc(spec: dict[str, Any], code: Any, response: Any) -> str | None:
    import grpc

    want = _grpc_code(str((spec.get("response") or {}).get("code") or "OK"))
    if code != want:
        return f"expected gRPC code {want.name}, got {code.name}"
    if code != grpc.StatusCode.OK or response is None:
        return None
    assertions = response.assertions
    method = str((spec.get("request") or {}).get("method") or "Echo")
    if assertions.fully_qualified_method != _GRPC_SERVICE + method:
        return (
            f"expected method {_GRPC_SERVICE + method}, the backend saw "
            f"{assertions.fully_qualified_method!r}"
        )
    pod = assertions.context.pod
    if spec.get("backend") and not pod.startswith(str(spec["backend"])):
        return f"expected pod name to start with {spec['backend']}, got {pod!r}"
    if (
        "namespace" in spec
        and spec["namespace"] is not None
        and assertions.context.namespace != spec["namespace"]
    ):
        return f"expected namespace {spec['namespace']!r}, got {assertions.context.namespace!r}"
    return None


async def grpc_step(env: Env, spec: dict[str, Any]) -> str | None:
    import grpc

    request = spec.get("request") or {}

    if spec.get("expect_failure"):

        async def failing() -> None:
            target = await env.target(str(spec["gateway"]), spec.get("listener"), 80)
            code, _ = await grpc_call(target, request)
            if code == grpc.StatusCode.OK:
                raise StepFailed("expected the call to fail, got OK")

        return await eventually(failing, _timeout_of(spec), CONSECUTIVE)

    async def once() -> None:
        target = await env.target(str(spec["gateway"]), spec.get("listener"), 80)
        code, response = await grpc_call(target, request)
        problem = compare_grpc(spec, code, response)
        if problem:
            raise NotYet(problem)

    return await eventually(once, _timeout_of(spec), CONSECUTIVE)


# ---------------------------------------------------------------- TCP and TLS streams


async def _open(
    target: Target, tls: ssl.SSLContext | None = None, sni: str = ""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(
        asyncio.open_connection(
            target.address, target.port, ssl=tls, server_hostname=(sni or None) if tls else None
        ),
        REQUEST_TIMEOUT,
    )


async def _line(reader: asyncio.StreamReader) -> bytes:
    line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)
    if not line.endswith(b"\n"):
        raise NotYet(f"connection closed while reading a line (got {line!r})")
    return line


async def echo_exchange(
    target: Target,
    send: str,
    *,
    tls: ssl.SSLContext | None = None,
    sni: str = "",
    is_tls: bool = False,
    full: bool = True,
) -> dict[str, Any]:
    """The echo TCP protocol (ECHO.md 3/5). Connect, read and JSON errors raise NotYet;
    a completed wrong exchange raises StepFailed."""
    try:
        reader, writer = await _open(target, tls, sni)
        if tls is not None:
            try:
                verify_host(writer.get_extra_info("ssl_object"), sni)
            except ssl.SSLError:
                writer.close()
                raise
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        raise NotYet(f"connect {target.hostport}: {type(exc).__name__}: {exc}") from None
    try:
        try:
            welcome = await _line(reader)
            if welcome != WELCOME:
                raise StepFailed(f"expected welcome line {WELCOME!r}, got {welcome!r}")
            if full:
                writer.write(b"PING\n")
                await writer.drain()
                pong = await _line(reader)
                if pong != b"PONG\n":
                    raise StepFailed(f"expected PONG, got {pong!r}")
                writer.write(b"IS_TLS\n")
                await writer.drain()
                answer = await _line(reader)
                want = b"true\n" if is_tls else b"false\n"
                if answer != want:
                    raise StepFailed(
                        f"expected IS_TLS {want.strip().decode()}, got {answer.strip().decode()!r}"
                    )
            writer.write(send.encode())
            await writer.drain()
            reply = await _line(reader)
        except (OSError, TimeoutError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
            raise NotYet(f"read from {target.hostport}: {type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(reply)
        except ValueError:
            raise NotYet(f"reply is not JSON: {reply[:200]!r}") from None
        if not isinstance(data, dict):
            raise NotYet(f"reply is not a JSON object: {reply[:200]!r}")
        return data
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 1)


def _check_identity(data: dict[str, Any], backend: str | None, namespace: Any) -> None:
    pod = str(data.get("pod") or "")
    if backend and not pod.startswith(f"{backend}-"):
        raise StepFailed(f"expected pod name to start with {backend}-, got {pod!r}")
    if namespace is not None and data.get("namespace") != namespace:
        raise StepFailed(f"expected namespace {namespace!r}, got {data.get('namespace')!r}")


async def tcp_step(env: Env, spec: dict[str, Any]) -> str | None:
    send = spec.get("send")
    backend = spec.get("expect_backend")

    async def once() -> None:
        target = await env.target(str(spec["gateway"]), spec.get("listener"), 80)
        if send is None:
            _, writer = await _open(target)
            writer.close()
            return
        if backend:
            data = await echo_exchange(target, str(send), is_tls=False)
            _check_identity(data, str(backend), spec.get("namespace", ""))
            return
        data = await echo_exchange(target, str(send), full=False)
        if not data.get("pod"):
            raise NotYet(f"reply names no pod: {data}")

    return await eventually(once, _timeout_of(spec))


def _is_rejection(exc: BaseException) -> bool:
    if isinstance(
        exc,
        (
            ConnectionResetError,
            ssl.SSLEOFError,
            ssl.SSLZeroReturnError,
            asyncio.IncompleteReadError,
            EOFError,
        ),
    ):
        return True
    text = str(exc).lower()
    return "eof" in text or "reset" in text or "connection lost" in text


async def tls_step(env: Env, spec: dict[str, Any]) -> str | None:
    sni = str(spec.get("sni") or "")
    trusted = (
        env.trusted_pem(str(spec["server_certificate"])) if spec.get("server_certificate") else None
    )
    timeout = _timeout_of(spec)

    if spec.get("send") is not None:

        async def exchange() -> None:
            target = await env.target(str(spec["gateway"]), spec.get("listener"), 443)
            data = await echo_exchange(
                target,
                str(spec["send"]),
                tls=client_context(trusted),
                sni=sni,
                is_tls=bool(spec.get("expect_is_tls", False)),
            )
            _check_identity(data, spec.get("backend"), spec.get("namespace", ""))
            if spec.get("backend_sni") is not None:
                seen = (data.get("tls") or {}).get("serverName")
                if seen != spec["backend_sni"]:
                    raise StepFailed(
                        f"expected the backend to see SNI {spec['backend_sni']!r}, got {seen!r}"
                    )

        return await eventually(exchange, timeout)

    if spec.get("request") is not None:
        request = spec["request"]
        if not spec.get("expect_failure"):
            return await http_step(
                env, {**spec, "scheme": "https", "request": {**request, "sni": sni}}
            )

        async def refused() -> None:
            body = {**spec, "scheme": "https", "request": {**request, "sni": sni}}
            req = await Http(env, body).build()
            try:
                answer = await send_http(req)
            except (OSError, httpx.HTTPError, ssl.SSLError) as exc:
                del exc
                return  # a transport or TLS error is what this step wants
            raise NotYet(f"expected a transport or TLS error, got an HTTP answer {answer.status}")

        return await eventually(refused, timeout, CONSECUTIVE)

    if not spec.get("expect_failure"):
        raise StepFailed("a tls step needs request, send or expect_failure")

    async def rejected() -> None:
        target = await env.target(str(spec["gateway"]), spec.get("listener"), 443)
        try:
            _reader, writer = await _open(target, client_context(trusted), sni)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, EOFError) as exc:
            if _is_rejection(exc):
                return
            raise NotYet(f"handshake failed otherwise: {type(exc).__name__}: {exc}") from None
        writer.close()
        raise NotYet("the TLS handshake succeeded")

    return await eventually(rejected, timeout)


# ---------------------------------------------------------------- UDP


class _Reply(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if not self.reply.done():
            self.reply.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.reply.done():
            self.reply.set_exception(exc)


async def udp_exchange(target: Target, payload: bytes, wait: float = 1.0) -> bytes:
    loop = asyncio.get_running_loop()
    proto = _Reply()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: proto, remote_addr=(target.address, target.port)
    )
    try:
        transport.sendto(payload)
        try:
            return await asyncio.wait_for(proto.reply, wait)
        except TimeoutError:
            raise NotYet(f"no UDP reply from {target.hostport} within {wait:g}s") from None
    finally:
        transport.close()


def _payload(send: Any) -> bytes:
    return str(send).encode("latin-1", errors="replace")


async def udp_step(env: Env, spec: dict[str, Any]) -> str | None:
    async def once() -> None:
        target = await env.target(str(spec["gateway"]), spec.get("listener"), 0)
        reply = await udp_exchange(target, _payload(spec.get("send", "")))
        if not spec.get("expect_backend") and spec.get("namespace") is None:
            return
        try:
            data = json.loads(reply)
        except ValueError:
            raise NotYet(f"reply is not JSON: {reply[:200]!r}") from None
        if spec.get("expect_backend") and data.get("service") != spec["expect_backend"]:
            raise NotYet(
                f"expected service {spec['expect_backend']!r}, got {data.get('service')!r}"
            )
        if spec.get("namespace") is not None and data.get("namespace") != spec["namespace"]:
            raise NotYet(f"expected namespace {spec['namespace']!r}, got {data.get('namespace')!r}")

    return await eventually(once, _timeout_of(spec))


# ---------------------------------------------------------------- distributions


async def _sample_http(env: Env, body: dict[str, Any]) -> str:
    maker = Http(env, body)
    req = await maker.build(entropy=True)
    answer = await send_http(req)
    problem = compare_http(body, req, answer)
    if problem:
        raise NotYet(problem)
    assert answer.echo is not None
    return str(answer.echo.get("pod") or "")


async def _sample_grpc(env: Env, body: dict[str, Any]) -> str:
    target = await env.target(str(body["gateway"]), body.get("listener"), 80)
    code, response = await grpc_call(target, body.get("request") or {})
    problem = compare_grpc(body, code, response)
    if problem:
        raise NotYet(problem)
    return str(response.assertions.context.pod) if response is not None else ""


async def _sample_tcp(env: Env, body: dict[str, Any]) -> str:
    target = await env.target(str(body["gateway"]), body.get("listener"), 0)
    data = await echo_exchange(target, str(body.get("send") or "TEST\n"), full=False)
    return str(data.get("pod") or "")


async def _sample_udp(env: Env, body: dict[str, Any]) -> str:
    target = await env.target(str(body["gateway"]), body.get("listener"), 0)
    reply = await udp_exchange(target, _payload(body.get("send", "")), wait=2.0)
    try:
        data = json.loads(reply)
    except ValueError:
        raise NotYet(f"reply is not JSON: {reply[:200]!r}") from None
    return str(data.get("pod") or "")


_SAMPLERS: dict[str, Callable[[Env, dict[str, Any]], Awaitable[str]]] = {
    "http": _sample_http,
    "grpc": _sample_grpc,
    "tcp": _sample_tcp,
    "udp": _sample_udp,
}


async def distribution_step(env: Env, spec: dict[str, Any]) -> str | None:
    kinds = [k for k in _SAMPLERS if k in spec]
    if len(kinds) != 1:
        raise StepFailed("a distribution names exactly one of http, grpc, tcp, udp")
    kind = kinds[0]
    body = spec[kind]
    sampler = _SAMPLERS[kind]
    weights = {str(k): float(v) for k, v in (spec.get("weights") or {}).items()}
    total = int(spec.get("requests") or 500)
    raw_tolerance = spec.get("tolerance")
    tolerance = 0.05 if raw_tolerance is None else float(raw_tolerance)
    last = ""
    for attempt in range(10):
        if attempt:
            await asyncio.sleep(0.5)
        problem = await _one_sample(env, sampler, body, weights, total, tolerance)
        if problem is None:
            return None
        last = problem
    return f"weights not met after 10 samples; last: {last}"


async def _one_sample(
    env: Env,
    sampler: Callable[[Env, dict[str, Any]], Awaitable[str]],
    body: dict[str, Any],
    weights: dict[str, float],
    total: int,
    tolerance: float,
) -> str | None:
    gate = asyncio.Semaphore(10)
    counts: Counter[str] = Counter()
    errors: list[str] = []

    async def one() -> None:
        async with gate:
            if errors:
                return
            try:
                pod = await sampler(env, body)
            except (NotYet, StepFailed) as exc:
                errors.append(str(exc))
                return
            except (OSError, TimeoutError, ssl.SSLError, httpx.HTTPError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            backend = backend_of(pod)
            if backend not in weights:
                errors.append(
                    f"answer from pod {pod!r}, not one of the weighted backends {sorted(weights)}"
                )
                return
            counts[backend] += 1

    await asyncio.gather(*(one() for _ in range(total)))
    if errors:
        return f"request failed: {errors[0]}"
    for backend, weight in sorted(weights.items()):
        got = counts.get(backend, 0)
        if weight == 0 and got:
            return f"backend {backend} has weight 0 but received {got} of {total} requests"
        if weight > 0 and not got:
            return (
                f"backend {backend} has weight {weight:g} but received no request (counts "
                f"{dict(counts)})"
            )
    for backend, weight in sorted(weights.items()):
        got = counts.get(backend, 0)
        share = got / total
        if abs(share - weight) > tolerance + 1e-9:
            return (
                f"backend {backend}: share {share:.3f} ({got}/{total}), expected {weight:g} +/- "
                f"{tolerance:g} (counts {dict(counts)})"
            )
    return None


STEPS: dict[str, Callable[[Env, dict[str, Any]], Awaitable[str | None]]] = {
    "http": http_step,
    "grpc": grpc_step,
    "tls": tls_step,
    "tcp": tcp_step,
    "udp": udp_step,
    "distribution": distribution_step,
}


async def run_traffic(kind: str, env: Env, spec: dict[str, Any]) -> str | None:
    return await run_step(STEPS[kind], env, spec)


async def run_step(
    step: Callable[[Env, dict[str, Any]], Awaitable[str | None]], env: Env, spec: dict[str, Any]
) -> str | None:
    """Run one traffic step: None when it holds, else the first unmet expectation."""
    try:
        return await step(env, spec)
    except StepFailed as exc:
        return str(exc)
