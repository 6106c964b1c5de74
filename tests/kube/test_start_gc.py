"""The Kubernetes provider's start: from its first lists to the runtime's freeze, the cyclic
collector stays held (a pass there would walk every object just listed); the waits between
the retries of a failed first sync are not held."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from gateweave.providers.kubernetes import KubernetesProvider
from tests.support.gcwatch import AutomaticPasses
from tests.support.kubeapi import KubeAPI, serving, write_kubeconfig
from tests.support.quarantine import GW, gateway_objects

ROUTES = 100


def _objects() -> list[dict[str, Any]]:
    """A GatewayClass, a Gateway, a Service and ROUTES HTTPRoutes to it."""
    return gateway_objects() + [
        {
            "apiVersion": GW,
            "kind": "HTTPRoute",
            "metadata": {"name": f"r{i}", "namespace": "default"},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}],
            },
        }
        for i in range(ROUTES)
    ]


async def test_no_collection_between_the_first_lists_and_the_freeze(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.unfreeze()
    api = KubeAPI(bookmark_interval=0.05)
    await api.start()
    for obj in _objects():
        api.put(obj)
    passes = AutomaticPasses()
    passes.open_at(monkeypatch, KubernetesProvider, "list_kind")  # (discovery is not held)
    try:
        with passes:
            async with serving(api, write_kubeconfig(api, str(tmp_path / "kc"))) as (runtime, _):
                for _ in range(500):  # the freeze follows the first status write
                    if gc.get_freeze_count() > 0:
                        break
                    await asyncio.sleep(0.02)
                assert gc.get_freeze_count() > 0, "not frozen"
                assert sum(1 for k in runtime.store if k.kind == "HTTPRoute") == ROUTES
    finally:
        await api.stop()
    assert passes.open
    assert passes.passes == []


async def test_a_failed_first_sync_holds_nothing_while_it_waits_to_retry(tmp_path: Path) -> None:
    """A sync whose lists fail leaves the collector as it found it, hold or not."""
    from contextlib import ExitStack

    from gateweave.kube.client import KubeClient
    from gateweave.providers import ErrorBook
    from gateweave.store import Store

    api = KubeAPI(bookmark_interval=0.05)
    await api.start()
    kubeconfig = write_kubeconfig(api, str(tmp_path / "kc"))
    await api.stop()  # nothing answers: every attempt fails
    client = await KubeClient.load(kubeconfig)
    provider = KubernetesProvider(client, Store(), ErrorBook(), backoff=(0.05, 0.1))
    assert gc.isenabled()
    with ExitStack() as hold:
        attempt = asyncio.create_task(provider.sync(hold))
        await asyncio.sleep(0.5)  # several failed attempts and waits
        assert not attempt.done()
        assert gc.isenabled(), "the collector held while the sync waits to retry"
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
    assert gc.isenabled()
    await client.close()
