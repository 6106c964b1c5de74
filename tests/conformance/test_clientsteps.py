"""The conformance runner's client steps (gateweave_conformance.clientsteps: http_repeat,
connections, partial_request) against small in-test HTTP/1.1 servers on real loopback sockets,
each behaving like a gateway with (or without) the policy the step checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from gateweave_conformance import clientsteps, traffic
from gateweave_conformance.cases import CaseError, PartialRequestStep, parse_step
from tests.support.stepenv import FixedEnv

HOST = "127.0.0.1"


@dataclass
class Server:
    """An HTTP/1.1 server answering like the echo (ECHO.md: the request's method and path in
    JSON): ``answer(n)`` gives the status of the n-th request (from 1); at most
    ``max_connections`` connections at once (more are closed at once); a request whose declared
    body does not come whole within ``body_wait`` seconds is answered 408."""

    answer: Callable[[int], int] = lambda n: 200
    max_connections: int | None = None
    silent_over_limit: bool = False  # connections over the limit kept open, never answered
    body_wait: float = 0.3
    requests: int = 0
    open: int = 0
    port: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.max_connections is not None and self.open >= self.max_connections:
            if self.silent_over_limit:
                with contextlib.suppress(ConnectionError):
                    await reader.read()  # until the client gives up
            writer.close()
            return
        self.open += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                try:
                    await asyncio.wait_for(reader.readexactly(length), self.body_wait)
                except TimeoutError:
                    writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    return
                self.requests += 1
                status = self.answer(self.requests)
                method, path = head.split(b" ")[:2]
                body = json.dumps(
                    {"path": path.decode(), "method": method.decode(), "namespace": "", "pod": "p"}
                ).encode()
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self.handle, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2)


@contextlib.asynccontextmanager
async def serving(server: Server) -> AsyncIterator[tuple[Server, FixedEnv]]:
    async with server:
        yield server, FixedEnv(HOST, server.port)


async def test_http_repeat_counts_every_answer() -> None:
    """A limit of 3: exactly 3 answers of 200, then 429; one request too many fails the step at
    the request that got the other status, without retrying."""
    step = {"gateway": "ns/gw", "request": {"path": "/x"}, "response": {"status": 200}}
    async with serving(Server(answer=lambda n: 200 if n <= 3 else 429)) as (server, env):
        assert await clientsteps.http_repeat_step(env, {**step, "times": 3}) is None
        assert server.requests == 3
        limited = {**step, "times": 2, "response": {"status": 429}}
        assert await clientsteps.http_repeat_step(env, limited) is None
        assert server.requests == 5
    async with serving(Server(answer=lambda n: 200 if n <= 3 else 429)) as (server, env):
        problem = await clientsteps.http_repeat_step(env, {**step, "times": 5})
        assert problem == "request 4 of 5: expected status 200, got 429"
        assert server.requests == 4


async def test_http_repeat_retries_unanswered_requests_until_its_timeout() -> None:
    """Nothing listening: no answer to count, the step reports it after its timeout."""
    async with serving(Server()) as (_, env):
        pass  # closed: the port refuses connections now
    problem = await clientsteps.http_repeat_step(
        env, {"gateway": "ns/gw", "times": 1, "timeout_s": 0.3}
    )
    assert problem is not None and problem.startswith("request 1 of 1: not answered: ")


async def test_connections_holds_the_limit_then_is_served_again() -> None:
    async with serving(Server(max_connections=3)) as (server, env):
        step = {"gateway": "ns/gw", "hold": 3, "timeout_s": 5}
        assert await clientsteps.connections_step(env, step) is None
        assert server.requests >= 4  # 3 held, and one once they were closed


async def test_connections_fails_without_a_limit_or_below_it() -> None:
    async with serving(Server()) as (_, env):
        problem = await clientsteps.connections_step(
            env, {"gateway": "ns/gw", "hold": 2, "timeout_s": 0.5}
        )
        assert problem is not None
        assert "connection 3 was served while 2 were open" in problem
    async with serving(Server(max_connections=2)) as (_, env):
        # Holding 3 is impossible under a limit of 2: the third held one is never served.
        problem = await clientsteps.connections_step(
            env, {"gateway": "ns/gw", "hold": 3, "timeout_s": 0.5}
        )
        assert problem is not None and "a connection was not served" in problem


async def test_connections_needs_the_extra_one_closed_not_unanswered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An extra connection left hanging is not a limit: only a close without an answer is."""
    monkeypatch.setattr(clientsteps, "REQUEST_TIMEOUT", 0.2)
    async with serving(Server(max_connections=2, silent_over_limit=True)) as (_, env):
        problem = await clientsteps.connections_step(
            env, {"gateway": "ns/gw", "hold": 2, "timeout_s": 0.5}
        )
        assert problem is not None and "not answered in time" in problem


