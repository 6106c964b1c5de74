"""gateweave bench: the generated objects are deterministic, valid and realistic; the command
reports every figure.

No timing is asserted here: speed is what the command measures.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import msgspec
import pytest

from gateweave.gcpause import gc_paused
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave_bench.objects import (
    changed_endpoint_slice,
    changed_route,
    generate,
    referenced_slices,
)
from gateweave_bench.run import KEYS, Pipeline, check_targets, decode_all


def test_generation_is_deterministic_and_seeded() -> None:
    a = msgspec.json.encode(generate(120).manifests)
    assert a == msgspec.json.encode(generate(120).manifests)
    assert a != msgspec.json.encode(generate(120, seed=8).manifests)


def test_every_generated_object_decodes_and_every_kind_is_there() -> None:
    objects = generate(300)
    decoded = decode_all(objects.manifests)  # raises on any rejected object
    kinds = Counter(d.model.kind for d in decoded)
    assert kinds["HTTPRoute"] == 300
    assert kinds["GatewayClass"] == 1
    for kind in ("Gateway", "Service", "EndpointSlice", "ReferenceGrant", "Namespace", "Secret"):
        assert kinds[kind] >= 2, kind
    assert len(
        {(d.model.kind, d.model.metadata.namespace, d.model.metadata.name) for d in decoded}
    ) == len(decoded)


def test_generated_system_is_valid_every_route_attaches_and_resolves() -> None:
    objects = generate(200)
    snapshot_objects = [d.model for d in decode_all(objects.manifests)]
    result = translate(Snapshot.from_objects(snapshot_objects))
    statuses: dict[tuple[str, str, str], Any] = dict(result.statuses)
    routes = {k: v for k, v in statuses.items() if k[0] == "HTTPRoute"}
    assert len(routes) == 200
    for key, status in routes.items():
        for parent in status["parents"]:
            conds = {c["type"]: c["status"] for c in parent["conditions"]}
            assert conds == {"Accepted": "True", "ResolvedRefs": "True"}, key
    gateways = [v for k, v in statuses.items() if k[0] == "Gateway"]
    assert gateways and all(
        {c["type"]: c["status"] for c in gw["conditions"]}["Programmed"] == "True"
        for gw in gateways
    )
    for gw in result.xds.values():
        protocols = {p.protocol for p in gw.ports}
        assert protocols == {"HTTP", "TLS"}
        tls = next(p for p in gw.ports if p.protocol == "TLS")
        assert all(fc.tls is not None for fc in tls.filter_chains)
        assert any(len(c.endpoints) >= 3 for c in gw.clusters)


def test_generated_policies_are_accepted_but_the_younger_of_two() -> None:
    """``policies``: every policy decodes and is Accepted, but the younger of two on one route
    (Conflicted); without it, the objects are those of before (the figures stay comparable)."""
    plain = generate(200)
    objects = generate(200, policies=0.3)
    kinds = ("BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy")
    assert [
        m for m in objects.manifests if m["kind"] not in kinds and m["kind"] != "HTTPRoute"
    ] == [m for m in plain.manifests if m["kind"] != "HTTPRoute"]
    decoded = decode_all(objects.manifests)
    assert {
        kind: n for kind, n in Counter(d.model.kind for d in decoded).items() if kind in kinds
    } == {
        "BackendTrafficPolicy": 2 + 67 + 23 + 17,  # 2 Gateways; routes 0, 3, 6...
        "ClientTrafficPolicy": 2,
        "SecurityPolicy": 2 + 34,
    }
    result = translate(Snapshot.from_objects([d.model for d in decoded]))
    statuses: dict[tuple[str, str, str], Any] = dict(result.statuses)
    for key, status in statuses.items():
        if key[0] not in kinds:
            continue
        reasons = {
            c["reason"]
            for e in status["ancestors"]
            for c in e["conditions"]
            if c["type"] == "Accepted"
        }
        assert reasons == ({"Conflicted"} if key[2].endswith("-late") else {"Accepted"}), key
    routes = [d.model for d in decoded if d.model.kind == "HTTPRoute"]
    assert all(rule.name == f"rule-{j}" for r in routes for j, rule in enumerate(r.spec.rules))


def test_changes_reach_a_new_xds_snapshot() -> None:
    objects = generate(60)
    pipeline = Pipeline(decode_all(objects.manifests), TranslateOptions())
    before = dict(pipeline.nodes)
    changed = pipeline.change(changed_route(objects, 5, 1))
    assert len(changed) == 1
    assert pipeline.nodes[changed[0]].version != before[changed[0]].version
    assert pipeline.change(changed_route(objects, 5, 1)) == []  # the same object again: nothing
    eps = referenced_slices(objects)
    assert eps
    assert pipeline.change(changed_endpoint_slice(objects, eps[0], 1))


def test_translate_pauses_the_collector_and_restores_it() -> None:
    objects = [d.model for d in decode_all(generate(20).manifests)]
    snap = Snapshot.from_objects(objects)
    assert gc.isenabled()
    translate(snap)
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            translate(snap)
        assert not gc.isenabled()  # still inside the outer pause
    assert gc.isenabled()
    gc.disable()
    try:
        translate(snap)
        assert not gc.isenabled()  # a collector turned off by the application stays off
    finally:
        gc.enable()


def test_bench_command_outputs_every_figure() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateweave.cli",
            "bench",
            "--routes",
            "50",
            "--latency-samples",
            "3",
            "--gateways",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [row["routes"] for row in report["results"]] == [50]
    row = report["results"][0]
    assert set(KEYS) <= set(row)
    for key in ("decode_s", "load_s", "translate_s", "change_s", "endpoints_change_s", "rss_mb"):
        assert isinstance(row[key], float) and row[key] > 0, key
    assert row["burst_translations"] >= 1
    assert row["objects"] > 50
    # measured at every route count (a real Envoy serving the 50 routes)
    assert 0 < row["event_to_envoy_p50_ms"] <= row["event_to_envoy_p99_ms"], report["notes"]
    # and serve's cold start on the row's objects, one file each: started as a command -> every
    # Gateway Programmed, which takes longer than parsing the files alone
    assert row["cold_start_s"] > row["yaml_floor_s"] > 0, report["notes"]
    # and the Kubernetes provider's: the stand-in's lists -> the first status write
    assert row["kube_cold_start_s"] > row["kube_list_decode_s"] > 0, report["notes"]
    assert "first status write" in report["notes"]["kube_cold_start at 50 routes"]
    assert {"nproc", "cpu", "python"} <= set(report["machine"])
    assert "--routes 50" in report["command"]
    # the many Gateways row: serve and its Envoys, one Envoy per Gateway and one for a merged class
    many = report["many_gateways"]
    assert (many["gateways"], many["unmerged"]["envoys"], many["merged"]["envoys"]) == (3, 3, 1)
    for mode in ("unmerged", "merged"):
        assert (
            abs(many[mode]["rss_mb"] - many[mode]["serve_rss_mb"] - many[mode]["envoys_rss_mb"])
            < 0.2
        )
        assert many[mode]["programmed_s"] > 0 and many[mode]["envoys_rss_mb"] > 0
    assert any(c["target"] == "merged / unmerged total RSS" for c in report["checks"])


def test_bench_command_rejects_bad_counts() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gateweave.cli", "bench", "--routes", "ten"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--routes" in proc.stderr


def test_targets_are_judged_on_the_rows_they_apply_to() -> None:
    row_1k = {
        "routes": 1000,
        "decode_s": 0.01,
        "translate_s": 0.05,
        "change_s": 0.01,
        "endpoints_change_s": 0.01,
        "burst_translations": 2,
        "rss_mb": 80.0,
        "event_to_envoy_p99_ms": 99.9,
    }
    row_10k: dict[str, float | None] = {
        "routes": 10000,
        "decode_s": 0.1,
        "load_s": 0.45,
        "translate_s": 0.31,
        "change_s": 0.004,
        "endpoints_change_s": 0.02,
        "burst_translations": 3,
        "rss_mb": 300.0,
        "event_to_envoy_p99_ms": 150.0,
    }
    checks = {(c["target"], c["routes"]): c["ok"] for c in check_targets([row_1k, row_10k])}
    assert checks == {
        ("load_s / decode_s", 10000): True,  # 4.5 x
        ("translate_s / decode_s", 10000): False,  # 3.1 x
        ("change_s / translate_s", 10000): True,
        ("endpoints_change_s / translate_s", 10000): False,  # 6.5% > 5%
        ("burst_translations", 1000): True,
        ("burst_translations", 10000): False,
        ("event_to_envoy_p99_ms", 1000): True,
        ("rss_mb", 1000): True,
        ("event_to_envoy_p99_ms growth", 10000): False,  # 150 ms > 1.5 x 99.9 ms
    }
    row_10k["event_to_envoy_p99_ms"] = 149.0
    growth = [
        c for c in check_targets([row_1k, row_10k]) if c["target"] == "event_to_envoy_p99_ms growth"
    ]
    assert [c["ok"] for c in growth] == [True]
    row_10k["event_to_envoy_p99_ms"] = None  # not measured: not judged
    assert not [
        c for c in check_targets([row_1k, row_10k]) if c["target"] == "event_to_envoy_p99_ms growth"
    ]
    row_10k.update(cold_start_s=3.1, yaml_floor_s=1.0)
    assert [
        c["ok"]
        for c in check_targets([row_1k, row_10k])
        if c["target"] == "cold_start_s / yaml_floor_s"
    ] == [False]
    row_10k.update(cold_start_s=2.9)
    assert [
        c["ok"]
        for c in check_targets([row_1k, row_10k])
        if c["target"] == "cold_start_s / yaml_floor_s"
    ] == [True]
    kube = "kube_cold_start_s / kube_list_decode_s"
    row_10k.update(kube_cold_start_s=0.62, kube_list_decode_s=0.2)
    assert [c["ok"] for c in check_targets([row_1k, row_10k]) if c["target"] == kube] == [False]
    row_10k.update(kube_cold_start_s=0.58)
    assert [c["ok"] for c in check_targets([row_1k, row_10k]) if c["target"] == kube] == [True]


def test_split_times_every_stage_of_a_translation_and_of_a_change(capsys: Any) -> None:
    from gateweave_bench import split

    assert split.main(["--routes", "30", "--repeat", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["full_translation_s"]) == set(split.FULL)
    assert set(out["route_change_ms"]) == set(split.CHANGE)
    assert out["full_translation_s"]["routes"] > 0
    assert out["route_change_ms"]["translate"] > 0 and out["route_change_ms"]["xds_snapshot"] > 0


def test_split_lines_profiles_the_named_functions_line_by_line() -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, GATEWEAVE_NATIVE="0")  # line_profiler traces the Python sources
    args = [
        sys.executable,
        "-m",
        "gateweave_bench.split",
        "--routes",
        "20",
        "--lines",
        "gateweave.translate.routes.judge_route",
        "--lines",
        "gateweave.translate.parentrefs.ParentIndex.resolve",
    ]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Function: judge_route" in done.stdout and "Function: ParentIndex.resolve" in done.stdout
    # Rows are "line-number hits time per-hit %time source": judge_route's first statements ran
    # once per route.
    hits = [
        int(cols[1])
        for cols in map(str.split, done.stdout.splitlines())
        if len(cols) > 4 and cols[0].isdigit() and cols[1].isdigit()
    ]
    assert 20 in hits


def test_memory_breakdown_reports_every_stage_and_holder(capsys: Any) -> None:
    from gateweave_bench import memory

    assert memory.main(["--routes", "100", "--trace", "--top", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["stages"]) == ["start", "objects", "store", "translation", "xds"]
    assert all(s["peak_mb"] >= s["rss_mb"] > 0 for s in out["stages"].values())
    # the store and the translator each hold something of their own; the heap grows per step
    holders = out["holders"]
    assert set(holders) == {"xds_snapshots", "result", "translator", "store", "left"}
    assert holders["store"] > 0 and holders["translator"] > 0 and holders["xds_snapshots"] > 0
    traced = [s["traced_mb"] for s in out["stages"].values()]
    assert traced[0] < traced[2] < traced[3] <= traced[4]
    assert len(out["lines"]) == 5 and all(":" in site["where"] for site in out["lines"])


def test_load_option_reports_decode_and_load_alone(capsys: Any) -> None:
    from gateweave_bench import run

    assert run.main(["--load", "30", "--repeat", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["routes"] == 30
    assert out["load_s"] > 0 and out["decode_s"] > 0
    assert out["load_over_decode"] > 0 and out["loadavg"] >= 0


def test_the_load_keeps_each_objects_model_and_frees_its_json_inside_the_pause() -> None:
    """``load_s``'s work: every object validated and converted (a rejected one is an error);
    what it keeps is the models, as a provider keeps them (besides their packed stored form),
    so the collector's pass when it is back on walks no JSON tree of the batch."""
    from gateweave_bench import run

    manifests = generate(40).manifests
    blobs = [msgspec.json.encode(raw) for raw in manifests]
    models = run._load(blobs)
    assert models == [d.model for d in decode_all(manifests)]
    tracked_dicts = sum(1 for o in gc.get_objects() if type(o) is dict)
    more = run._load(blobs * 5)
    assert len(more) == 5 * len(blobs)
    # (the kept models hold no dict: the batch's JSON trees, 5 x 40 objects' worth, are gone)
    assert sum(1 for o in gc.get_objects() if type(o) is dict) < tracked_dicts + 50
    route = next(raw for raw in manifests if raw["kind"] == "HTTPRoute")
    bad = msgspec.json.encode({**route, "spec": {"parentRefs": "not a list"}})
    with pytest.raises(run.BenchError):
        run._load([bad])


