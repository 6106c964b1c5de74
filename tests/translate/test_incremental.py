"""Incremental translation equals a full translation, after any sequence of changes.

Property tests: objects of the conformance cases and generated (bench) object sets go
through a Store; random sequences of creates, spec changes, metadata changes, deletes and
re-creates (and data-plane reports) are applied, and after every change the
IncrementalTranslator's Result (statuses, infrastructure IR, xDS IR) must equal
``translate`` of the same snapshot - ``check=True`` compares them and raises
IncrementalMismatch naming the first difference.
"""

from __future__ import annotations

import copy
import functools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store, key_of
from gateweave.translate import translate
from gateweave.translate.incremental import IncrementalMismatch, IncrementalTranslator, _compare
from gateweave_bench.objects import changed_endpoint_slice, changed_route, generate
from tests.support.conformance_objects import all_case_files, case_set
from tests.support.incremental import DELETE, Driver, Op, check_random_plans, ops, run_plan
from tests.support.variants import (
    BASE,
    CASE_SETS,
    META,
    SPEC,
    Item,
    Universe,
    metadata_variant,
    spec_variant,
    universe,
)


def _variant(make: Any, raw: dict[str, Any]) -> Decoded:
    dec, errors = decode(make(raw))
    if dec is None:  # not a valid change for this object: a label alone
        dec, errors = decode(metadata_variant(raw))
    assert dec is not None, errors
    return dec


