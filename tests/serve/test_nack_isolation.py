"""One route Envoy rejects never freezes the others (issue 12), with real Envoys and real traffic.

* A regex over Envoy's program size limit is caught by translate: that route gets a condition,
  Envoy never sees it, and the other routes of the listener keep changing.
* A value only Envoy refuses (here Envoy's own limit lowered below translate's, through its
  runtime on its admin API, which a translation cannot know about) is found by the data plane:
  the route object is quarantined with Envoy's message (its condition, ``explain``,
  ``/api/errors``, a metric), the other routes keep being served and changed within a
  second, and editing the culprit releases it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import name_servers, programmed, until, write_base

pytestmark = pytest.mark.timeout(60)

STEP_LIMIT = 1.0  # seconds from a file write to Envoy serving the change
ISSUE_REGEX = "/api/v[0-9]+/items/[a-z0-9-]{1,64}"  # RE2 program size 274 (> 100)
ENVOY_ONLY_LIMIT = 30  # the lowered Envoy limit
ENVOY_ONLY_REGEX = "/items/[a-z]{1,20}"  # size 50: translate takes it, that Envoy does not
FIXED_REGEX = "/items/[a-z]{1,8}"  # size 26


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, h.NameServer]]:
    with name_servers("A", "B") as servers:
        yield servers


def answers(
    ip: str, port: int, path: str, body: str | None, status: int = 200
) -> Callable[[], Awaitable[h.Reply | None]]:
    async def probe() -> h.Reply | None:
        reply = await h.fetch(ip, port, path, "app.test")
        if reply is None or reply.status != status or (body is not None and reply.body != body):
            return None
        return reply

    return probe


def accepted(
    served: h.Served, name: str, status: str, text: str
) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """The route's Accepted condition once it is ``status`` with ``text`` in its message."""

    async def probe() -> dict[str, Any] | None:
        route = await served.get("HTTPRoute", name)
        parents = route.get("status", {}).get("parents", []) if route else []
        conds = [c for p in parents for c in p.get("conditions", []) if c.get("type") == "Accepted"]
        return (
            dict(conds[0])
            if conds and conds[0]["status"] == status and text in conds[0]["message"]
            else None
        )

    return probe


def regex_route(name: str, pattern: str, backend: str) -> dict[str, Any]:
    rule = {
        "matches": [{"path": {"type": "RegularExpression", "value": pattern}}],
        "backendRefs": [h.backend_ref(backend, 80)],
    }
    return h.http_route(name, "gw", ["app.test"], [rule])


def good_route(backend: str) -> dict[str, Any]:
    return h.http_route("good", "gw", ["app.test"], [h.rule("/good", [h.backend_ref(backend, 80)])])


def setup(tmp_path: Path, ip: str, backends: dict[str, Any]) -> int:
    port = free_port(ip)
    write_base(tmp_path, ip, port, backends)
    h.write_manifests(tmp_path / "good.yaml", [good_route("svc-a")])
    return port


async def admin_get(served: h.Served, path: str) -> Any:
    async with httpx.AsyncClient(timeout=5.0) as client:
        return (await client.get(f"{served.admin.url}{path}", headers=served.admin.headers)).json()


