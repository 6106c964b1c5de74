"""Traffic steps about what the client does (FORMAT.md, gateweave's additions), for the policies
Envoy Gateway's end-to-end tests exercise:

- ``http_repeat``: an ``http`` request made ``times`` times in a row, each answer meeting the
  step (a rate limit's N requests of a window, then "the N+1th gets 429");
- ``connections``: ``hold`` connections kept open, each proven served, and the next one closed
  by the gateway without an answer (a connection limit); once they are closed, a new one is
  served again;
- ``partial_request``: an HTTP/1.1 request whose body never comes whole (a declared
  ``Content-Length`` beyond the bytes sent), answered by the gateway (a request timeout).

The bodies are typed in :mod:`gateweave_conformance.cases` (parsed strictly when the case loads).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec

from gateweave_conformance.cases import ConnectionsStep, HttpRepeatStep, PartialRequestStep
from gateweave_conformance.traffic import (
    CONSECUTIVE,
    REQUEST_TIMEOUT,
    TRAFFIC_TIMEOUT,
    Env,
    Http,
    NotYet,
    Target,
    compare_http,
    eventually,
    fresh_path,
    send_http,
)

# Transport errors: the request was not answered (the connection was refused, reset or closed).
_TRANSPORT = (OSError, TimeoutError, ssl.SSLError, httpx.TransportError)


# ---------------------------------------------------------------- http_repeat


async def http_repeat_step(env: Env, raw: dict[str, Any]) -> str | None:
    """``times`` requests, one after the other: each answer must meet the step, the first that
    does not fails it at once (upstream GotExactExpectedResponse). A transport error is not an
    answer: the request is made again, not counted, until the step's timeout."""
    spec = msgspec.convert(raw, HttpRepeatStep)
    body = {k: v for k, v in raw.items() if k != "times"}
    maker = Http(env, body)
    path = str(spec.request.get("path") or "/")
    deadline = asyncio.get_running_loop().time() + (spec.timeout_s or TRAFFIC_TIMEOUT)
    for n in range(1, spec.times + 1):
        while True:
            try:
                req = await maker.build(fresh_path(path))
                answer = await send_http(req)
                break
            except (NotYet, *_TRANSPORT) as exc:
                if asyncio.get_running_loop().time() >= deadline:
                    return f"request {n} of {spec.times}: not answered: {type(exc).__name__}: {exc}"
                await asyncio.sleep(0.1)
        problem = compare_http(body, req, answer)
        if problem:
            return f"request {n} of {spec.times}: {problem}"
    return None


# ---------------------------------------------------------------- connections


class _Closed(NotYet):
    """The gateway closed (or refused, or reset) the connection without answering."""


async def _served(client: httpx.AsyncClient, url: str, host: str) -> None:
    """One request on ``client``'s connection, answered with any status; otherwise NotYet
    (_Closed when the connection ended without an answer, not when the answer was slow)."""
    headers = {"Host": host} if host else {}
    try:
        resp = await client.get(url, headers=headers)
        await resp.aread()
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise NotYet(f"a connection was not answered in time: {type(exc).__name__}") from None
    except _TRANSPORT as exc:
        raise _Closed(f"a connection was not served: {type(exc).__name__}: {exc}") from None


def _one_connection_client() -> httpx.AsyncClient:
    """A client keeping its single connection open between requests."""
    return httpx.AsyncClient(
        timeout=REQUEST_TIMEOUT,
        trust_env=False,
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=None),
    )


async def connections_step(env: Env, raw: dict[str, Any]) -> str | None:
    spec = msgspec.convert(raw, ConnectionsStep)
    timeout = spec.timeout_s or TRAFFIC_TIMEOUT

    async def limited() -> None:
        target = await env.target(spec.gateway, spec.listener, 80)
        url = _url(target, spec.path)
        held = [_one_connection_client() for _ in range(spec.hold)]
        try:
            for client in held:  # one at a time: the gateway counts them in this order
                await _served(client, url, spec.host)
            async with _one_connection_client() as extra:
                try:
                    await _served(extra, url, spec.host)
                except _Closed:
                    return  # closed without an answer: the limit holds
                raise NotYet(f"connection {spec.hold + 1} was served while {spec.hold} were open")
        finally:
            for client in held:
                await client.aclose()

    problem = await eventually(limited, timeout, 1)
    if problem:
        return f"connections: {problem}"

    async def served_again() -> None:
        target = await env.target(spec.gateway, spec.listener, 80)
        async with _one_connection_client() as client:
            await _served(client, _url(target, spec.path), spec.host)

    problem = await eventually(served_again, timeout, 1)
    return f"connections, once the held ones are closed: {problem}" if problem else None


def _url(target: Target, path: str) -> str:
    return f"http://{target.hostport}{path}"


# ---------------------------------------------------------------- partial_request


async def read_status(reader: asyncio.StreamReader, wait: float) -> int:
    """The status of the HTTP/1.x answer ``reader`` receives within ``wait`` seconds."""
    try:
        line = await asyncio.wait_for(reader.readline(), wait)
    except TimeoutError:
        raise NotYet(f"no answer within {wait:g}s") from None
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise NotYet(f"not an HTTP/1.x status line: {line!r}")
    return int(parts[1])


def partial_request_bytes(spec: PartialRequestStep, host: str) -> bytes:
    """The request as sent: its head declares ``content_length``, then fewer body bytes."""
    lines = [f"{spec.method} {spec.path} HTTP/1.1", f"Host: {spec.host or host}"]
    lines += [f"{name}: {value}" for name, value in spec.headers.items()]
    lines.append(f"Content-Length: {spec.content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + spec.body.encode()


async def partial_request_step(env: Env, raw: dict[str, Any]) -> str | None:
    spec = msgspec.convert(raw, PartialRequestStep)

    async def once() -> None:
        target = await env.target(spec.gateway, spec.listener, 80)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(target.address, target.port), REQUEST_TIMEOUT
        )
        try:
            writer.write(partial_request_bytes(spec, target.hostport))
            await writer.drain()
            status = await read_status(reader, spec.wait_s)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if status != spec.status:
            raise NotYet(f"expected status {spec.status}, got {status}")

    problem = await eventually(once, spec.timeout_s or TRAFFIC_TIMEOUT, CONSECUTIVE)
    return f"partial_request: {problem}" if problem else None


STEPS: dict[str, Callable[[Env, dict[str, Any]], Awaitable[str | None]]] = {
    "http_repeat": http_repeat_step,
    "connections": connections_step,
    "partial_request": partial_request_step,
}
