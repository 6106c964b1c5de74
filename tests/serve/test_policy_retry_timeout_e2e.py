"""A BackendTrafficPolicy's retry and request timeout, live: ``serve`` with a real Envoy.

A backend failing a request's first try (500) answers the retried one: the client sees 200
where a policy retries on 500, and the 500 where none does; a request the backend takes
longer to answer than the policy's ``timeout.http.requestTimeout`` gets 504.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.flaky import FlakyServer
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import envoy_serving
from tests.support.policies import backend_traffic_policy as btp

pytestmark = pytest.mark.timeout(60)

IP = "127.40.17.1"


async def test_retry_and_request_timeout(tmp_path: Path, flaky: FlakyServer) -> None:
    port = free_port(IP)
    h.write_manifests(
        tmp_path / "base.yaml",
        [
            h.gateway_class(),
            h.gateway("gw", IP, [h.listener("http", "HTTP", port)]),
            *h.service("flaky", 80, flaky.port),
            *(
                h.http_route(
                    name, "gw", [f"{name}.example"], [h.rule("/", [h.backend_ref("flaky", 80)])]
                )
                for name in ("retried", "plain", "bounded")
            ),
        ],
    )
    h.write_manifests(
        tmp_path / "policies.yaml",
        [
            btp(
                "retry",
                "retried",
                {
                    "retry": {
                        "numRetries": 1,
                        "retryOn": {"httpStatusCodes": [500]},
                        "perRetry": {
                            "backOff": {"baseInterval": "10ms", "maxInterval": "20ms"},
                            "timeout": "5s",
                        },
                    }
                },
            ),
            btp("timeout", "bounded", {"timeout": {"http": {"requestTimeout": "200ms"}}}),
        ],
    )
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        await envoy_serving(IP, port, host="plain.example", status=200)

        reply = await h.fetch(IP, port, "/fail-once/a", "retried.example")
        assert reply is not None and (reply.status, reply.body) == (200, "200 /fail-once/a")
        assert flaky.hits("/fail-once/a") == 2  # the first try failed, the retry answered
        reply = await h.fetch(IP, port, "/fail-once/b", "plain.example")
        assert reply is not None and reply.status == 500  # no policy: no retry on 500
        assert flaky.hits("/fail-once/b") == 1

        reply = await h.fetch(IP, port, "/slow", "bounded.example", timeout=5)
        assert reply is not None and reply.status == 504
        reply = await h.fetch(IP, port, "/slow", "plain.example", timeout=5)
        assert reply is not None and reply.status == 200
        reply = await h.fetch(IP, port, "/quick", "bounded.example")
        assert reply is not None and reply.status == 200
