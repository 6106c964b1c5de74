from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.api.load import load_text
from gateweave.ir import Result
from gateweave.runtime import TranslateFn
from gateweave.snapshot import Snapshot
from gateweave.store import key_of
from gateweave.translate import translate
from gateweave.translate.options import DataplaneState, TranslateOptions
from tests.support.fake_translate import SEED, fake_translate
from tests.support.runtime import OURS, T0, Clock, Harness, RecordingSink, route, running

T1 = "2024-06-01T00:00:00Z"
TRANSLATES = [pytest.param(fake_translate, id="fake"), pytest.param(translate, id="real")]


def decoded(text: str, source: str = "test.yaml") -> Decoded:
    (obj,) = load_text(text, source).objects
    result, errors = decode(obj.raw, obj.source)
    assert result is not None, errors
    return result


async def test_first_translation_publishes_and_marks_ready() -> None:
    h = Harness(fake_translate, clock=Clock())
    assert not h.runtime.ready
    async with running(h):
        assert h.runtime.ready
        assert h.translations == 1
        assert h.count("gateweave_ready") == 1
        assert h.publishes() == {
            "status": 0,
            "xds": 0,
            "infra": 0,
        }  # nothing to publish for an empty store


@pytest.mark.parametrize("translate_fn", TRANSLATES)
async def test_burst_of_1000_events_costs_at_most_two_translations(
    translate_fn: TranslateFn,
) -> None:
    h = Harness(translate_fn, clock=Clock(), window=0.05)
    for kind in ("GatewayClass", "Gateway"):
        h.store.apply(decoded(SEED[kind]))
    routes = [route(f"r{i:04d}") for i in range(1000)]
    async with running(h):
        before = h.translations
        for i, r in enumerate(routes):
            h.store.apply(r)
            if i % 50 == 0:
                await asyncio.sleep(0)  # the loop runs between events, as with a real provider
        await h.runtime.wait_settled(timeout=10)
        assert h.count("gateweave_events_total", kind="HTTPRoute") == 1000
        assert h.translations - before <= 2
        h.assert_converged()
        gw_status = h.runtime.status_sink.get(Key("Gateway", "default", "gw"))
        if translate_fn is fake_translate:
            assert gw_status is not None and gw_status["listeners"][0]["attachedRoutes"] == 1000


@pytest.mark.parametrize("translate_fn", TRANSLATES)
@pytest.mark.parametrize("order", list(itertools.permutations(SEED)), ids="-".join)
async def test_creates_in_any_order_converge_to_the_batch_result(
    translate_fn: TranslateFn, order: tuple[str, ...]
) -> None:
    h = Harness(translate_fn, clock=Clock())
    async with running(h):
        for kind in order:
            h.store.apply(decoded(SEED[kind]))
            await h.runtime.wait_settled()
            h.assert_converged()  # holds after every step, not only at the end
    assert h.runtime.status_sink.get(Key("HTTPRoute", "default", "route")) is not None
    assert set(h.xds.state) == {"default/gw"}


@pytest.mark.parametrize("translate_fn", TRANSLATES)
@pytest.mark.parametrize("order", list(itertools.permutations(SEED)), ids="-".join)
async def test_deletes_in_any_order_converge(
    translate_fn: TranslateFn, order: tuple[str, ...]
) -> None:
    h = Harness(translate_fn, clock=Clock())
    objects = {kind: decoded(text) for kind, text in SEED.items()}
    for obj in objects.values():
        h.store.apply(obj)
    async with running(h):
        h.assert_converged()
        assert set(h.xds.state) == {"default/gw"}
        for kind in order:
            h.store.delete(key_of(objects[kind]))
            await h.runtime.wait_settled()
            h.assert_converged()
    assert h.xds.state == {} and h.infra.state == {}
    assert dict(h.status_sink.statuses) == {}