async def test_partial_request_gets_the_timeout_status() -> None:
    step = {
        "gateway": "ns/gw",
        "path": "/slow",
        "body": "part",
        "content_length": 100,
        "status": 408,
        "wait_s": 2,
        "timeout_s": 5,
    }
    async with serving(Server(body_wait=0.1)) as (server, env):
        assert await clientsteps.partial_request_step(env, step) is None
        assert server.requests == 0  # never received whole
    # A gateway waiting longer than the step: no answer within wait_s.
    async with serving(Server(body_wait=5)) as (_, env):
        problem = await clientsteps.partial_request_step(
            env, {**step, "wait_s": 0.2, "timeout_s": 0.5}
        )
        assert problem is not None and "no answer within 0.2s" in problem
    # The status is compared.
    async with serving(Server(body_wait=0.1)) as (_, env):
        problem = await clientsteps.partial_request_step(env, {**step, "status": 504})
        assert problem is not None and "expected status 504, got 408" in problem


def test_partial_request_bytes_declare_more_than_they_send() -> None:
    spec = PartialRequestStep(
        gateway="ns/gw", content_length=10, status=408, path="/p", headers={"X-A": "1"}, body="abc"
    )
    sent = clientsteps.partial_request_bytes(spec, "10.0.0.1:80")
    assert sent == (
        b"POST /p HTTP/1.1\r\nHost: 10.0.0.1:80\r\nX-A: 1\r\nContent-Length: 10\r\n\r\nabc"
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"http_repeat": {"gateway": "a/b"}}, "Object missing required field `times`"),
        ({"http_repeat": {"gateway": "a/b", "times": 0}}, "Expected `int` >= 1"),
        ({"http_repeat": {"gateway": "a/b", "times": 2, "expect_failure": True}}, "unknown field"),
        ({"connections": {"gateway": "a/b", "hold": "3x"}}, "Expected `int`"),
        ({"connections": {"gateway": "a/b", "hold": 3, "port": 1}}, "unknown field"),
        (
            {
                "partial_request": {
                    "gateway": "a/b",
                    "content_length": 3,
                    "status": 408,
                    "body": "abc",
                }
            },
            "content_length must exceed",
        ),
        ({"partial_request": {"gateway": "a/b", "content_length": 3}}, "required field `status`"),
    ],
)
def test_client_steps_are_parsed_strictly_with_their_place(
    body: dict[str, object], error: str
) -> None:
    with pytest.raises(CaseError, match=error) as raised:
        parse_step(4, body, "case.yaml: ")
    kind = next(iter(body))
    assert str(raised.value).startswith(f"case.yaml: step 4 ({kind}): ")


def test_client_steps_parse() -> None:
    step = parse_step(0, {"connections": {"gateway": "a/b", "hold": 3}})
    assert step.kind == "connections" and step.raw == {"gateway": "a/b", "hold": 3}


def test_http_response_body_is_compared_exactly() -> None:
    """FORMAT.md's response.body (a policy's custom error body): the whole body, decoded."""
    sent = traffic.HttpRequest(scheme="http", target=traffic.Target(HOST, 80), path="/status/404")
    answer = traffic.HttpAnswer(404, httpx.Headers({"content-type": "text/plain"}), b"Oops", None)
    assert traffic.compare_http({"response": {"status": 404, "body": "Oops"}}, sent, answer) is None
    assert traffic.compare_http({"response": {"status": 404}}, sent, answer) is None
    problem = traffic.compare_http({"response": {"status": 404, "body": "Oops!"}}, sent, answer)
    assert problem == "expected the answer's body 'Oops!', got b'Oops'"
    empty = traffic.compare_http({"response": {"status": 404, "body": ""}}, sent, answer)
    assert empty == "expected the answer's body '', got b'Oops'"