def test_translate_option_reports_decode_and_translate_alone(capsys: Any) -> None:
    from gateweave_bench import run

    assert run.main(["--translate", "30", "--repeat", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["routes"] == 30
    assert out["translate_s"] > 0 and out["decode_s"] > 0
    assert out["translate_over_decode"] > 0 and min(out["loadavg"]) >= 0
    assert out["translation"]


def test_instructions_reads_cachegrinds_total() -> None:
    from gateweave_bench.instructions import instructions_executed

    out = "==12== Cachegrind\n==12== \n==12== I   refs:      16,136,962,400\n"
    assert instructions_executed(out) == 16_136_962_400
    with pytest.raises(ValueError):
        instructions_executed("==12== no summary\n")


def test_kube_objects_counts_one_envoy_per_gateway_and_one_for_a_merged_class() -> None:
    """gateweave_bench.kubeobjects: what the Kubernetes data plane creates for N Gateways."""
    from gateweave_bench.kubeobjects import measure

    report = measure(3)
    per, merged = report["per_gateway"], report["merged"]
    kinds = ("ConfigMap", "Deployment", "Secret", "Service", "ServiceAccount")
    assert per["objects"] == dict.fromkeys(kinds, 3) and per["envoy_deployments"] == 3
    assert merged["objects"] == dict.fromkeys(kinds, 1) and merged["envoy_deployments"] == 1
    assert report["objects_ratio"] == round(5 / 15, 4)


def test_kube_status_reports_a_publications_work_with_and_without_a_change(capsys: Any) -> None:
    from gateweave_bench import kubestatus

    assert kubestatus.main(["40", "--changes", "2"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["routes"] == 40 and answer["statuses"] > 40
    assert answer["unchanged_ms"] > 0 and answer["route_change_ms"] > 0