async def test_noop_events_publish_nothing() -> None:
    h = Harness(fake_translate, clock=Clock())
    for obj in SEED.values():
        h.store.apply(decoded(obj))
    async with running(h):
        translations, publishes, writes = h.translations, h.publishes(), h.status_sink.writes
        assert publishes == {"status": 1, "xds": 1, "infra": 1}

        # An identical re-apply is not even an event.
        for obj in SEED.values():
            assert h.store.apply(decoded(obj)) is None
        # A status-only change (e.g. our own status coming back) is stored, not translated.
        assert h.store.apply(route("route", status={"parents": []})) is not None
        await asyncio.sleep(0.05)
        await h.runtime.wait_settled()
        assert h.translations == translations

        # An unreferenced Secret is translated (the runtime cannot know) but publishes nothing.
        h.store.apply(
            decoded("apiVersion: v1\nkind: Secret\nmetadata: {name: unused, namespace: default}\n")
        )
        await h.runtime.wait_settled()
        assert h.translations == translations + 1
        assert h.publishes() == publishes
        assert h.status_sink.writes == writes
        assert len(h.xds.calls) == 1 and len(h.infra.calls) == 1


async def test_only_changed_gateways_are_published() -> None:
    h = Harness(fake_translate, clock=Clock())
    h.store.apply(decoded(SEED["GatewayClass"]))
    h.store.apply(decoded(SEED["Gateway"]))
    h.store.apply(decoded(SEED["Gateway"].replace("name: gw", "name: gw2")))
    async with running(h):
        assert h.xds.calls == [(["default/gw", "default/gw2"], [])]
        h.store.apply(route("r", gateway="gw2"))
        await h.runtime.wait_settled()
        assert h.xds.calls[-1] == (["default/gw2"], [])
        assert len(h.infra.calls) == 1  # the route changed no infrastructure
        h.store.delete(Key("Gateway", "default", "gw2"))
        await h.runtime.wait_settled()
        # gw2 is gone; gw is renumbered by the fake translate (address), so it changes too
        assert h.xds.calls[-1][1] == ["default/gw2"]
        h.assert_converged()


async def test_status_writes_keep_transition_times_and_other_controllers() -> None:
    clock = Clock()
    h = Harness(fake_translate, clock=clock)
    given = {
        "parentRef": {"name": "theirs"},
        "controllerName": "example.com/other",
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": T0,
            }
        ],
    }
    for kind in ("GatewayClass", "Gateway"):
        h.store.apply(decoded(SEED[kind]))
    h.store.apply(route("route", status={"parents": [given]}))
    rkey = Key("HTTPRoute", "default", "route")
    other = h.store.get(rkey).raw["status"]["parents"][0]  # type: ignore[union-attr]  # as defaulted
    assert other["controllerName"] == "example.com/other"
    async with running(h):
        first = h.runtime.status_sink.get(rkey)
        assert first is not None
        assert first["parents"][0] == other
        ours = first["parents"][1]
        assert ours["controllerName"] == OURS
        assert {c["type"]: c["lastTransitionTime"] for c in ours["conditions"]} == {
            "Accepted": T0,
            "ResolvedRefs": T0,
        }
        writes = h.status_sink.writes

        # A spec change: the route's generation and observedGeneration move, statuses do not.
        clock.now = T1
        h.store.apply(route("route", status={"parents": [given]}, port=9090))
        await h.runtime.wait_settled()
        second = h.runtime.status_sink.get(rkey)
        assert second is not None and second["parents"][0] == other
        conds = {c["type"]: c for c in second["parents"][1]["conditions"]}
        assert conds["Accepted"]["observedGeneration"] == 2
        assert conds["Accepted"]["lastTransitionTime"] == T0  # unchanged status: time kept
        assert h.status_sink.writes == writes + 1  # only the route was written

        # The Gateway disappears: the route is no longer Accepted - a transition.
        h.store.delete(Key("Gateway", "default", "gw"))
        await h.runtime.wait_settled()
        third = h.runtime.status_sink.get(rkey)
        assert third is not None
        conds = {c["type"]: c for c in third["parents"][1]["conditions"]}
        assert (
            conds["Accepted"]["status"] == "False" and conds["Accepted"]["lastTransitionTime"] == T1
        )
        assert conds["ResolvedRefs"]["lastTransitionTime"] == T0
        h.assert_converged()


