"""A listener removed from a Gateway that stays: its in-flight requests complete (Envoy drains
the removed listener for the Gateway's drain time) instead of being cut, live with
``gateweave serve`` and its Envoys in a network namespace the test makes.

Two Gateways, each with listeners ``a`` and ``b``; ``b`` routes to a slow backend of its own
(it holds each request until the test lets it answer), so a request is in flight across the
whole change: ``b`` removed from the Gateway's file, its Envoy listener gone, its route and
cluster dropped. Checked, on the Gateway whose parameters give a long drain: that request
completes with 200 from the slow backend; ``a`` answers every request throughout; new
connections to ``b``'s port are refused at once; the Envoy is the same process. On the
Gateway whose parameters give a 1 s drain, the request still held when the drain ends is
closed (the drain time is the Gateway's ``drainTimeout``, not Envoy's default 600 s).
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateweave_bench import harness as h
from tests.support.heldbackend import HeldBackend
from tests.support.netns import Netns
from tests.support.netserve import Serve, answers, until, write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

HOLD_LIMIT = 30.0  # a held request is answered after this at the latest (the test failed by then)


class _Steady:
    """Requests to a Gateway's listener ``a`` one after another (a bounded loop) while the change
    happens.
    """

    def __init__(self, serve: Serve, address: str) -> None:
        self.serve, self.address = serve, address
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for _ in range(5000):
            if self._stop.is_set():
                return
            reply = self.serve.fetch(self.address, 8080, "/", "app.test")
            self.sent += 1
            if reply is None or reply.status != 200 or reply.body != "fast":
                self.failed.append(repr(None if reply is None else (reply.status, reply.body)))
            self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


PARAMS = "gateweave.io/v1alpha1"
ADDRESSES = {"long": "127.10.0.1", "short": "127.10.0.2"}
DRAIN = {"long": "60s", "short": "1s"}


def objects(fast: int, slow: int, with_b: bool) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        h.gateway_class(),
        *h.service("fast", 80, fast),
        *h.service("slow", 80, slow),
    ]
    for name, address in ADDRESSES.items():
        listeners = [h.listener("a", "HTTP", 8080)] + (
            [h.listener("b", "HTTP", 8081)] if with_b else []
        )
        gateway = h.gateway(name, address, listeners)
        gateway["spec"]["infrastructure"] = {
            "parametersRef": {"group": "gateweave.io", "kind": "GatewayParameters", "name": name}
        }
        docs += [
            gateway,
            {
                "apiVersion": PARAMS,
                "kind": "GatewayParameters",
                "metadata": h.meta(name),
                "spec": {"envoy": {"drainTimeout": DRAIN[name]}},
            },
            h.http_route(
                f"{name}-a",
                name,
                ["app.test"],
                [h.rule("/", [h.backend_ref("fast", 80)])],
                section="a",
            ),
        ]
        if with_b:
            docs.append(
                h.http_route(
                    f"{name}-b",
                    name,
                    ["app.test"],
                    [h.rule("/", [h.backend_ref("slow", 80)])],
                    section="b",
                )
            )
    return docs


def b_gone(serve: Serve, gateway: str) -> bool:
    """Whether the Envoy of ``gateway`` has neither listener ``b`` (port 8081) nor its cluster."""
    node = f"default/{gateway}"
    return f"{node}/8081" not in serve.envoy_admin_get(
        "/listeners", node
    ) and "default/slow" not in serve.envoy_admin_get("/clusters", node)


def test_a_removed_listener_drains_its_in_flight_request(ns: Netns, tmp_path: Path) -> None:
    fast = ns.call(h.NameServer, "fast", "127.0.0.1")
    slow = ns.call(HeldBackend, HOLD_LIMIT)
    config = tmp_path / "config"
    config.mkdir()
    write(config / "objects.yaml", objects(fast.port, slow.port, with_b=True))
    serve = Serve(ns, config, tmp_path / "serve.log")
    client = ThreadPoolExecutor(max_workers=2)
    steady: _Steady | None = None
    try:
        for address in ADDRESSES.values():
            until(
                answers(serve, "/", "fast", address=address),
                30,
                f"listener a of {address} answers",
                serve,
            )
        envoys = sorted(serve.envoys())
        steady = _Steady(serve, ADDRESSES["long"])
        in_flight: dict[str, Future[h.Reply | None]] = {}
        for name, address in ADDRESSES.items():
            slow.arrived.clear()
            in_flight[name] = client.submit(
                serve.ns.call, h.fetch_sync, address, 8081, "/", "app.test", timeout=HOLD_LIMIT + 10
            )
            assert slow.arrived.wait(30), f"the request on {name}'s b reached the slow backend"

        write(config / "objects.yaml", objects(fast.port, slow.port, with_b=False))
        for name in ADDRESSES:
            until(
                functools.partial(b_gone, serve, name),
                30,
                f"{name}'s listener b and its cluster are gone",
                serve,
            )
            assert serve.fetch(ADDRESSES[name], 8081, "/", "app.test") is None, (
                "b refuses new connections"
            )

        # the short drain ends while its request is still held: that connection is closed
        assert in_flight["short"].result(HOLD_LIMIT) is None
        # the long one is still draining: the request completes once the backend answers
        assert not in_flight["long"].done()
        slow.release.set()
        reply = in_flight["long"].result(HOLD_LIMIT)
        assert reply is not None and (reply.status, reply.body) == (200, "slow"), reply
        steady.stop()
        assert steady.sent > 0 and not steady.failed, steady.failed
        assert sorted(serve.envoys()) == envoys  # drained, not restarted
    finally:
        if steady is not None:
            steady.stop()
        slow.release.set()
        client.shutdown(wait=True)
        serve.stop()
        ns.call(fast.close)
        ns.call(slow.close)
