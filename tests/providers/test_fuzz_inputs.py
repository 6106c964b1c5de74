"""Fuzzing what a user (or an attacker) can write into a served directory (issue 12).

Hypothesis generates manifests and mutates them - wrong versions and kinds, unknown
fields, wrong types, deleted fields, deep nesting, alias bombs, repeated keys, huge
values, unsupported tags, binary junk, truncated and garbled text, as YAML and as JSON -
and runs each input

* through ``translate`` offline (load, strict decoding, translation), and
* through a running file provider: real files in a temporary directory, the real
  FileProvider, Store and Runtime with the real translation,

checking that nothing crashes, nothing hangs (a generous bound per input), every message
is located (``file:line``) and short, an unmutated manifest is accepted, the store holds
what the rule of :mod:`gateweave.providers.file` says (the last accepted objects when a
file is refused), and what the runtime published equals a translation of the store.

The counts are printed (and written as JSON to ``$GATEWEAVE_FUZZ_REPORT`` when set).
``GATEWEAVE_FUZZ_EXAMPLES`` sets the number of inputs per target (default 150: the suite
then takes well under a minute); e.g. ``GATEWEAVE_FUZZ_EXAMPLES=5000`` for a long run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave.api.decode import Decoded, decode_sourced
from gateweave.api.kinds import KINDS, Key
from gateweave.api.limits import MAX_MESSAGE_CHARS
from gateweave.api.load import load_text
from gateweave.offline import translate_paths
from gateweave.providers import ErrorBook
from gateweave.providers.file import FileProvider
from gateweave.runtime import Runtime
from gateweave.sinks.localstatus import LocalStatusSink
from gateweave.store import Store, key_of
from gateweave.translate import TranslateOptions, translate
from tests.support.incremental_check import incremental_translator

pytestmark = pytest.mark.timeout(600)

EXAMPLES = int(os.environ.get("GATEWEAVE_FUZZ_EXAMPLES", "150"))
PER_INPUT = 30.0  # seconds one input may take before it counts as a hang (not a speed limit)
G = "gateway.networking.k8s.io"
LOCATED = re.compile(r".+:[1-9][0-9]*")
MAX_LINE = MAX_MESSAGE_CHARS + 600  # a message, its location and its object's name

# ---------------------------------------------------------------- manifests


def _meta(name: str, ns: str | None = "default") -> dict[str, Any]:
    return {"name": name, **({"namespace": ns} if ns else {})}


BACKENDS = [{"name": "svc", "port": 80, "weight": 1}]
ROUTES = [
    {
        "apiVersion": f"{G}/v1",
        "kind": "HTTPRoute",
        "metadata": _meta("app"),
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": ["app.test"],
            "rules": [
                {
                    "matches": [
                        {
                            "path": {"type": "PathPrefix", "value": "/a"},
                            "headers": [{"name": "x", "value": "y"}],
                        }
                    ],
                    "filters": [
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]},
                        }
                    ],
                    "backendRefs": BACKENDS,
                },
                {
                    "matches": [{"path": {"type": "Exact", "value": "/b"}}],
                    "backendRefs": BACKENDS,
                },  # shared: an alias
            ],
        },
    },
    {
        "apiVersion": f"{G}/v1",
        "kind": "GRPCRoute",
        "metadata": _meta("grpc"),
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {
                    "matches": [{"method": {"service": "a.B", "method": "C"}}],
                    "backendRefs": [{"name": "svc", "port": 80}],
                }
            ],
        },
    },
    {
        "apiVersion": f"{G}/v1alpha2",
        "kind": "TLSRoute",
        "metadata": _meta("tls"),
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["tls.test"],
            "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}],
        },
    },
    {
        "apiVersion": f"{G}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": _meta("grant", "other"),
        "spec": {
            "from": [{"group": G, "kind": "HTTPRoute", "namespace": "default"}],
            "to": [{"group": "", "kind": "Service"}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("svc2"),
        "spec": {"ports": [{"name": "p", "port": 80, "targetPort": 8080}]},
    },
    {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {**_meta("svc2-1"), "labels": {"kubernetes.io/service-name": "svc2"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "p", "port": 8080, "protocol": "TCP"}],
    },
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("cm"), "data": {"a": "b"}},
    {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "Backend",
        "metadata": _meta("eg"),
        "spec": {"endpoints": [{"ip": {"address": "127.0.0.1", "port": 3000}}]},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta("web"),
        "spec": {"replicas": 1},
    },
]
BASE = [  # the rest of a working configuration, in a file of its own
    {
        "apiVersion": f"{G}/v1",
        "kind": "GatewayClass",
        "metadata": _meta("gateweave", None),
        "spec": {"controllerName": "gateweave.io/gateway-controller"},
    },
    {
        "apiVersion": f"{G}/v1",
        "kind": "Gateway",
        "metadata": _meta("gw"),
        "spec": {
            "gatewayClassName": "gateweave",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
            ],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("svc"),
        "spec": {"ports": [{"name": "p", "port": 80}]},
    },
]
ACCEPTED = yaml.safe_dump_all(
    ROUTES, sort_keys=False
)  # what the provider's fuzz file holds between inputs


@dataclass(frozen=True)
class Input:
    name: str  # the file name: its suffix says YAML or JSON
    data: bytes
    valid: bool  # unmutated: must be accepted whole
    what: str  # how it was made (for the report)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    _at(root, path[:-1])[path[-1]] = value


Draw = Callable[..., Any]

json_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


def _misspell(draw: Draw, word: str) -> str:
    i = draw(st.integers(0, max(0, len(word) - 1)))
    how = draw(st.sampled_from(["drop", "double", "case", "plural", "other"]))
    if how == "drop":
        return word[:i] + word[i + 1 :]
    if how == "double":
        return word[:i] + word[i : i + 1] * 2 + word[i + 1 :]
    if how == "case":
        return word.swapcase()
    if how == "plural":
        return word + "s"
    return draw(st.sampled_from([*KINDS, "Pod", "Deployment", "Ingress"]))


def _mutate(draw: Draw, doc: dict[str, Any]) -> str:
    """Mutate one document in place; returns what was done."""
    how = draw(
        st.sampled_from(
            [
                "apiVersion",
                "kind",
                "unknown-field",
                "typo-field",
                "junk",
                "delete",
                "huge",
                "deep",
                "tag-marker",
            ]
        )
    )
    paths = [p for p in _paths(doc) if p]
    if how == "apiVersion":
        doc["apiVersion"] = draw(
            st.sampled_from([f"{G}/v2", f"{G}/v1alpha9", "v1", "v2", f"{G}", "apps/v1"])
            | st.text(max_size=20)
        )
    elif how == "kind":
        doc["kind"] = _misspell(draw, str(doc["kind"]))
    elif how in ("unknown-field", "typo-field"):
        maps = [p for p in [(), *paths] if isinstance(_at(doc, p), dict)]
        target = _at(doc, draw(st.sampled_from(maps)))
        if how == "typo-field" and target:
            key = _misspell(draw, draw(st.sampled_from(sorted(map(str, target)))))
        else:
            key = draw(st.text(min_size=1, max_size=12))
        target[key] = draw(json_junk)
    elif how == "junk":
        _set(doc, draw(st.sampled_from(paths)), draw(json_junk))
    elif how == "delete":
        path = draw(st.sampled_from(paths))
        parent = _at(doc, path[:-1])
        del parent[path[-1]]
    elif how == "huge":
        size = draw(st.sampled_from([300, 70_000, 1_100_000]))
        _set(doc, draw(st.sampled_from(paths)), "h" * size)
    elif how == "deep":
        depth = draw(
            st.sampled_from([10, 60, 99, 100, 150])
        )  # deeper: the hostile texts (no serializer recursion)
        node: Any = "bottom"
        for i in range(depth):
            node = [node] if i % 2 else {"d": node}
        _set(doc, draw(st.sampled_from(paths)), node)
    else:
        _set(doc, draw(st.sampled_from(paths)), "@@TAG@@")
    return how


TAGS = [
    "!!binary aGk=",
    "!!python/object/apply:os.system [ls]",
    "!foo bar",
    "!!set {a: null}",
    "!!omap [a: 1]",
    "!!timestamp 2020-01-01",
    "!!int notanint",
    "!!float 1.5",
    "!!str 12",
]


def _serialize(draw: Draw, docs: list[dict[str, Any]]) -> tuple[str, str]:
    as_json = draw(st.booleans())
    if as_json:
        body: Any = (
            docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs}
        )
        text = json.dumps(body, indent=draw(st.sampled_from([None, 1, "\t"])))
        name = draw(st.sampled_from(["m.json", "m.yaml"]))  # a .yaml file may hold JSON
    else:
        text = yaml.safe_dump_all(docs, sort_keys=False)
        name = "m.yaml"
    if "@@TAG@@" in text:
        tag = draw(st.sampled_from(TAGS))
        text = (
            text.replace('"@@TAG@@"', json.dumps(tag) if as_json else tag)
            .replace("'@@TAG@@'", tag)
            .replace("@@TAG@@", tag)
        )
    return name, text


@st.composite
def manifests(draw: Draw) -> Input:
    """Valid documents, each mutated (or not), serialized as YAML or JSON."""
    docs = copy.deepcopy(
        draw(st.lists(st.sampled_from(ROUTES), min_size=1, max_size=3, unique_by=id))
    )
    done = []
    for doc in docs:
        if draw(st.booleans()):
            done.append(_mutate(draw, doc))
    name, text = _serialize(draw, docs)
    return Input(name, text.encode(), valid=not done, what="tree:" + ",".join(done or ["none"]))


@st.composite
def garbled(draw: Draw) -> Input:
    """A valid file's text, damaged."""
    docs = copy.deepcopy(
        draw(st.lists(st.sampled_from(ROUTES), min_size=1, max_size=3, unique_by=id))
    )
    name, text = _serialize(draw, docs)
    raw = text.encode()
    how = draw(
        st.sampled_from(["truncate", "repeat-line", "drop-line", "insert", "flip", "tab", "prefix"])
    )
    lines = text.splitlines(keepends=True)
    if how == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif how in ("repeat-line", "drop-line"):
        i = draw(st.integers(0, len(lines) - 1))
        lines[i : i + 1] = (
            [lines[i], lines[i]] if how == "repeat-line" else []
        )  # repeating a line: a repeated key
        raw = "".join(lines).encode()
    elif how == "insert":
        at = draw(st.integers(0, len(text)))
        raw = (text[:at] + draw(st.text(min_size=1, max_size=20)) + text[at:]).encode()
    elif how == "flip":
        buf = bytearray(raw)
        for _ in range(draw(st.integers(1, 5))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.integers(0, 255))
        raw = bytes(buf)
    elif how == "tab":
        at = draw(st.integers(0, len(text)))
        raw = (text[:at] + "\t" + text[at:]).encode()
    else:
        raw = (
            draw(
                st.sampled_from(
                    [b"[", b"{", b"- ", b"---\n", b"%YAML 1.1\n", b"\xef\xbb\xbf", b"&a ", b"*a "]
                )
            )
            + raw
        )
    return Input(name, raw, valid=False, what=f"text:{how}")


