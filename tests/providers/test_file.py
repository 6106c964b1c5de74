from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateweave.api.kinds import Key
from gateweave.providers import ErrorBook
from gateweave.providers import file as file_provider
from gateweave.providers.file import FileProvider
from gateweave.store import Change, Store
from tests.support.fake_translate import SEED

GW = Key("Gateway", "default", "gw")
GATEWAY = SEED["Gateway"]


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@dataclass
class Watched:
    root: Path
    store: Store
    errors: ErrorBook
    provider: FileProvider
    changes: list[Change]

    def port(self, key: Key = GW) -> int | None:
        stored = self.store.get(key)
        return None if stored is None else stored.model.spec.listeners[0].port

    async def next_scan(self) -> None:
        """Wait until the watcher has seen something and the provider rescanned."""
        scans = self.provider.scans
        await until(lambda: self.provider.scans > scans)


@contextlib.asynccontextmanager
async def watching(root: Path) -> AsyncIterator[Watched]:
    store, errors = Store(), ErrorBook()
    changes: list[Change] = []
    store.subscribe(changes.append)
    provider = FileProvider(str(root), store, errors, debounce_ms=20)
    task = asyncio.create_task(provider.run())
    try:
        await until(lambda: provider.scans >= 2)  # the initial load and the catch-up once watching
        changes.clear()
        yield Watched(root, store, errors, provider, changes)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_create_modify_delete(tmp_path: Path) -> None:
    (tmp_path / "class.yaml").write_text(SEED["GatewayClass"])
    async with watching(tmp_path) as w:
        assert w.store.keys() == [Key("GatewayClass", "", "gateweave")]
        (tmp_path / "gw.yaml").write_text(GATEWAY)
        await until(lambda: w.port() == 80)
        stored = w.store.get(GW)
        assert stored is not None and stored.source == f"{tmp_path}/gw.yaml:1"
        (tmp_path / "gw.yaml").write_text(GATEWAY.replace("port: 80", "port: 8080"))
        await until(lambda: w.port() == 8080)
        assert w.store.get(GW).generation == 2  # type: ignore[union-attr]
        (tmp_path / "gw.yaml").unlink()
        await until(lambda: GW not in w.store)
        assert [(c.key.kind, c.op) for c in w.changes] == [
            ("Gateway", "added"),
            ("Gateway", "updated"),
            ("Gateway", "deleted"),
        ]
        assert w.errors.all() == []


async def test_subdirectories_and_ignored_files(tmp_path: Path) -> None:
    async with watching(tmp_path) as w:
        (tmp_path / ".gw.yaml.swp").write_text(GATEWAY)
        (tmp_path / "gw.yaml~").write_text(GATEWAY)
        (tmp_path / "README.md").write_text("not a manifest, but wakes the watcher\n")
        await w.next_scan()  # the rescan walks the whole tree: ignored files would be seen
        assert len(w.store) == 0
        sub = tmp_path / "team" / "a"
        sub.mkdir(parents=True)
        (sub / "gw.yaml").write_text(GATEWAY)
        await until(lambda: GW in w.store)
        shutil.rmtree(tmp_path / "team")
        await until(lambda: GW not in w.store)


