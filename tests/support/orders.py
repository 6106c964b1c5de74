"""Events in any order through the runtime: plans that create every item of a universe once
in a random order, interleaved with updates, deletes, re-creates and pauses; and the run of a
plan through the store, after which what the runtime published must equal translate."""

from __future__ import annotations

import asyncio

from hypothesis import strategies as st

from gateweave.api.decode import Decoded
from gateweave.api.kinds import Key
from tests.support.conformance_objects import without_generation
from tests.support.runtime import Harness, running
from tests.support.variants import BASE, META, SPEC, Universe

Step = tuple[str, int, int]  # ("apply", item, version) | ("delete", item, 0) | ("sleep", ms, 0)
SLEEPS_MS = (0, 1, 2, 5, 20, 60)


@st.composite
def plans(draw: st.DrawFn, u: Universe, max_extra: int = 40) -> list[Step]:
    """Every object created once in a random order (some as a variant), interleaved with
    random updates, deletes, re-creates and pauses."""
    n = len(u.items)
    index = (
        st.one_of(st.sampled_from(u.important), st.integers(0, n - 1))
        if u.important
        else st.integers(0, n - 1)
    )
    version = st.sampled_from((BASE, BASE, SPEC, META))
    creates: list[Step] = [("apply", i, draw(version)) for i in draw(st.permutations(range(n)))]
    extra = draw(
        st.lists(
            st.tuples(
                st.integers(0, n),
                st.one_of(
                    st.tuples(st.just("apply"), index, version),
                    st.tuples(st.just("delete"), index, st.just(0)),
                    st.tuples(st.just("sleep"), st.sampled_from(SLEEPS_MS), st.just(0)),
                ),
            ),
            max_size=max_extra,
        )
    )
    steps = list(creates)
    for position, step in sorted(extra, key=lambda e: e[0], reverse=True):
        steps.insert(position, step)
    return steps


def final_versions(u: Universe, steps: list[Step]) -> dict[Key, Decoded]:
    state: dict[Key, Decoded] = {}
    for op, i, v in steps:
        if op == "apply":
            state[u.items[i].key] = u.items[i].versions[v]
        elif op == "delete":
            state.pop(u.items[i].key, None)
    return state


def assert_store_holds(h: Harness, want: dict[Key, Decoded]) -> None:
    assert set(h.store.keys()) == set(want)
    for key, dec in want.items():
        stored = h.store.get(key)
        assert stored is not None and without_generation(stored.raw) == without_generation(
            dec.raw
        ), key


async def run_on_store(u: Universe, steps: list[Step]) -> None:
    """The plan through a store and a running runtime: once settled, the store holds the
    final versions and what the runtime published equals translate of them."""
    h = Harness(window=0.005, max_delay=0.1)
    async with running(h):
        for op, i, v in steps:
            if op == "sleep":
                await asyncio.sleep(i / 1000)
            elif op == "apply":
                h.store.apply(u.items[i].versions[v])
            else:
                h.store.delete(u.items[i].key)
            await asyncio.sleep(0)  # the loop runs between events, as with a real provider
        await h.runtime.wait_settled(timeout=10)
        assert_store_holds(h, final_versions(u, steps))
        h.assert_published_equals_translate()