def _alias_bomb(levels: int, width: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@st.composite
def hostile(draw: Draw) -> Input:
    how = draw(
        st.sampled_from(
            ["bomb", "brackets", "braces", "block-deep", "binary", "documents", "cycle", "unicode"]
        )
    )
    if how == "bomb":
        text = _alias_bomb(draw(st.integers(2, 12)), draw(st.integers(2, 10)))
    elif how == "brackets":
        n = draw(st.sampled_from([99, 100, 101, 1000, 100_000]))
        text = "[" * n + ("]" * n if draw(st.booleans()) else "")
    elif how == "braces":
        n = draw(st.sampled_from([99, 101, 5000]))
        text = "{a: " * n + "x" + "}" * n
    elif how == "block-deep":
        n = draw(st.sampled_from([50, 101, 800]))
        text = "".join(" " * i + "k:\n" for i in range(n)) + " " * n + "v\n"
    elif how == "binary":
        return Input(
            draw(st.sampled_from(["m.yaml", "m.json"])),
            draw(st.binary(max_size=3000)),
            False,
            "hostile:binary",
        )
    elif how == "documents":
        text = "---\n".join(["a: 1"] * draw(st.integers(1, 3000)))
    elif how == "cycle":
        text = draw(
            st.sampled_from(
                [
                    "a: &x [*x]\n",
                    "a: &x {b: *x}\n",
                    "a: *undefined\n",
                    "<<: *m\n",
                    "a: &m {<<: *m}\n",
                ]
            )
        )
    else:
        text = draw(st.text(max_size=400))
    return Input(
        draw(st.sampled_from(["m.yaml", "m.json"])) if how == "unicode" else "m.yaml",
        text.encode(),
        False,
        f"hostile:{how}",
    )


INPUTS = st.one_of(manifests(), garbled(), hostile())


# ---------------------------------------------------------------- counting


@dataclass
class Counts:
    target: str
    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    unlocated: int = 0  # messages without file:line
    overlong: int = 0  # messages longer than MAX_LINE
    refused_valid: int = 0  # an unmutated manifest not accepted whole
    not_kept: int = 0  # the store not what the provider's rule says
    stale: int = 0  # published differs from a translation of the store
    kinds: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str, inp: Input, detail: str) -> None:
        if len(self.failures) < 10:
            self.failures.append(
                f"{what} [{inp.what} {inp.name}, {len(inp.data)} bytes: {inp.data[:120]!r}]: "
                f"{detail[:600]}"
            )

    def check_messages(self, inp: Input, messages: list[tuple[str, str]]) -> None:
        """(source, whole line) of every message."""
        for source, line in messages:
            if not LOCATED.fullmatch(source):
                self.unlocated += 1
                self.fail("unlocated", inp, line)
            if len(line) > MAX_LINE:
                self.overlong += 1
                self.fail("overlong", inp, line[:200])

    def start(self, inp: Input) -> None:
        self.inputs += 1
        kind = inp.what.split(":")[0]
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def bounded(self, inp: Input, call: Callable[[], Any], what: str) -> tuple[bool, Any]:
        """``call()``, which gives up after PER_INPUT seconds: (True, its result), or
        (False, None) with a hang or a crash counted."""
        try:
            return True, call()
        except TimeoutError:
            self.hangs += 1
            self.fail("hang", inp, f"{what} did not finish")
        except BaseException as exc:
            self.crashes += 1
            self.fail("crash", inp, repr(exc))
        return False, None

    def report(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("failures",)}
        return out

    def problems(self) -> int:
        return (
            self.crashes
            + self.hangs
            + self.unlocated
            + self.overlong
            + self.refused_valid
            + self.not_kept
            + self.stale
        )


