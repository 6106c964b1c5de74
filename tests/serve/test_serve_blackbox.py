"""``gateweave serve`` as a black box: a real process watching a real directory that a
script fills with the files of several conformance cases, in a random order, with deletes
and rewrites. Once it settles, the admin API's objects equal what ``gateweave translate``
prints for the same directory, and ``gateweave explain`` gives the same lines from the
server as from the files."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateweave.api.decode import decode
from gateweave.api.kinds import Key
from gateweave.store import key_of
from tests.support.conformance_objects import case_raws
from tests.support.runtime import without_times
from tests.support.serveproc import ServeProcess

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
FINAL_CASES = (
    "HTTPRouteMultipleGateways.yaml",
    "TLSRouteHostnameIntersection.yaml",
    "BackendTLSPolicy.yaml",
    "ListenerSetHTTPRouting.yaml",
)
EXTRA_CASES = ("GRPCRouteListenerHostnameMatching.yaml", "UDPRouteParentRefPortAndSectionName.yaml")


# ---------------------------------------------------------------- the server process


class Server(ServeProcess):
    """``gateweave serve --no-dataplane`` on an admin port of its choosing."""

    def __init__(self, config_dir: Path) -> None:
        super().__init__("--no-dataplane", "--config-dir", str(config_dir))

    @property
    def admin_address(self) -> str:
        assert self.url is not None
        return self.url.removeprefix("http://")

    def get(self, path: str) -> httpx.Response:
        assert self.url is not None
        return httpx.get(self.url + path, headers=self.headers, timeout=5)

    def objects(self) -> list[dict[str, Any]]:
        resp = self.get("/api/objects")
        resp.raise_for_status()
        items: list[dict[str, Any]] = resp.json()["items"]
        return items


def item_key(item: dict[str, Any]) -> tuple[str, str, str]:
    meta = item.get("metadata") or {}
    return (item["kind"], meta.get("namespace", ""), meta["name"])


def settle(
    server: Server, want_keys: set[tuple[str, str, str]], timeout: float = 30
) -> list[dict[str, Any]]:
    """Poll until /readyz is 200, the objects are the ones expected and two reads 0.5 s apart are
    equal.
    """
    deadline = time.monotonic() + timeout
    previous: list[dict[str, Any]] | None = None
    while True:
        assert server.proc.poll() is None, (
            f"serve exited ({server.proc.returncode}):\n{server.log()}"
        )
        assert time.monotonic() < deadline, (
            f"the server did not settle in {timeout}s:\n{server.log()}"
        )
        ready = server.get("/readyz").status_code == 200
        items = server.objects()
        gateway_api = {item_key(i) for i in items}
        if ready and items == previous and gateway_api == want_keys:
            return items
        previous = items
        time.sleep(0.5)


# ---------------------------------------------------------------- what is written


def key_of_raw(raw: dict[str, Any]) -> Key | None:
    dec, errors = decode(raw)
    assert not errors, errors
    return None if dec is None else key_of(dec)


def objects_of(
    case_files: tuple[str, ...], skip: Collection[Key] = ()
) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for case_file in case_files:
        for raw in case_raws(case_file):
            key = key_of_raw(raw)
            if key is not None and key not in skip:
                out.setdefault(key, copy.deepcopy(raw))
    return out


def spec_changed(raw: dict[str, Any]) -> dict[str, Any]:
    """The version written first: a label and a spec change (the final one differs from it)."""
    out = copy.deepcopy(raw)
    out["metadata"].setdefault("labels", {})["gateweave.test/version"] = "first"
    spec = out["spec"]
    if out["kind"] == "Gateway":
        for listener in spec["listeners"]:
            if listener.get("protocol") in ("HTTP", "HTTPS", "TLS"):
                listener["hostname"] = "first.example.net"
                break
    else:  # HTTPRoute
        spec["hostnames"] = ["first.example.net"]
    return out


def changes_spec(raw: dict[str, Any]) -> bool:
    return spec_changed(raw)["spec"] != raw["spec"]


def final_version(raw: dict[str, Any]) -> dict[str, Any]:
    """The final version of an object written twice: the store counts its spec change, so
    it is at generation 2, which the offline translation reads from the file."""
    out = copy.deepcopy(raw)
    out["metadata"]["generation"] = 2
    return out


@dataclass
class Layout:
    """Which file holds which objects (by key) in their written versions."""

    root: Path
    files: dict[str, dict[Key, dict[str, Any]]] = field(default_factory=dict)

    def write(
        self, name: str, objects: list[dict[str, Any]], rng: random.Random, *, atomic: bool = False
    ) -> None:
        path = self.root / name
        text = yaml.safe_dump_all(objects, sort_keys=False)
        if atomic or rng.random() < 0.5:
            tmp = self.root / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, path)
        else:
            path.write_text(text)

    def keys(self) -> set[tuple[str, str, str]]:
        return {tuple(k) for objs in self.files.values() for k in objs if is_gateway_api(k)}  # type: ignore[misc]


def is_gateway_api(key: Key) -> bool:
    from gateweave.api.kinds import KINDS

    info = KINDS.get(key.kind)
    return info is not None and info.custom


def pause(rng: random.Random) -> None:
    time.sleep(rng.choice((0, 0, 0, 0.005, 0.02, 0.06)))


def phases(root: Path, rng: random.Random) -> Iterator[set[tuple[str, str, str]]]:
    """Fill ``root`` in two phases; yields the Gateway API keys expected after each, and
    waits (the caller settles the server) before going on."""
    final = objects_of(FINAL_CASES)
    extra = objects_of(EXTRA_CASES, skip=set(final))
    twice = rng.sample(
        sorted(k for k in final if k.kind in ("Gateway", "HTTPRoute") and changes_spec(final[k])), 4
    )
    late = set(rng.sample(sorted(k for k in final if k not in twice), len(final) // 10))

    keys = sorted(final) + sorted(extra)
    rng.shuffle(keys)
    n_files = rng.randint(8, 20)
    file_of = {
        k: f"obj-{rng.randrange(n_files):02d}.yaml"
        if rng.random() < 0.7
        else f"single-{i:03d}.yaml"
        for i, k in enumerate(keys)
    }

    # Phase 1: everything but the late objects, the twice-written ones in their first
    # version, the extra objects too; files in a random order, some written in two goes.
    first = Layout(root)
    for key in keys:
        if key in late:
            continue
        raw = (
            spec_changed(final[key]) if key in twice else final[key] if key in final else extra[key]
        )
        first.files.setdefault(file_of[key], {})[key] = raw
    names = list(first.files)
    rng.shuffle(names)
    for name in names:
        written = list(first.files[name].values())
        if len(written) > 1 and rng.random() < 0.3:
            first.write(
                name, rng.sample(written, rng.randint(1, len(written) - 1)), rng
            )  # a partial write first
            pause(rng)
        first.write(name, written, rng)
        pause(rng)
    yield first.keys()

    # Phase 2: the extra objects go, the late ones come, the twice-written ones get their
    # final version, some objects move between files, some files are rewritten unchanged.
    second = Layout(root)
    for key in keys:
        if key in extra:
            continue
        name = file_of[key]
        if key not in twice and rng.random() < 0.1:
            name = f"moved-{rng.randrange(3)}.yaml"
        second.files.setdefault(name, {})[key] = (
            final_version(final[key]) if key in twice else final[key]
        )
    names = sorted(set(first.files) | set(second.files))
    rng.shuffle(names)
    for name in names:
        objs = second.files.get(name)
        if objs is None:
            (root / name).unlink()
        elif first.files.get(name) != objs or rng.random() < 0.3:
            # Atomically where an object changes version: read half-written, it would be
            # deleted and created again (its generation back to 1).
            second.write(name, list(objs.values()), rng, atomic=any(k in twice for k in objs))
        pause(rng)
    yield second.keys()


# ---------------------------------------------------------------- the test


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWEAVE, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_serve_publishes_what_translate_prints(tmp_path: Path) -> None:
    seed = int(os.environ.get("GATEWEAVE_TEST_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    root = tmp_path / "config"
    root.mkdir()
    server = Server(root)
    try:
        server.wait_listening()
        settle(server, set())
        for want in phases(root, rng):
            items = settle(server, want)
        assert not server.get("/api/errors").json()["items"], f"seed {seed}"

        offline = run_cli("translate", "-f", str(root), "-o", "json", "-q")
        assert offline.returncode == 0, offline.stderr
        expected = json.loads(offline.stdout)["items"]
        assert [item_key(i) for i in items] == [item_key(i) for i in expected], f"seed {seed}"
        for got, want_item in zip(items, expected, strict=True):
            assert without_times(got) == without_times(want_item), f"seed {seed}: {item_key(got)}"
        assert any(
            i["metadata"].get("generation") == 2 for i in items
        )  # the spec changes were seen

        explained = [
            i for i in items if i["kind"] in ("Gateway", "HTTPRoute", "TLSRoute", "ListenerSet")
        ]
        targets = [item_key(i) for i in rng.sample(explained, 3)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            live = [
                pool.submit(
                    run_cli,
                    "explain",
                    k,
                    f"{ns}/{n}",
                    "--admin-address",
                    server.admin_address,
                    "--admin-token-file",
                    str(server.token_file),
                )
                for k, ns, n in targets
            ]
            files = [
                pool.submit(run_cli, "explain", k, f"{ns}/{n}", "-f", str(root))
                for k, ns, n in targets
            ]
            for target, from_server, from_files in zip(targets, live, files, strict=True):
                a, b = from_server.result(), from_files.result()
                assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
                assert a.stdout.strip() and a.stdout.splitlines() == b.stdout.splitlines(), (
                    f"seed {seed}: {target}"
                )
    finally:
        server.stop()
