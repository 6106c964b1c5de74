"""What a translation keeps per route is shared where routes or listeners have it alike
(docs/benchmarks.md, memory at 10,000 routes, eighth round): these tests assert the identities,
and that sharing changes no result."""

from __future__ import annotations

from typing import Any

from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.translate.attachment import Attachment
from gateweave.translate.core import run_pipeline
from gateweave.translate.incremental import IncrementalTranslator
from tests.translate.test_policies import base, models, policy
from tests.translate.test_route_sharing import objects, prefix, route, rule


def _attachments(objs: list[Any]) -> list[Attachment]:
    _, _, gws = run_pipeline(Snapshot.from_objects(objs), TranslateOptions())
    return [att for gw in gws for lc in gw.listeners for att in lc.routes]


def test_a_route_keeps_its_cluster_names_as_a_tuple() -> None:
    atts = _attachments([*objects(), route("r", rule(prefix("/a")), rule(prefix("/b")))])
    names = atts[0].translation.http_clusters
    assert type(names) is tuple
    assert len(names) == 2 and len(set(names)) == 1
    assert atts[0].translation.sorted_http


_KEY = ("HTTPRoute", "ns", "r1")


def _atts(inc: IncrementalTranslator) -> tuple[Attachment, ...]:
    return inc._entries[_KEY].atts


def test_listeners_served_alike_share_a_route_s_attachment_until_a_policy_tells_them_apart() -> (
    None
):
    """r1 attaches to both listeners of the Gateway with the same hostnames: one attachment;
    a policy with effects on one listener's routes gives that listener its own."""
    plain = models(base())
    inc = IncrementalTranslator(check=True)
    got = inc(Snapshot.from_objects(plain))
    assert got == translate(Snapshot.from_objects(plain), TranslateOptions())
    one, two = _atts(inc)
    assert one is two
    assert inc._entries[_KEY].held is one  # (the attachment alone, no tuple)
    timeout = {"timeout": {"http": {"requestTimeout": "5s"}}}
    governed = [*plain, *models([policy("lp", section="http", spec=timeout)])]
    got = inc(Snapshot.from_objects(governed))
    assert got == translate(Snapshot.from_objects(governed), TranslateOptions())
    one, two = _atts(inc)
    assert one is not two
    assert inc._entries[_KEY].held == (one, two)
    assert (one.effects is None) != (two.effects is None)
    # each listener lists its own
    lcs = [lc for gw in inc._gws for lc in gw.all_listeners()]
    held = {id(a) for lc in lcs for a in lc.routes if a.translation is one.translation}
    assert held == {id(one), id(two)}
    got = inc(Snapshot.from_objects(plain))
    assert got == translate(Snapshot.from_objects(plain), TranslateOptions())


def test_a_route_keeps_its_clusters_as_a_tuple_each_once() -> None:
    atts = _attachments([*objects(), route("r", rule(prefix("/a")), rule(prefix("/b")))])
    clusters = atts[0].translation.clusters
    assert type(clusters) is tuple
    assert [cl.name for cl in clusters] == [atts[0].translation.http_clusters[0]]


def test_a_domain_served_by_one_attachment_holds_it_alone() -> None:
    plain = models(base())
    inc = IncrementalTranslator(check=True)
    inc(Snapshot.from_objects(plain))
    one = _atts(inc)[0]
    buckets = [b for by_domain in inc._domain_atts.values() for b in by_domain.values()]
    assert buckets
    assert any(b is one for b in buckets)
    assert not any(type(b) is tuple and len(b) < 2 for b in buckets)