async def test_a_regex_over_envoys_limit_gets_a_condition_and_the_listener_keeps_changing(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    ip = "127.40.9.1"
    port = setup(tmp_path, ip, backends)
    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL) as served:
        await until(answers(ip, port, "/good", "A"), 10, "the good route serves A")
        h.write_manifests(tmp_path / "bad.yaml", [regex_route("bad", ISSUE_REGEX, "svc-b")])
        cond, _ = await until(
            accepted(served, "bad", "False", "RE2 program size 274 is over Envoy's limit of 100"),
            5,
            "bad refused",
        )
        assert cond["reason"] == "UnsupportedValue"
        h.write_manifests(tmp_path / "good.yaml", [good_route("svc-b")])
        _, took = await until(
            answers(ip, port, "/good", "B"), 5, "the good route's change is served"
        )
        assert took < STEP_LIMIT, took
        await until(programmed(served, "True"), 5, "the Gateway is programmed")
        assert served.xds.searches_run == 0  # Envoy never saw the regex: nothing was rejected


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_a_route_only_envoy_rejects_is_quarantined_and_never_freezes_the_others(
    tmp_path: Path, backends: dict[str, Any], delta: bool
) -> None:
    ip = "127.40.9.21" if delta else "127.40.9.11"
    port = setup(tmp_path, ip, backends)
    async with h.running_serve(
        tmp_path, delta=delta, check_incremental=CHECK_INCREMENTAL
    ) as served:
        await until(answers(ip, port, "/good", "A"), 10, "the good route serves A")
        process = served.infra.process("default/gw")
        assert process is not None
        async with httpx.AsyncClient(timeout=5.0) as client:
            set_limit = await client.post(
                f"http://{process.admin_address}/runtime_modify",
                params={"re2.max_program_size.error_level": str(ENVOY_ONLY_LIMIT)},
            )
        assert set_limit.status_code == 200, set_limit.text

        # The culprit and a change of another route of the same listener, at once.
        h.write_manifests(tmp_path / "bad.yaml", [regex_route("bad", ENVOY_ONLY_REGEX, "svc-b")])
        h.write_manifests(tmp_path / "good.yaml", [good_route("svc-b")])
        _, took = await until(
            answers(ip, port, "/good", "B"), 5, "the good route's change is served"
        )
        steps = {"other route changed beside the culprit": took}

        envoy_says = f"RE2 program size of 50 > max program size of {ENVOY_ONLY_LIMIT}"
        cond, _ = await until(
            accepted(served, "bad", "False", envoy_says), 5, "the culprit's condition"
        )
        assert cond["reason"] == "UnsupportedValue"
        assert "the Envoy of Gateway default/gw rejects it" in cond["message"]
        await until(programmed(served, "True"), 5, "the Gateway is programmed again")
        assert await answers(ip, port, "/items/abc", None, status=404)() is not None  # left out

        # Everywhere a user looks.
        errors = (await admin_get(served, "/api/errors"))["items"]
        assert [(e["kind"], e["name"]) for e in errors] == [("HTTPRoute", "bad")]
        assert envoy_says in errors[0]["message"]
        assert served.runtime.metrics.value("gateweave_quarantined_objects") == 1
        lines = (await admin_get(served, "/api/explain/HTTPRoute/default/bad"))["lines"]
        assert any("quarantined: left out" in line and envoy_says in line for line in lines), lines

        # Still isolated: the next change of the good route is served at once.
        h.write_manifests(tmp_path / "good.yaml", [good_route("svc-a")])
        _, steps["next change of the other route"] = await until(
            answers(ip, port, "/good", "A"), 5, "the next change"
        )

        # Fixing the culprit releases it: tried again, served.
        h.write_manifests(tmp_path / "bad.yaml", [regex_route("bad", FIXED_REGEX, "svc-b")])
        _, steps["fixed culprit served"] = await until(
            answers(ip, port, "/items/abc", "B"), 5, "the fixed route serves B"
        )
        await until(accepted(served, "bad", "True", "Accepted"), 5, "the fixed route is accepted")
        assert served.runtime.metrics.value("gateweave_quarantined_objects") == 0
        assert (await admin_get(served, "/api/errors"))["items"] == []
        await until(programmed(served, "True"), 5, "the Gateway is programmed")
        assert await answers(ip, port, "/good", "A")() is not None
        searches = served.xds.searches_run
    print(
        "file write -> Envoy serving",
        "(delta):" if delta else "(sotw):",
        {k: f"{v * 1000:.0f} ms" for k, v in steps.items()},
        f"searches: {searches}",
    )
    assert all(v < STEP_LIMIT for v in steps.values()), steps
