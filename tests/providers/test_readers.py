"""A large scan's reads shared with worker processes (gateweave.providers.readers): the same
result as reading every file in the server, whatever a worker does."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from gateweave.api import decode as decode_module
from gateweave.api.kinds import KINDS
from gateweave.providers import readers
from gateweave.providers.file import FileProvider
from gateweave.providers.fileread import FileRead, StatKey, read_file
from gateweave.store import Store
from gateweave_bench.objects import generate
from tests.support.conformance_objects import all_case_files, case_raws

BROKEN = {
    "broken-syntax.yaml": "kind: HTTPRoute\nmetadata: [unclosed\n",
    "broken-repeated-key.yaml": (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n"
    ),
    "rejected-and-accepted.yaml": (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n"
        "  name: double-slash\n  namespace: default\nspec:\n  rules:\n  - matches:\n"
        "    - path:\n        type: PathPrefix\n        value: /a//b\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: fine\n"
    ),
    "defined-twice.yaml": (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: twice\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: twice\n"
    ),
    "unknown-kind.yaml": (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoot\nmetadata:\n  name: x\n"
    ),
    "empty.yaml": "",
    "with-status.yaml": (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n"
        "  name: with-status\nspec:\n  controllerName: example.com/c\nstatus:\n"
        "  conditions: []\n"
    ),
}


def _write_corpus(root: Path) -> int:
    """The bench's objects (with policies), every conformance case's objects and broken files,
    one object a file for most, a few files of many documents; how many files."""
    raws: list[dict[str, Any]] = list(generate(300, 7, 0.3).manifests)
    for case in all_case_files():
        raws.extend(case_raws(case))
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for raw in raws:  # (the cases share objects: each once, no "defined in two files")
        meta = raw.get("metadata", {})
        key = (raw["kind"], meta.get("namespace", ""), meta.get("name", ""))
        if key not in seen:
            seen.add(key)
            unique.append(raw)
    count = 0
    for i in range(0, len(unique), 3):
        if i % 60 == 0:  # some files of several documents
            chunk = unique[i : i + 3]
            (root / f"multi-{i}.yaml").write_text(yaml.safe_dump_all(chunk, sort_keys=False))
            count += 1
            continue
        for j, raw in enumerate(unique[i : i + 3], start=i):
            sub = root / f"d{j % 7}"
            sub.mkdir(exist_ok=True)
            (sub / f"o{j}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
            count += 1
    for name, text in BROKEN.items():
        (root / name).write_text(text)
    os.symlink("/etc/hostname", root / "outside.yaml")  # a link out of the directory: refused
    return count + len(BROKEN) + 1


def _assert_same(here: dict[str, FileRead], shared: dict[str, FileRead]) -> None:
    assert list(here) == list(shared)
    for path, mine in here.items():
        theirs = shared[path]
        assert (mine.stat, mine.errors, mine.problems) == (
            theirs.stat,
            theirs.errors,
            theirs.problems,
        )
        assert list(mine.objects) == list(theirs.objects), path
        for key, (decoded, source) in mine.objects.items():
            other, other_source = theirs.objects[key]
            assert source == other_source
            assert type(other.model) is type(decoded.model)
            assert other.model == decoded.model, key
            assert other.packed_parts() == decoded.packed_parts(), key
            assert other.raw == decoded.raw


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, FileRead]]]:
    root = tmp_path_factory.mktemp("corpus")
    _write_corpus(root)
    provider = FileProvider(str(root), Store(), read_workers=0)
    _, due = provider.due({})
    assert len(due) > 1000
    yield root, provider.read(due)


def test_files_read_by_workers_are_the_files_read_here(
    corpus: tuple[Path, dict[str, FileRead]],
) -> None:
    root, here = corpus
    assert any(r.errors for r in here.values()) and any(r.problems for r in here.values())
    provider = FileProvider(str(root), Store(), read_workers=2, parallel_min_files=1)
    _, due = provider.due({})
    # The server reading slowly: the workers must take a share.
    taken_here: list[str] = []

    def slow_read(path: str, stat: StatKey | None) -> FileRead:
        taken_here.append(path)
        time.sleep(0.005)
        return provider._read(path, stat)

    shared = readers.read_parallel(due, provider.root, provider._display, slow_read, 2)
    assert 0 < len(taken_here) < len(due) / 2, "the workers read most of the files"
    _assert_same(here, shared)
    # The strings the server's own decode shares between objects are shared as well by the
    # objects the workers read (one apiVersion and kind string per kind, namespaces interned).
    worker_read = [
        decoded.model
        for path, read in shared.items()
        if path not in taken_here
        for decoded, _ in read.objects.values()
    ]
    assert len(worker_read) > 500
    for model in worker_read:
        info = KINDS[model.kind]
        assert model.api_version is info.storage_api_version
        assert model.kind is info.kind
        namespace = model.metadata.namespace
        assert not namespace or namespace is sys.intern(namespace)
    # and through the provider itself
    _assert_same(here, provider.read(due))


def test_a_scan_shared_with_workers_fills_the_store_as_one_read_here(
    corpus: tuple[Path, dict[str, FileRead]],
) -> None:
    root, _ = corpus
    alone, shared = Store(), Store()
    FileProvider(str(root), alone, read_workers=0).rescan()
    FileProvider(str(root), shared, read_workers=1, parallel_min_files=1).rescan()
    keys = alone.keys()
    assert keys == shared.keys() and len(keys) > 1000
    for key in keys:
        mine, theirs = alone.get(key), shared.get(key)
        assert mine is not None and theirs is not None
        assert (mine.model, mine.raw) == (theirs.model, theirs.raw)


def _worker_running(code: str) -> type[readers._Worker]:
    class Worker(readers._Worker):
        @classmethod
        def start(cls, root: str) -> readers._Worker | None:
            return cls(
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
            )

    return Worker


@pytest.mark.parametrize(
    "code",
    [
        "import sys; sys.exit(3)",  # dies at once
        "import sys; sys.stdin.buffer.read(10); sys.exit(0)",  # dies in the middle of a request
        "import sys, os; sys.stdin.buffer.read(4); os.write(1, b'\\x00\\x00\\x00\\x02\\x91\\xc0')",
        # an answer that is not one
    ],
    ids=["exits", "dies-reading", "wrong-answer"],
)
def test_a_failing_worker_leaves_its_files_to_the_server(
    corpus: tuple[Path, dict[str, FileRead]], monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    root, here = corpus
    monkeypatch.setattr(readers, "_Worker", _worker_running(code))
    provider = FileProvider(str(root), Store(), read_workers=2, parallel_min_files=1)
    _, due = provider.due({})
    _assert_same(here, provider.read(due))


def test_a_worker_that_does_not_answer_is_stopped_and_its_batch_read_here(
    corpus: tuple[Path, dict[str, FileRead]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, here = corpus
    monkeypatch.setattr(readers, "_Worker", _worker_running("import time; time.sleep(600)"))
    monkeypatch.setattr(readers, "WORKER_GRACE_S", 0.2)
    provider = FileProvider(str(root), Store(), read_workers=1, parallel_min_files=1)
    _, due = provider.due({})
    started = time.monotonic()
    _assert_same(here, provider.read(due))
    assert time.monotonic() - started < 120


def test_no_thread_for_a_worker_leaves_its_files_to_the_server(
    corpus: tuple[Path, dict[str, FileRead]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, here = corpus
    started: list[readers._Worker] = []
    start = readers._Worker.start

    def recorded(root: str) -> readers._Worker | None:
        worker = start(root)
        if worker is not None:
            started.append(worker)
        return worker

    class NoThread(threading.Thread):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(readers._Worker, "start", staticmethod(recorded))
    monkeypatch.setattr(readers, "threading", types.SimpleNamespace(Thread=NoThread))
    provider = FileProvider(str(root), Store(), read_workers=2, parallel_min_files=1)
    _, due = provider.due({})
    _assert_same(here, provider.read(due))
    assert len(started) == 2
    assert all(w.proc.returncode is not None for w in started)  # stopped, not left running


def test_what_a_worker_cannot_hand_over_is_read_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n")
    path = str(tmp_path / "ns.yaml")
    reply = readers._reply(path, "ns.yaml", str(tmp_path))
    assert not reply.here and len(reply.objects) == 1
    read = readers._file_read(reply, (1, 2, 3))
    assert read is not None and read.stat == (1, 2, 3)
    assert read.objects == read_file(path, "ns.yaml", str(tmp_path), (1, 2, 3)).objects

    def broken(item: Any) -> Any:
        raise RuntimeError("a bug")

    # a bug in decoding: the server reads the file again (and logs and reports the bug)
    monkeypatch.setattr(readers, "decode_sourced", broken)
    assert readers._reply(path, "ns.yaml", str(tmp_path)).here
    monkeypatch.undo()
    # an object that did not pack (an integer beyond 64 bits), a model of an unknown type
    monkeypatch.setattr(decode_module.Decoded, "packed", lambda self: self)
    assert readers._reply(path, "ns.yaml", str(tmp_path)).here
    monkeypatch.undo()
    unknown = msgspec.structs.replace(reply.objects[0], model_type="nowhere.Model")
    assert readers._file_read(msgspec.structs.replace(reply, objects=[unknown]), None) is None


def test_the_number_of_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(readers.ENV_WORKERS, "0")
    assert readers.worker_count() == 0
    monkeypatch.setenv(readers.ENV_WORKERS, "2")
    assert readers.worker_count() == 2
    monkeypatch.setenv(readers.ENV_WORKERS, "many")
    assert 0 <= readers.worker_count() <= readers.MAX_WORKERS
    monkeypatch.delenv(readers.ENV_WORKERS)
    monkeypatch.setattr(readers, "_cpus", lambda: 1)
    assert readers.worker_count() == 0
    monkeypatch.setattr(readers, "_cpus", lambda: 16)
    assert readers.worker_count() == readers.MAX_WORKERS


def test_a_cgroup_quota_of_the_process_or_an_ancestor_bounds_the_workers(tmp_path: Path) -> None:
    fs = tmp_path / "cgroup"
    unit = fs / "system.slice" / "gateweave.service"
    unit.mkdir(parents=True)
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/system.slice/gateweave.service\n")
    assert readers._quota_cpus(str(proc), str(fs)) is None  # no cpu.max anywhere
    (unit / "cpu.max").write_text("max 100000\n")
    (fs / "system.slice" / "cpu.max").write_text("max 100000\n")
    assert readers._quota_cpus(str(proc), str(fs)) is None  # no quota
    (unit / "cpu.max").write_text("200000 100000\n")  # a unit's CPUQuota=200%
    assert readers._quota_cpus(str(proc), str(fs)) == 2
    (fs / "system.slice" / "cpu.max").write_text("50000 100000\n")  # its slice's, smaller
    assert readers._quota_cpus(str(proc), str(fs)) == 1
    proc.write_text("0::/\n")  # a container: its own cgroup is the root
    (fs / "cpu.max").write_text("300000 100000\n")
    assert readers._quota_cpus(str(proc), str(fs)) == 3
    proc.write_text("1:name=systemd:/\n")  # no cgroup v2
    assert readers._quota_cpus(str(proc), str(fs)) is None


def test_a_small_scan_starts_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_worker(root: str) -> None:
        raise AssertionError("a worker started for a small scan")

    monkeypatch.setattr(readers._Worker, "start", no_worker)
    for i in range(20):
        (tmp_path / f"{i}.yaml").write_text(
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n{i}\n"
        )
    store = Store()
    FileProvider(str(tmp_path), store, read_workers=3).rescan()
    assert len(store.keys()) == 20