async def test_malformed_file_keeps_last_good_objects_until_fixed(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text(GATEWAY)
    async with watching(tmp_path) as w:
        assert w.port() == 80
        path.write_text(GATEWAY.replace("  - name: http\n", "  - name: [http\n"))
        await until(lambda: bool(w.errors.all()))
        (err,) = w.errors.all()
        assert err.source.startswith(f"{tmp_path}/gw.yaml:")
        assert (
            int(err.source.rsplit(":", 1)[1]) >= 9
        )  # located at the broken line, not the file start
        assert w.port() == 80 and len(w.changes) == 0  # last good objects kept, nothing changed
        path.write_text(GATEWAY.replace("port: 80", "port: 81"))
        await until(lambda: w.port() == 81)
        assert w.errors.all() == []


async def test_deleting_a_malformed_file_deletes_its_last_good_objects(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text(GATEWAY)
    async with watching(tmp_path) as w:
        path.write_text("{ not yaml")
        await until(lambda: bool(w.errors.all()))
        path.unlink()
        await until(lambda: GW not in w.store)
        assert w.errors.all() == []


async def test_object_in_two_files_is_reported_and_resolved_deterministically(
    tmp_path: Path,
) -> None:
    async with watching(tmp_path) as w:
        # b.yaml first: a.yaml (the smaller path) still wins once it appears.
        (tmp_path / "b.yaml").write_text("# b\n" + GATEWAY.replace("port: 80", "port: 82"))
        await until(lambda: w.port() == 82)
        (tmp_path / "a.yaml").write_text(GATEWAY.replace("port: 80", "port: 81"))
        await until(lambda: w.port() == 81)
        (err,) = w.errors.all()
        assert (err.kind, err.namespace, err.name) == ("Gateway", "default", "gw")
        assert f"{tmp_path}/a.yaml:1" in err.message and f"{tmp_path}/b.yaml:2" in err.message
        (tmp_path / "a.yaml").unlink()
        await until(lambda: w.port() == 82)
        assert w.errors.all() == []


async def test_rejected_objects_are_errors(tmp_path: Path) -> None:
    async with watching(tmp_path) as w:
        nameless = GATEWAY.replace("  name: gw\n", "")
        (tmp_path / "bad.yaml").write_text(SEED["GatewayClass"] + "---\n" + nameless)
        await until(lambda: bool(w.errors.all()))
        (err,) = w.errors.all()
        # located at the field: metadata (line 10) lacks its name (the document starts at line 8)
        assert err.source == f"{tmp_path}/bad.yaml:10" and err.kind == "Gateway"
        assert w.store.keys() == [Key("GatewayClass", "", "gateweave")]  # the valid one is kept


async def test_rewrite_with_identical_content_publishes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text(GATEWAY)
    async with watching(tmp_path) as w:
        version = w.store.resource_version
        path.write_text(GATEWAY)
        await w.next_scan()
        path.write_text("# only a comment changed\n" + GATEWAY)
        await w.next_scan()
        assert w.changes == [] and w.store.resource_version == version
        assert w.store.get(GW).source == f"{tmp_path}/gw.yaml:1"  # type: ignore[union-attr]


def test_rescan_without_watching(tmp_path: Path) -> None:
    (tmp_path / "gw.yaml").write_text(GATEWAY)
    store = Store()
    provider = FileProvider(str(tmp_path), store)
    provider.rescan()
    assert GW in store
    provider.rescan()  # nothing changed on disk: no reload
    assert store.resource_version == 1
    (tmp_path / "gw.yaml").unlink()
    provider.rescan()
    assert GW not in store


async def test_a_rescan_with_nothing_to_read_stays_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rescan's stat pass runs on the event loop, and only files to read go to a worker: in a
    worker each stat call would wait for the GIL while the loop translates."""
    workers: list[str] = []
    to_thread = asyncio.to_thread

    async def recorded(fn: Callable[..., Any], /, *args: Any) -> Any:
        workers.append(fn.__name__)
        return await to_thread(fn, *args)

    monkeypatch.setattr(file_provider.asyncio, "to_thread", recorded)
    (tmp_path / "gw.yaml").write_text(GATEWAY)
    store = Store()
    provider = FileProvider(str(tmp_path), store)
    await provider.refresh()
    assert GW in store and workers == ["read"]
    await provider.refresh()  # nothing changed: no worker
    assert workers == ["read"] and provider.scans == 2
    (tmp_path / "gw.yaml").write_text(GATEWAY.replace("port: 80", "port: 81"))
    await provider.refresh()
    assert workers == ["read", "read"]
    assert store.get(GW).model.spec.listeners[0].port == 81  # type: ignore[union-attr]
    await provider.refresh(frozenset({str(tmp_path / "gw.yaml")}))  # a watch batch: a worker
    assert workers == ["read", "read", "scan"]
