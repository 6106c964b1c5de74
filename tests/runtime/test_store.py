from __future__ import annotations

import copy
from typing import Any

from gateweave.api.decode import Decoded, decode
from gateweave.api.kinds import Key
from gateweave.store import Change, Store

GW_KEY = Key("Gateway", "default", "gw")


def gateway(
    port: int = 80,
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **meta: Any,
) -> Decoded:
    raw: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default", **meta},
        "spec": {
            "gatewayClassName": "gateweave",
            "listeners": [{"name": "http", "port": port, "protocol": "HTTP"}],
        },
    }
    if labels:
        raw["metadata"]["labels"] = labels
    if status is not None:
        raw["status"] = status
    decoded, errors = decode(raw, "test")
    assert decoded is not None, errors
    return decoded


def recording(store: Store) -> list[Change]:
    changes: list[Change] = []
    store.subscribe(changes.append)
    return changes


def test_generation_create_spec_change_metadata_change() -> None:
    store = Store()
    changes = recording(store)
    store.apply(gateway())
    stored = store.get(GW_KEY)
    assert stored is not None and stored.generation == 1
    assert stored.raw["metadata"]["generation"] == 1
    assert stored.model.metadata.generation == 1

    store.apply(gateway(port=81))  # spec change
    stored = store.get(GW_KEY)
    assert stored is not None and stored.generation == 2
    assert stored.raw["metadata"]["generation"] == 2
    assert stored.model.metadata.generation == 2

    store.apply(gateway(port=81, labels={"team": "a"}))  # metadata-only change
    stored = store.get(GW_KEY)
    assert stored is not None and stored.generation == 2
    assert stored.model.metadata.labels == {"team": "a"}

    store.apply(gateway(port=80, labels={"team": "a"}))  # spec change back: still counts
    assert store.get(GW_KEY).generation == 3  # type: ignore[union-attr]
    assert [(c.op, c.model_changed) for c in changes] == [
        ("added", True),
        ("updated", True),
        ("updated", True),
        ("updated", True),
    ]


def test_generation_given_in_manifest_is_ignored_unless_authoritative() -> None:
    store = Store()
    store.apply(gateway(generation=7))
    assert store.get(GW_KEY).generation == 1  # type: ignore[union-attr]
    other = Store()
    other.apply(gateway(generation=7, resourceVersion="100"), authoritative=True)
    stored = other.get(GW_KEY)
    assert stored is not None and stored.generation == 7 and stored.model.metadata.generation == 7
    assert stored.model.metadata.resource_version == ""  # never part of what translate sees


def test_identical_reapply_is_no_change() -> None:
    store = Store()
    changes = recording(store)
    store.apply(gateway())
    store.changed.clear()
    version = store.resource_version
    assert store.apply(gateway()) is None
    assert store.apply(copy.deepcopy(gateway())) is None
    assert len(changes) == 1
    assert not store.changed.is_set()
    assert store.resource_version == version


def test_status_only_change_is_stored_but_not_a_model_change() -> None:
    store = Store()
    store.apply(gateway())
    store.changed.clear()
    changes = recording(store)
    change = store.apply(gateway(status={"conditions": []}))
    assert change is not None and not change.model_changed
    assert not store.changed.is_set()
    assert store.get(GW_KEY).raw["status"] == {"conditions": []}  # type: ignore[union-attr]
    assert store.get(GW_KEY).generation == 1  # type: ignore[union-attr]
    assert changes == [change]


def test_authoritative_resource_version_bump_alone_is_not_a_model_change() -> None:
    store = Store()
    store.apply(gateway(generation=3, resourceVersion="10"), authoritative=True)
    change = store.apply(gateway(generation=3, resourceVersion="11"), authoritative=True)
    assert change is not None and not change.model_changed
    assert store.apply(gateway(generation=3, resourceVersion="11"), authoritative=True) is None


def test_creation_timestamp_kept_or_left_empty() -> None:
    store = Store()
    store.apply(gateway(creationTimestamp="2024-05-01T00:00:00Z"))
    assert store.get(GW_KEY).model.metadata.creation_timestamp == "2024-05-01T00:00:00Z"  # type: ignore[union-attr]
    store.delete(GW_KEY)
    store.apply(gateway())
    assert store.get(GW_KEY).model.metadata.creation_timestamp == ""  # type: ignore[union-attr]


def test_delete_and_changed_event() -> None:
    store = Store()
    store.apply(gateway())
    store.changed.clear()
    assert store.delete(Key("Gateway", "default", "nope")) is None
    assert not store.changed.is_set()
    change = store.delete(GW_KEY)
    assert change is not None and change.op == "deleted"
    assert store.changed.is_set()
    assert GW_KEY not in store and len(store) == 0
    store.apply(gateway(port=90))
    assert store.get(GW_KEY).generation == 1  # type: ignore[union-attr]  # re-created


def test_snapshot_shares_unchanged_models_and_is_isolated() -> None:
    store = Store()
    store.apply(gateway())
    ns, errs = decode(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}, ""
    )
    assert ns is not None, errs
    store.apply(ns)
    first = store.snapshot()
    assert first.gateways[("default", "gw")].spec.listeners[0].port == 80
    store.apply(gateway(status={"x": 1}))  # not a model change: same model instance kept
    second = store.snapshot()
    assert second.gateways[("default", "gw")] is first.gateways[("default", "gw")]
    store.apply(gateway(port=81))
    third = store.snapshot()
    assert (
        first.gateways[("default", "gw")].spec.listeners[0].port == 80
    )  # earlier snapshot unaffected
    assert third.gateways[("default", "gw")].spec.listeners[0].port == 81
    assert third.gateways[("default", "gw")].metadata.generation == 2
    assert third.namespaces[("", "default")] is first.namespaces[("", "default")]
    store.delete(GW_KEY)
    assert store.snapshot().gateways == {} and third.gateways != {}


def test_snapshot_order_does_not_depend_on_event_order() -> None:
    def ns(name: str) -> Decoded:
        d, errs = decode({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, "")
        assert d is not None, errs
        return d

    one, two = Store(), Store()
    for name in ("b", "c", "a"):
        one.apply(ns(name))
    for name in ("a", "c", "b"):
        two.apply(ns(name))
    assert (
        list(one.snapshot().namespaces)
        == list(two.snapshot().namespaces)
        == [("", "a"), ("", "b"), ("", "c")]
    )
    one.apply(ns("0"))
    assert next(iter(one.snapshot().namespaces)) == ("", "0")