def _changed(change: Any, objects: Any, i: int, _raw: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = change(objects, i, 7)
    return result


_POLICY_KINDS = ("BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy")


@functools.cache
def bench_universe(routes: int, seed: int, policies: float = 0.0) -> Universe:
    """Generated objects; routes get the bench's route change, slices an endpoint move
    (``policies``: the fraction of routes with Envoy Gateway policies, objects.py)."""
    objects = generate(routes, seed, policies)
    route_pos = {pos: i for i, pos in enumerate(objects.route_index)}
    slice_pos = {pos: i for i, pos in enumerate(objects.slice_index)}
    items = []
    for pos, raw in enumerate(objects.manifests):
        base, errors = decode(raw)
        assert base is not None, errors
        if pos in route_pos:
            spec = _variant(
                functools.partial(_changed, changed_route, objects, route_pos[pos]), raw
            )
        elif pos in slice_pos:
            spec = _variant(
                functools.partial(_changed, changed_endpoint_slice, objects, slice_pos[pos]), raw
            )
        else:
            spec = _variant(spec_variant, raw)
        items.append(Item(key_of(base), (base, spec, _variant(metadata_variant, raw))))
    important = tuple(
        i
        for i, it in enumerate(items)
        if it.key.kind in ("Gateway", "Service", "ReferenceGrant", "Namespace", *_POLICY_KINDS)
    )
    return Universe(tuple(items), important)


@pytest.mark.parametrize("name", sorted(CASE_SETS))
def test_conformance_sets_incremental_equals_full(name: str) -> None:
    u = universe(name)

    check_random_plans(u, 30)


@pytest.mark.parametrize("routes,seed,policies", [(40, 3, 0.0), (120, 11, 0.0), (60, 5, 0.3)])
def test_generated_sets_incremental_equals_full(routes: int, seed: int, policies: float) -> None:
    u = bench_universe(routes, seed, policies)

    check_random_plans(u, 25, batches=(1, 1, 5), max_size=50)


def test_kubernetes_address_mode_incremental_equals_full() -> None:
    """Kubernetes mode reads Services on the gateway side too (the Gateways' addresses)."""
    u = bench_universe(40, 3)

    @settings(
        max_examples=15,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=ops(u, max_size=30))
    def check(plan: list[Op]) -> None:
        run_plan(u, plan, address_mode="kubernetes")

    check()


@pytest.mark.parametrize("case_file", all_case_files())
def test_every_conformance_case_incremental_equals_full(case_file: str) -> None:
    """Each case's objects: every object changed, deleted and restored in a seeded order."""
    decoded = [d for d in case_set([case_file])]
    u = Universe(
        tuple(
            Item(key_of(d), (d, _variant(spec_variant, d.raw), _variant(metadata_variant, d.raw)))
            for d in decoded
        ),
        (),
    )
    rng = random.Random(case_file)
    plan: list[Op] = []
    for i in rng.sample(range(len(u.items)), len(u.items)):
        plan += [(i, SPEC), (i, META), (-1, rng.randrange(8)), (i, DELETE), (i, BASE)]
    run_plan(u, plan)


# ---------------------------------------------------------------- the fast path is taken


def test_route_and_endpoint_changes_take_the_incremental_path() -> None:
    u = bench_universe(120, 11)
    d = Driver(u)
    d.translate()
    kinds = ("HTTPRoute", "EndpointSlice", "Service")
    picks = [i for i, it in enumerate(u.items) if it.key.kind in kinds]
    rng = random.Random(5)
    for i in rng.sample(picks, 40):
        d.apply((i, rng.choice((SPEC, META, DELETE, BASE))))
        d.translate()
    for _ in range(4):
        d.apply((-1, rng.randrange(8)))  # data-plane reports re-run only the gateway side
        d.translate()
    assert d.translator.full_translations == 1


def test_policy_route_and_endpoint_changes_take_the_incremental_path() -> None:
    """With policies of every kind on Gateways, listeners, routes and rules: route, endpoint
    and policy changes (a policy deleted, re-created, retargeted) are no full translation,
    and each result equals a full translation (check mode)."""
    u = bench_universe(120, 11, 0.3)
    d = Driver(u)
    d.translate()
    kinds = ("HTTPRoute", "EndpointSlice", "Service", *_POLICY_KINDS)
    picks = [i for i, it in enumerate(u.items) if it.key.kind in kinds]
    assert {u.items[i].key.kind for i in picks} >= set(_POLICY_KINDS)
    rng = random.Random(15)
    for i in rng.sample(picks, 60):
        d.apply((i, rng.choice((SPEC, META, DELETE, BASE))))
        d.translate()
    assert d.translator.full_translations == 1


def test_a_policy_change_recomputes_only_what_it_governs() -> None:
    """A route's own BackendTrafficPolicy deleted: that route's virtual hosts change, every
    other one is handed out again as the same object; the younger conflicting policy takes
    the route over and its status says Accepted."""
    u = bench_universe(120, 11, 0.3)
    store = Store()
    for item in u.items:
        store.apply(item.versions[BASE])
    inc = IncrementalTranslator(check=True)
    before = inc(store.snapshot())
    older = next(
        it
        for it in u.items
        if it.key.kind == "BackendTrafficPolicy"
        and it.key.name.startswith("route-")
        and any(o.key.name == f"{it.key.name}-late" for o in u.items)
        and not any(o.key.name == f"{it.key.name}-rule" for o in u.items)  # it governs rule-0
    )
    late = ("BackendTrafficPolicy", older.key.namespace, f"{older.key.name}-late")
    status: Any = before.statuses[late]
    conds = status["ancestors"][0]["conditions"]
    assert [c["reason"] for c in conds if c["type"] == "Accepted"] == ["Conflicted"]
    store.delete(older.key)
    after = inc(store.snapshot())
    assert inc.full_translations == 1
    assert (older.key.kind, older.key.namespace, older.key.name) not in after.statuses
    status = after.statuses[late]
    conds = status["ancestors"][0]["conditions"]
    assert [c["reason"] for c in conds if c["type"] == "Accepted"] == ["Accepted"]

    def vhosts(result: Any) -> dict[str, Any]:
        return {
            vh.name: vh
            for gw in result.xds.values()
            for p in gw.ports
            for rc in [p.http, *(fc.http for fc in p.filter_chains)]
            if rc
            for vh in rc.virtual_hosts
        }

    old, new = vhosts(before), vhosts(after)
    changed = [name for name, vh in new.items() if old.get(name) is not vh]
    assert 0 < len(changed) <= 4


def test_policy_plans_incremental_equals_full() -> None:
    """The policy system (policies on Gateways, listeners, ListenerSets, routes and rules, by
    targetRefs and targetSelectors, with conflicts and overrides): plans mostly of policy
    and route changes, so that policies are settled where they reach (PolicyAttacher.reattach)
    after every kind of retargeting, still equal to a full translation."""
    base = universe("policies")
    kinds = {*_POLICY_KINDS, "HTTPRoute", "GRPCRoute", "Gateway"}
    u = Universe(base.items, tuple(i for i, it in enumerate(base.items) if it.key.kind in kinds))

    check_random_plans(u, 40, batches=(1, 1, 2, 4))


def _backends_universe() -> Universe:
    """The backends system (tests/support/backends.py): Envoy Gateway Backends of every
    endpoint type, ExternalName Services, a ReferenceGrant letting another namespace in."""
    from tests.support.backends import raws

    items = []
    for raw in raws():
        base, errors = decode(raw)
        assert base is not None, errors
        items.append(
            Item(key_of(base), (base, _variant(spec_variant, raw), _variant(metadata_variant, raw)))
        )
    kinds = ("Backend", "ReferenceGrant", "Service", "HTTPRoute")
    return Universe(tuple(items), tuple(i for i, it in enumerate(items) if it.key.kind in kinds))


def test_backends_grants_and_namespaces_incremental_equals_full() -> None:
    """Plans over the backends system mostly of Backend, ReferenceGrant, Service and route
    changes (each settled incrementally: the routes referring to what changed), still equal
    to a full translation."""
    u = _backends_universe()

    check_random_plans(u, 30)


def test_grant_namespace_and_backend_changes_take_the_incremental_path() -> None:
    """A ReferenceGrant, a Namespace's labels and a Backend changed are no full translation
    while the gateway side's fingerprint holds (each result equal to a full one)."""
    for u, kinds in (
        (bench_universe(120, 11, 0.3), ("ReferenceGrant", "Namespace")),
        (_backends_universe(), ("Backend", "ReferenceGrant")),
    ):
        d = Driver(u)
        d.translate()
        for i, it in enumerate(u.items):
            # (the certificates' grant is read by the Gateways' listeners: their fingerprint)
            if it.key.kind in kinds and it.key.namespace != "certs":
                for what in (META, SPEC, DELETE, BASE):
                    d.apply((i, what))
                    d.translate()
        assert d.translator.full_translations == 1, kinds


def _count_attachments(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the whole attachment stage runs (PolicyAttacher built)."""
    from gateweave.translate import incremental

    built = [0]
    real = incremental.PolicyAttacher

    def counted(*args: Any, **kwargs: Any) -> Any:
        built[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(incremental, "PolicyAttacher", counted)
    return built


def test_policy_and_service_changes_do_not_attach_every_policy_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A policy changed, deleted or re-created is settled where it reaches, as is a
    ReferenceGrant (the policies of the namespaces it lets in), and a Service or EndpointSlice
    change while no policy names a backend leaves the attachment alone: the whole stage runs
    once (the first translation), every result equal to a full one."""
    built = _count_attachments(monkeypatch)
    u = bench_universe(120, 11, 0.3)
    d = Driver(u)
    d.translate()
    kinds = ("EndpointSlice", "Service", "ReferenceGrant", *_POLICY_KINDS)
    picks = [
        i
        for i, it in enumerate(u.items)
        if it.key.kind in kinds and it.key.namespace != "certs"  # (a listener's: fingerprint)
    ]
    rng = random.Random(21)
    for i in rng.sample(picks, 60):
        d.apply((i, rng.choice((SPEC, META, DELETE, BASE))))
        d.translate()
    assert d.translator.full_translations == 1
    assert built == [1]


def test_a_gateway_side_change_is_a_full_translation_and_still_equal() -> None:
    u = bench_universe(40, 3)
    d = Driver(u)
    d.translate()
    gw = next(i for i, it in enumerate(u.items) if it.key.kind == "Gateway")
    d.apply((gw, SPEC))
    d.translate()
    assert d.translator.full_translations == 2
    ns = next(i for i, it in enumerate(u.items) if it.key.kind == "Namespace")
    d.apply((ns, SPEC))  # a label no selector reads: the gateway side's fingerprint holds
    d.translate()
    assert d.translator.full_translations == 2


def test_unchanged_parts_keep_their_instances() -> None:
    """What did not change is handed out again as the same objects: the xDS builder's and
    the status sink's comparisons are identity checks for it."""
    u = bench_universe(120, 11)
    store = Store()
    for item in u.items:
        store.apply(item.versions[BASE])
    inc = IncrementalTranslator()
    before = inc(store.snapshot())
    route = next(it for it in u.items if it.key.kind == "HTTPRoute")
    store.apply(route.versions[SPEC])
    after = inc(store.snapshot())
    changed = [name for name in after.xds if after.xds[name] is not before.xds[name]]
    assert len(changed) == 1
    old, new = before.xds[changed[0]], after.xds[changed[0]]
    old_vhosts = {
        vh.name: vh
        for p in old.ports
        for rc in [p.http, *(fc.http for fc in p.filter_chains)]
        if rc
        for vh in rc.virtual_hosts
    }
    new_vhosts = [
        vh
        for p in new.ports
        for rc in [p.http, *(fc.http for fc in p.filter_chains)]
        if rc
        for vh in rc.virtual_hosts
    ]
    reused = sum(1 for vh in new_vhosts if old_vhosts.get(vh.name) is vh)
    assert 0 < len(new_vhosts) - reused <= 4  # only the route's own virtual hosts are new
    key = (route.key.kind, route.key.namespace, route.key.name)
    other = [k for k in after.statuses if k != key and k[0] == "HTTPRoute"]
    assert all(after.statuses[k] is before.statuses[k] for k in other)
    assert after.statuses[key] == translate(store.snapshot()).statuses[key]


def test_check_mode_names_the_first_difference() -> None:
    u = bench_universe(40, 3)
    store = Store()
    for item in u.items:
        store.apply(item.versions[BASE])
    full = translate(store.snapshot())
    statuses = copy.deepcopy(dict(full.statuses))
    victim = sorted(statuses)[0]
    statuses[victim] = {"conditions": []}
    with pytest.raises(IncrementalMismatch, match="statuses"):
        _compare(type(full)(statuses=statuses, infra=full.infra, xds=full.xds), full)


def test_snapshots_of_another_store_are_diffed_key_by_key() -> None:
    """Without a shared change log (snapshots built by hand, or from two stores) the
    translator compares every key: still equal to a full translation."""
    u = bench_universe(40, 3)
    a, b = Store(), Store()
    for item in u.items:
        a.apply(item.versions[BASE])
        b.apply(item.versions[SPEC] if item.key.kind == "HTTPRoute" else item.versions[BASE])
    inc = IncrementalTranslator(check=True)
    inc(a.snapshot())
    inc(b.snapshot())
    inc(a.snapshot())
    assert inc.full_translations == 1


def test_a_forgotten_change_log_span_falls_back_to_comparing() -> None:
    u = bench_universe(40, 3)
    store = Store()
    store.changelog.limit = 4
    for item in u.items:
        store.apply(item.versions[BASE])
    inc = IncrementalTranslator(check=True)
    inc(store.snapshot())
    routes = [it for it in u.items if it.key.kind == "HTTPRoute"][:10]
    for item in routes:
        store.apply(item.versions[SPEC])
    inc(store.snapshot())
    store.delete(routes[0].key)
    inc(store.snapshot())
    assert inc.full_translations == 1
    assert Key("HTTPRoute", routes[0].key.namespace, routes[0].key.name) not in store


def test_a_mismatch_fails_the_translation_in_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """With check mode, a difference from a full translation is a failed translation the
    runtime counts (the conformance runner fails the case it happened in)."""
    import asyncio

    from gateweave.ir import Result
    from gateweave.runtime import Runtime
    from gateweave.translate import incremental

    u = bench_universe(40, 3)
    store = Store()
    for item in u.items:
        store.apply(item.versions[BASE])

    def wrong(snapshot: Any, options: Any) -> Result:
        full = translate(snapshot, options)
        return Result(statuses={}, infra=full.infra, xds=full.xds)

    monkeypatch.setattr(incremental, "translate_all", wrong)

    async def main() -> Runtime:
        runtime = Runtime(
            store,
            dataplane=False,
            translate_fn=IncrementalTranslator(check=True),
            status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME),
        )
        task = asyncio.get_running_loop().create_task(runtime.run())
        try:
            await runtime.wait_settled(30)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            runtime.close()
        return runtime

    runtime = asyncio.run(main())
    assert runtime.failed_translations >= 1
    assert "IncrementalMismatch" in runtime.last_translation_error
    assert runtime.last_result is None  # nothing wrong was published


def test_a_service_a_remote_jwks_names_is_read_again_when_it_changes() -> None:
    """A JWT provider's remoteJWKS backendRefs reads a Service, as an extAuth does: a change of
    that Service's endpoints reaches the JWKS cluster incrementally, equal to a full
    translation (check mode raises otherwise)."""
    from tests.translate.test_policies import base, policy

    remote = {"uri": "http://keys.ns/jwks", "backendRefs": [{"name": "keys", "port": 80}]}
    spec = {"jwt": {"providers": [{"name": "keys", "remoteJWKS": remote}]}}

    def keys(address: str) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "keys", "namespace": "ns"},
                "spec": {"ports": [{"port": 80}]},
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "keys-1",
                    "namespace": "ns",
                    "labels": {"kubernetes.io/service-name": "keys"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address]}],
                "ports": [{"port": 8080}],
            },
        ]

    store = Store()
    docs = [*base(), *keys("10.0.0.1")]
    docs.append(policy("jwt", "SecurityPolicy", target=("HTTPRoute", "r1"), spec=spec))
    for raw in docs:
        dec, errors = decode(raw)
        assert dec is not None, errors
        store.apply(dec)
    inc = IncrementalTranslator(check=True)

    def jwks_endpoints(result: Any) -> list[str]:
        return [
            e.address for c in result.xds["ns/gw"].clusters if "keys" in c.name for e in c.endpoints
        ]

    assert jwks_endpoints(inc(store.snapshot())) == ["10.0.0.1"]
    moved, errors = decode(keys("10.0.0.2")[1])
    assert moved is not None, errors
    store.apply(moved)
    assert jwks_endpoints(inc(store.snapshot())) == ["10.0.0.2"]
    assert inc.full_translations == 1