def _publish(counts: Counts, capsys: pytest.CaptureFixture[str]) -> None:
    line = (
        f"fuzz {counts.target}: {counts.inputs} inputs, {counts.crashes} crashes, {counts.hangs} "
        "hangs, "
        f"{counts.unlocated} unlocated messages, {counts.overlong} overlong, "
        f"{counts.refused_valid} valid refused, "
        f"{counts.not_kept} not kept, {counts.stale} stale; by kind: "
        f"{json.dumps(dict(sorted(counts.kinds.items())))}"
    )
    with capsys.disabled():
        print("\n" + line)
    report = os.environ.get("GATEWEAVE_FUZZ_REPORT")
    if report:
        existing = json.loads(Path(report).read_text()) if Path(report).exists() else {}
        existing[counts.target] = counts.report()
        Path(report).write_text(json.dumps(existing, indent=2))


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


# ---------------------------------------------------------------- through translate


def test_fuzz_translate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counts = Counts("translate")
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump_all(BASE, sort_keys=False))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    options = TranslateOptions()
    assert (
        len(_expected_fuzz_objects(ACCEPTED, "m.yaml", {})) == len(ROUTES) - 1
    )  # and the CEL library is set up
    n = [0]

    @FUZZ_SETTINGS
    @given(INPUTS)
    def run(inp: Input) -> None:
        if counts.hangs:
            return  # the worker is stuck: nothing more can be tried
        counts.start(inp)
        n[0] += 1
        folder = tmp_path / f"in{n[0]}"
        folder.mkdir()
        target = folder / inp.name
        target.write_bytes(inp.data)
        future = pool.submit(translate_paths, [str(base), str(folder)], options)
        try:
            ok, offline = counts.bounded(inp, lambda: future.result(timeout=PER_INPUT), "translate")
        finally:
            target.unlink()
            folder.rmdir()
        if not ok:
            return
        counts.check_messages(inp, [(e.source, str(e)) for e in offline.load_errors])
        counts.check_messages(inp, [(e.source, str(e)) for e in offline.rejected])
        if inp.valid and (offline.load_errors or offline.rejected):
            counts.refused_valid += 1
            counts.fail("valid refused", inp, str([*offline.load_errors, *offline.rejected][:2]))

    try:
        run()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        _publish(counts, capsys)
    assert counts.problems() == 0, "\n".join(counts.failures)
    assert counts.inputs >= min(EXAMPLES, 50)


