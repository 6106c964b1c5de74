"""The Kubernetes provider trusts what the API server stored (issue 12): an object written in
an older version, valid there, is not dropped because the version it is read in would
refuse it; and what the API server checked on write (CEL rules, patterns) is not checked
again (issue 18). Through the API-server stand-in, which checks none of it."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
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

# Valid but for one CEL rule of HTTPRoute v1 (a path match's value must not contain '//').
BREAKS_A_RULE: dict[str, Any] = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "r", "namespace": "default"},
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

    async with _listed(tmp_path, tls_route_v1alpha2()) as (api, provider, errors):
        assert provider.paths["TLSRoute"].version == "v1"  # read in v1
        store = provider.store
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


@contextlib.asynccontextmanager
async def _listed(
    tmp_path: Path, *objects: dict[str, Any]
) -> AsyncIterator[tuple[KubeAPI, KubernetesProvider, ErrorBook]]:
    """A stand-in holding ``objects``, and the provider once it has listed them."""
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    client = await KubeClient.from_kubeconfig(write_kubeconfig(api, str(tmp_path / "kubeconfig")))
    errors = ErrorBook()
    provider = KubernetesProvider(client, Store(), errors, backoff=(0.02, 0.2))
    for obj in objects:
        api.put(obj)
    task = asyncio.create_task(provider.run())
    try:
        await asyncio.wait_for(provider.synced.wait(), 10)
        yield api, provider, errors
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
    _, refused = decode(copy.deepcopy(BREAKS_A_RULE), mode=Decoding.VALIDATE)
    assert [e.field for e in refused] == ["spec.rules[0].matches[0].path"]
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "gateweave"},
        "spec": {"controllerName": "gateweave.io/gateway-controller"},
    }
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {
            "gatewayClassName": "gateweave",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    }
    route = copy.deepcopy(BREAKS_A_RULE)
    async with _listed(tmp_path, gateway_class, gateway, route) as (_, provider, errors):
        stored = provider.store.get(Key("HTTPRoute", "default", "r"))
        assert stored is not None and errors.all() == []
        match = stored.raw["spec"]["rules"][0]["matches"][0]
        assert match["path"] == {"type": "PathPrefix", "value": "/a//b"}
        assert stored.raw["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1  # defaulted
        result = translate(provider.store.snapshot())
        parents: Any = result.statuses[("HTTPRoute", "default", "r")]["parents"]
        assert [p["parentRef"]["name"] for p in parents] == ["gw"]
