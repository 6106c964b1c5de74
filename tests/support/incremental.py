"""The incremental translator under property tests: a Store holding a universe's items, the
translator in check mode (each result compared with a full translation), and plans of changes
(an item's version, its deletion, a data-plane report) to drive it through."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave.store import Store
from gateweave.translate import DataplaneState, TranslateOptions
from gateweave.translate.incremental import IncrementalTranslator
from tests.support.variants import BASE, META, SPEC, Universe

DELETE = 3  # after the versions BASE, SPEC and META: the item is deleted
Op = tuple[int, int]  # (item, BASE | SPEC | META | DELETE); item -1: a data-plane report


class Driver:
    """A Store, the incremental translator in check mode, and the data plane's reports."""

    def __init__(self, u: Universe, address_mode: str = "standalone") -> None:
        self.u = u
        self.address_mode = address_mode
        self.store = Store()
        self.translator = IncrementalTranslator(check=True)
        self.dataplane: dict[str, DataplaneState] = {}
        self.gateway_names = sorted(
            f"{it.key.namespace}/{it.key.name}" for it in u.items if it.key.kind == "Gateway"
        )
        for item in u.items:
            self.store.apply(item.versions[BASE])

    def options(self) -> TranslateOptions:
        return TranslateOptions(dataplane=dict(self.dataplane), address_mode=self.address_mode)  # type: ignore[arg-type]

    def apply(self, op: Op) -> None:
        i, what = op
        if i < 0:  # a data-plane report flips
            if self.gateway_names:
                name = self.gateway_names[what % len(self.gateway_names)]
                state = self.dataplane.get(name)
                self.dataplane[name] = DataplaneState(acked=not (state and state.acked))
        elif what == DELETE:
            self.store.delete(self.u.items[i].key)
        else:
            self.store.apply(self.u.items[i].versions[what])

    def translate(self) -> None:
        self.translator(self.store.snapshot(), self.options())  # raises IncrementalMismatch


@st.composite
def ops(draw: st.DrawFn, u: Universe, max_size: int = 30) -> list[Op]:
    n = len(u.items)
    index = (
        st.one_of(st.sampled_from(u.important), st.integers(0, n - 1))
        if u.important
        else st.integers(0, n - 1)
    )
    change = st.tuples(index, st.sampled_from((BASE, SPEC, SPEC, META, DELETE)))
    report = st.tuples(st.just(-1), st.integers(0, 7))
    return draw(st.lists(st.one_of(change, change, change, report), min_size=1, max_size=max_size))


def run_plan(
    u: Universe, plan: list[Op], batch: int = 1, address_mode: str = "standalone"
) -> IncrementalTranslator:
    d = Driver(u, address_mode)
    d.translate()
    for start in range(0, len(plan), batch):
        for op in plan[start : start + batch]:
            d.apply(op)
        d.translate()
    return d.translator


def check_random_plans(
    u: Universe, max_examples: int, batches: tuple[int, ...] = (1, 1, 3), max_size: int = 30
) -> None:
    """Hypothesis drives the translator in check mode through random plans over ``u``
    (``batches``: how many changes each translation sees, drawn), each result equal to a full
    translation."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=ops(u, max_size=max_size), batch=st.sampled_from(batches))
    def check(plan: list[Op], batch: int) -> None:
        run_plan(u, plan, batch)

    check()
