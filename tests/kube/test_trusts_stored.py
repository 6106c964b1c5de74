"""The Kubernetes provider trusts what the API server stored (issue 12): an object written in
an older version, valid there, is not dropped because the version it is read in would
refuse it; and what the API server checked on write (CEL rules, patterns) is not checked
again (issue 18). Through the API-server stand-in, which checks none of it."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from gateweave.api.decode import Decoding, decode
from gateweave.api.kinds import Key
from gateweave.kube.client import KubeClient
from gateweave.providers import ErrorBook
from gateweave.providers.kubernetes import KubernetesProvider
from gateweave.store import Store
from gateweave.translate import translate
from tests.support.kubeapi import KubeAPI, write_kubeconfig

LEGACY = Key("TLSRoute", "default", "legacy")


def tls_route_v1alpha2(**spec: Any) -> dict[str, Any]:
    """A TLSRoute as written in v1alpha2, where hostnames are optional (v1 requires them)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1alpha2",
        "kind": "TLSRoute",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}],
            **spec,
        },
    }


async def test_an_object_stored_in_an_older_version_is_kept_when_read_in_v1(tmp_path: Path) -> None:
    # What the route looks like read as v1, and that v1 validation would refuse it.
    as_v1 = {**tls_route_v1alpha2(), "apiVersion": "gateway.networking.k8s.io/v1"}
    _, refused = decode(as_v1, mode=Decoding.VALIDATE)
    assert [e.field for e in refused] == ["spec.hostnames"]

    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    store, errors = Store(), ErrorBook()
    provider = KubernetesProvider(client, store, errors, backoff=(0.02, 0.2))
    api.put(tls_route_v1alpha2())
    task = asyncio.create_task(provider.run())
    try:
        await asyncio.wait_for(provider.synced.wait(), 10)
        assert provider.paths["TLSRoute"].version == "v1"  # read in v1
        stored = store.get(LEGACY)
        assert stored is not None and errors.all() == []
        assert (
            not stored.model.spec.hostnames
            and stored.raw["apiVersion"] == "gateway.networking.k8s.io/v1"
        )
        # defaulting still applies (backendRef weight), and a later update is followed
        assert stored.raw["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1
        api.put(tls_route_v1alpha2(rules=[{"backendRefs": [{"name": "other", "port": 443}]}]))
        await _until(lambda: _backend(store) == "other")
        assert errors.all() == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await api.stop()


def _backend(store: Store) -> str | None:
    stored = store.get(LEGACY)
    return None if stored is None else str(stored.raw["spec"]["rules"][0]["backendRefs"][0]["name"])


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_an_object_breaking_a_cel_rule_is_taken_as_the_api_server_stored_it(
    tmp_path: Path,
) -> None:
    """The stand-in stores what a real API server would refuse (a path with '//', a CEL rule of
    HTTPRoute): the provider takes it as stored, defaulted, and the translation stays total."""
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "odd", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/a//b"}}],
                    "backendRefs": [{"name": "svc", "port": 80}],
                }
            ],
        },
    }
    _, refused = decode(dict(route), mode=Decoding.VALIDATE)
    assert [e.field for e in refused] == ["spec.rules[0].matches[0].path"]

    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    store, errors = Store(), ErrorBook()
    provider = KubernetesProvider(client, store, errors, backoff=(0.02, 0.2))
    api.put(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "gateweave"},
            "spec": {"controllerName": "gateweave.io/gateway-controller"},
        }
    )
    api.put(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {
                "gatewayClassName": "gateweave",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }
    )
    api.put(route)
    task = asyncio.create_task(provider.run())
    try:
        await asyncio.wait_for(provider.synced.wait(), 10)
        stored = store.get(Key("HTTPRoute", "default", "odd"))
        assert stored is not None and errors.all() == []
        match = stored.raw["spec"]["rules"][0]["matches"][0]
        assert match["path"] == {"type": "PathPrefix", "value": "/a//b"}
        assert stored.raw["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1  # defaulted
        result = translate(store.snapshot())
        parents: Any = result.statuses[("HTTPRoute", "default", "odd")]["parents"]
        assert [p["parentRef"]["name"] for p in parents] == ["gw"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await api.stop()