# ---------------------------------------------------------------- through a running file provider


def _expected_fuzz_objects(
    text: str, name: str, accepted: dict[Key, Decoded]
) -> dict[Key, Decoded]:
    """What the provider's rule says the fuzz file defines after ``text`` replaces the
    file whose accepted objects are ``accepted``."""
    loaded = load_text(text, name)
    if loaded.errors:
        return dict(accepted)
    valid: dict[Key, Decoded] = {}
    problems = False
    for item in loaded.objects:
        decoded, errors = decode_sourced(item)
        problems = problems or bool(errors)
        if decoded is None:
            continue
        key = key_of(decoded)
        if key in valid:
            problems = True
            continue
        valid[key] = decoded
    if problems:
        for key, kept in accepted.items():
            valid.setdefault(key, kept)
    return valid


def _content(raw: dict[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata") or {}
    return {
        **{k: v for k, v in raw.items() if k != "metadata"},
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "labels", "annotations")},
    }


class ProviderRig:
    """A FileProvider, Store and Runtime (real translation, no data plane) on a loop of
    their own, in a thread; ``call`` runs a coroutine there, bounded by PER_INPUT."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "base.yaml").write_text(yaml.safe_dump_all(BASE, sort_keys=False))
        (root / "m.yaml").write_text(ACCEPTED)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store, self.errors = Store(), ErrorBook()
        self.provider = FileProvider(str(root), self.store, self.errors, debounce_ms=5)
        self.runtime = Runtime(
            self.store,
            translate_fn=incremental_translator(),
            status_sink=LocalStatusSink(DEFAULT_CONTROLLER_NAME),
            dataplane=False,
            window=0.005,
            max_delay=0.05,
        )
        self.tasks = self.call(self._start())

    async def _start(self) -> list[asyncio.Task[None]]:
        await self.provider.refresh()
        return [asyncio.create_task(self.provider.run()), asyncio.create_task(self.runtime.run())]

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(PER_INPUT)

    def crashed(self) -> str | None:
        for task in self.tasks:
            if task.done():
                return repr(task.exception()) if not task.cancelled() else "cancelled"
        if self.runtime.failed_translations:
            return self.runtime.last_translation_error
        return None

    async def write(self, name: str, data: bytes) -> None:
        """Replace the fuzz file (m.yaml or m.json) with ``data`` and have it read."""
        for other in ("m.yaml", "m.json"):
            if other != name and (self.root / other).exists():
                (self.root / other).unlink()
        tmp = self.root / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.root / name)
        await self.provider.refresh()
        await self.runtime.wait_settled(PER_INPUT)

    def replace(self, name: str, data: bytes) -> None:
        self.call(self.write(name, data))

    def published_is_current(self) -> bool:
        snapshot = self.store.snapshot()
        return self.runtime.last_result == translate(snapshot, self.runtime.translation_options())

    def close(self) -> None:
        async def stop() -> None:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

        try:
            self.call(stop())
        finally:
            self.runtime.close()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def test_fuzz_file_provider(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counts = Counts("file provider")
    rig = ProviderRig(tmp_path)
    base_objects = {
        key_of(d): d
        for d in (
            decode_sourced(o)[0]
            for o in load_text((tmp_path / "base.yaml").read_text(), "b").objects
        )
        if d
    }
    accepted = _expected_fuzz_objects(ACCEPTED, "m.yaml", {})
    assert len(accepted) == len(ROUTES) - 1  # the Deployment is not read

    def check_store(inp: Input, expected: dict[Key, Decoded]) -> None:
        want = {
            k: _content(d.raw) for k, d in {**expected, **base_objects}.items()
        }  # base.yaml wins a tie
        have = {k: _content(stored.raw) for k, stored in rig.store.items()}
        if have != want:
            counts.not_kept += 1
            counts.fail(
                "store",
                inp,
                f"missing {sorted(map(str, want.keys() - have.keys()))}, "
                f"extra {sorted(map(str, have.keys() - want.keys()))}, "
                "different "
                f"{sorted(str(k) for k in want.keys() & have.keys() if want[k] != have[k])}",
            )

    @FUZZ_SETTINGS
    @given(INPUTS)
    def run(inp: Input) -> None:
        if counts.hangs or counts.crashes:
            return  # the rig is stuck or dead: nothing more can be tried
        counts.start(inp)
        for step, (name, data) in enumerate([(inp.name, inp.data), ("m.yaml", ACCEPTED.encode())]):
            ok, _ = counts.bounded(
                inp, functools.partial(rig.replace, name, data), "the provider or the runtime"
            )
            if not ok:
                return
            crash = rig.crashed()
            if crash is not None:
                counts.crashes += 1
                counts.fail("crash", inp, crash)
                return
            counts.check_messages(inp, [(e.source, str(e)) for e in rig.errors.all()])
            if step == 0:
                try:
                    text = inp.data.decode("utf-8-sig")
                except UnicodeDecodeError:
                    text = None
                before = (
                    accepted if inp.name == "m.yaml" else {}
                )  # another name: a new file (m.yaml deleted)
                check_store(
                    inp, before if text is None else _expected_fuzz_objects(text, inp.name, before)
                )
                if inp.valid and rig.errors.all():
                    counts.refused_valid += 1
                    counts.fail("valid refused", inp, str(rig.errors.all()[:2]))
            else:
                check_store(inp, accepted)  # recovery: the accepted text is back, and no error
                if rig.errors.all():
                    counts.not_kept += 1
                    counts.fail("errors left", inp, str(rig.errors.all()[:2]))
            if not rig.call(_in_loop(rig.published_is_current)):
                counts.stale += 1
                counts.fail("stale", inp, "the runtime's result is not a translation of the store")

    try:
        run()
    finally:
        rig.close()
        _publish(counts, capsys)
    assert counts.problems() == 0, "\n".join(counts.failures)
    assert counts.inputs >= min(EXAMPLES, 50)


async def _in_loop(fn: Callable[[], bool]) -> bool:
    return fn()