async def test_dataplane_state_feeds_back_only_on_change() -> None:
    h = Harness(fake_translate, clock=Clock(), dataplane=True)
    for obj in SEED.values():
        h.store.apply(decoded(obj))
    gkey = Key("Gateway", "default", "gw")

    def programmed() -> str:
        status = h.runtime.status_sink.get(gkey)
        assert status is not None
        return next(c["status"] for c in status["conditions"] if c["type"] == "Programmed")

    async with running(h):
        assert h.runtime.translation_options().dataplane == {}
        assert programmed() == "False"
        translations = h.translations
        h.runtime.set_dataplane_state("default/gw", DataplaneState(acked=True))
        await h.runtime.wait_settled()
        assert h.translations == translations + 1
        assert programmed() == "True"
        h.runtime.set_dataplane_state("default/gw", DataplaneState(acked=True))  # same: nothing
        await asyncio.sleep(0.05)
        await h.runtime.wait_settled()
        assert h.translations == translations + 1
        h.assert_converged()

    offline = Harness(fake_translate, clock=Clock(), dataplane=False)
    assert offline.runtime.translation_options().dataplane is None


async def test_set_dataplane_state_from_another_thread() -> None:
    h = Harness(fake_translate, clock=Clock(), dataplane=True)
    async with running(h):
        translations = h.translations
        await asyncio.to_thread(
            h.runtime.set_dataplane_state, "default/gw", DataplaneState(error="down")
        )
        for _ in range(100):
            if h.runtime.dataplane_states:
                break
            await asyncio.sleep(0.01)
        await h.runtime.wait_settled()
        assert h.runtime.dataplane_states == {"default/gw": DataplaneState(error="down")}
        assert h.translations == translations + 1


async def test_events_that_keep_coming_are_translated_within_max_delay() -> None:
    h = Harness(fake_translate, clock=Clock(), window=0.05, max_delay=0.15)
    async with running(h):
        before = h.translations
        for i in range(40):  # ~0.4 s of events, never 50 ms apart
            h.store.apply(route(f"r{i}"))
            await asyncio.sleep(0.01)
        assert h.translations - before >= 2  # translated while the stream went on
        await h.runtime.wait_settled()
        h.assert_converged()


async def test_a_failing_translation_keeps_what_is_published() -> None:
    calls = {"n": 0}

    def flaky(snapshot: Snapshot, options: TranslateOptions) -> Result:
        calls["n"] += 1
        if snapshot.http_routes:
            raise RuntimeError("bug")
        return fake_translate(snapshot, options)

    h = Harness(flaky, clock=Clock())
    for kind in ("GatewayClass", "Gateway"):
        h.store.apply(decoded(SEED[kind]))
    async with running(h):
        published = dict(h.xds.state)
        h.store.apply(route("r"))
        await h.runtime.wait_settled()
        assert calls["n"] == 2
        assert h.count("gateweave_translation_failures_total") == 1
        assert h.xds.state == published
        h.store.delete(Key("HTTPRoute", "default", "r"))
        await h.runtime.wait_settled()
        assert calls["n"] == 3


async def test_sink_attached_later_receives_everything() -> None:
    h = Harness(fake_translate, clock=Clock())
    h.runtime.xds_sink = h.runtime.infra_sink = None
    for obj in SEED.values():
        h.store.apply(decoded(obj))
    async with running(h):
        assert h.runtime.published_xds == {}  # nobody took it
        assert h.runtime.last_result is not None and set(h.runtime.last_result.xds) == {
            "default/gw"
        }
        late = RecordingSink()
        h.runtime.attach(xds_sink=late)
        await h.runtime.wait_settled()
        assert set(late.state) == {"default/gw"}
        assert late.state == h.runtime.published_xds


async def test_envoys_start_before_their_configuration_and_stop_after_everything() -> None:
    """Infra changes that start Envoys are published before the xDS configuration (the Envoys
    start and connect while it is built); one that stops Envoys goes last (it waits for their
    draining)."""
    h = Harness(fake_translate, clock=Clock())
    order: list[str] = []
    for name, sink in (("xds", h.xds), ("infra", h.infra)):
        update = sink.update

        async def recorded(changed: Any, removed: Any, _u: Any = update, _n: str = name) -> None:
            order.append(f"{_n} {'stop' if removed else 'start'}")
            await _u(changed, removed)

        sink.update = recorded  # type: ignore[method-assign]
    gateway = decoded(SEED["Gateway"])
    for kind in ("GatewayClass", "HTTPRoute"):
        h.store.apply(decoded(SEED[kind]))
    h.store.apply(gateway)
    async with running(h):
        assert order == ["infra start", "xds start"]
        h.store.delete(key_of(gateway))
        await h.runtime.wait_settled()
        assert order == ["infra start", "xds start", "xds stop", "infra stop"]
        h.assert_converged()
