"""Replay conformance cases (FORMAT.md) against a live gateweave: Envoy, echo backends, traffic.

The runner runs ``gateweave serve`` in-process with the host data plane on a temporary
config directory (one file per object), starts an echo replica per Deployment replica
(:mod:`gateweave_conformance.backends`) and publishes their EndpointSlices, applies the
suite's base manifests and generated TLS material once, then for each case applies its
manifests, replays its steps (status steps against the admin API's ``/api/objects`` with
:mod:`gateweave_conformance.expect`, traffic steps with :mod:`gateweave_conformance.traffic`)
and removes what it applied, waiting until the case's Gateways' Envoys are gone.

One line per case (PASS / FAIL with the first unmet expectation / SKIP with why), then
``N passed, N failed, N skipped``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import ipaddress
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateweave import DEFAULT_CONTROLLER_NAME, __version__
from gateweave.api.decode import decode
from gateweave.api.kinds import KINDS, Key, lookup
from gateweave_conformance import clientsteps, generated, tlsgen, traffic
from gateweave_conformance import expect as ex
from gateweave_conformance import manifests as mf
from gateweave_conformance import report as rp
from gateweave_conformance.backends import Backends
from gateweave_conformance.cases import (
    Case,
    CaseError,
    ObjectRef,
    Step,
    case_files,
    load_case,
    parse_step,
)
from gateweave_conformance.offline import ObjKey, creation_timestamp, feature_skip, merge_patch

EXPECT_TIMEOUT = 60.0
SYNC_TIMEOUT = 15.0
ENVOY_GONE_TIMEOUT = 30.0
POLL = 0.1


class RunnerError(Exception):
    """A step or setup action that cannot be carried out."""


@dataclass
class RunnerOptions:
    cases_dir: Path
    manifests_dir: Path
    run: str | None = None
    skip_tests: str | None = None
    supported_features: frozenset[str] | None = None
    report: Path | None = None
    known_failures: dict[str, str] = field(default_factory=dict)
    controller_name: str = DEFAULT_CONTROLLER_NAME
    gateway_class_name: str = mf.DEFAULT_GATEWAY_CLASS
    address_pool: str = "127.10.0.0/16"  # Gateway addresses (standalone pool)
    backend_prefix: str = "127.20"  # echo replicas get <prefix>.x.y
    work_dir: Path | None = None
    keep_work_dir: bool = False
    check_incremental: bool = False  # gateweave's RuntimeSettings.check_incremental (CI sets it)
    out: Callable[[str], None] = print


@dataclass
class CaseResult:
    name: str
    outcome: str  # PASS | FAIL | SKIP
    message: str = ""
    seconds: float = 0.0
    features: tuple[str, ...] = ()
    known: str = ""  # the reason, when the case is a known failure

    def line(self) -> str:
        if self.outcome == "PASS":
            note = f" (was listed as a known failure: {self.known})" if self.known else ""
            return f"PASS {self.name} ({self.seconds:.1f}s){note}"
        if self.outcome == "FAIL":
            note = f" [known failure: {self.known}]" if self.known else ""
            return f"FAIL {self.name}: {self.message}{note}"
        return f"SKIP {self.name}: {self.message}"


def summary(results: Iterable[CaseResult]) -> str:
    results = list(results)
    n = {o: sum(1 for r in results if r.outcome == o) for o in ("PASS", "FAIL", "SKIP")}
    return f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped"


def usable_address(pool: str) -> str:
    """A static address inside the pool that dynamic assignment
    reaches last (x.y.255.1 in a /16).
    """
    net = ipaddress.ip_network(pool, strict=False)
    offset = net.num_addresses - 255 if net.num_addresses > 512 else net.num_addresses // 2
    return str(net.network_address + offset)


def _key_str(key: ObjKey) -> str:
    kind, ns, name = key
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def key_of(raw: dict[str, Any]) -> ObjKey:
    kind = str(raw.get("kind") or "")
    meta = raw.get("metadata") or {}
    info = KINDS.get(kind)
    namespaced = info.namespaced if info else kind not in ("Namespace", "ClusterRole")
    ns = str(meta.get("namespace") or "default") if namespaced else ""
    return kind, ns, str(meta.get("name") or "")


def _content(raw: dict[str, Any]) -> Any:
    meta = raw.get("metadata") or {}
    return (
        {k: v for k, v in raw.items() if k not in ("metadata", "status")},
        meta.get("labels") or {},
        meta.get("annotations") or {},
    )


def _read_by_gateweave(raw: dict[str, Any]) -> bool:
    return lookup(str(raw.get("apiVersion") or ""), str(raw.get("kind") or "")) is not None


class ConfigFiles:
    """The applied objects, one file each in the watched directory (others only in memory)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self._seq = 0
        # The creation clock (as the API server stamps creationTimestamp): objects created in
        # one batch tie, as they do upstream within a second; a later batch is strictly newer.
        self.tick = 0

    def next_batch(self) -> None:
        self.tick += 60

    def path(self, key: ObjKey) -> Path:
        kind, ns, name = key
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{kind}.{ns or '_'}.{name}")
        if len(safe) > 120:  # file names are limited (255 bytes); names may be up to 253
            safe = f"{safe[:100]}-{hashlib.sha256('/'.join(key).encode()).hexdigest()[:16]}"
        return self.root / f"{safe}.yaml"

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def put(self, raw: dict[str, Any]) -> ObjKey:
        key = key_of(raw)
        if not key[2]:
            raise RunnerError(f"{key[0]} without metadata.name")
        body = {k: v for k, v in raw.items() if k != "status"}
        meta = dict(body.get("metadata") or {})
        if key[1]:
            meta["namespace"] = key[1]
        previous = self.objects.get(key)
        created = (previous or {}).get("metadata", {}).get("creationTimestamp") or meta.get(
            "creationTimestamp"
        )
        meta["creationTimestamp"] = created or creation_timestamp(self.tick)
        body["metadata"] = meta
        if _read_by_gateweave(body):
            _, errors = decode(body, _key_str(key))
            if errors:
                raise RunnerError(
                    f"apply {_key_str(key)}: rejected: " + "; ".join(str(e) for e in errors)
                )
            self._seq += 1
            tmp = self.root / f".tmp-{self._seq}"
            tmp.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
            os.replace(tmp, self.path(key))
        self.objects[key] = body
        return key

    def remove(self, key: ObjKey) -> None:
        if self.objects.pop(key, None) is None:
            raise RunnerError(f"delete: {_key_str(key)} not found")
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    def all(self) -> list[dict[str, Any]]:
        return list(self.objects.values())


class _Env:
    """What traffic steps need from the runner (traffic.Env)."""

    def __init__(self, runner: LiveRunner) -> None:
        self.runner = runner
        self._cert_files: dict[str, tuple[str, str]] = {}

    async def target(self, gateway: str, listener: str | None, default_port: int) -> traffic.Target:
        rt = self.runner.runtime
        assert rt is not None
        ns, _, name = gateway.partition("/")
        status = rt.status_sink.get(Key("Gateway", ns, name)) or {}
        addresses = status.get("addresses") or []
        if not addresses or not addresses[0].get("value"):
            raise traffic.NotYet(f"Gateway {gateway} has no status.addresses yet")
        address = str(addresses[0]["value"])
        if not listener:
            return traffic.Target(address, default_port)
        stored = rt.store.get(Key("Gateway", ns, name))
        if stored is None:
            raise traffic.NotYet(f"Gateway {gateway} not found")
        for entry in (stored.raw.get("spec") or {}).get("listeners") or []:
            if entry.get("name") == listener:
                return traffic.Target(address, int(entry["port"]))
        for key, obj in rt.store.items():
            if key.kind != "ListenerSet":
                continue
            spec = obj.raw.get("spec") or {}
            parent = spec.get("parentRef") or {}
            if parent.get("name") == name and (parent.get("namespace") or key.namespace) == ns:
                for entry in spec.get("listeners") or []:
                    if entry.get("name") == listener:
                        return traffic.Target(address, int(entry["port"]))
        raise traffic.StepFailed(f"Gateway {gateway} has no listener {listener!r}")

    def trusted_pem(self, ref: str) -> str:
        ns, _, name = ref.partition("/")
        secret = self.runner.files.get("Secret", ns, name)
        if secret is not None:
            return base64.b64decode((secret.get("data") or {}).get("tls.crt", "")).decode()
        cm = self.runner.files.get("ConfigMap", ns, name)
        if cm is not None and (cm.get("data") or {}).get("ca.crt"):
            return str(cm["data"]["ca.crt"])
        raise traffic.StepFailed(
            f"server_certificate {ref}: no Secret with tls.crt nor ConfigMap with ca.crt"
        )

    def client_cert(self, ref: str) -> tuple[str, str]:
        ns, _, name = ref.partition("/")
        secret = self.runner.files.get("Secret", ns, name)
        if secret is None:
            raise traffic.StepFailed(f"client_cert {ref}: Secret not found")
        data = secret.get("data") or {}
        crt, key = (
            base64.b64decode(data.get("tls.crt", "")),
            base64.b64decode(data.get("tls.key", "")),
        )
        cached = self._cert_files.get(ref)
        if cached and Path(cached[0]).read_bytes() == crt and Path(cached[1]).read_bytes() == key:
            return cached
        base = self.runner.work / "client-certs"
        base.mkdir(exist_ok=True)
        n = len(self._cert_files)
        crt_path, key_path = base / f"{n}.crt", base / f"{n}.key"
        crt_path.write_bytes(crt)
        key_path.write_bytes(key)
        self._cert_files[ref] = (str(crt_path), str(key_path))
        return self._cert_files[ref]

    def mirror_logs(self, namespace: str, name: str) -> list[list[str]]:
        return [r.echo.log_lines for r in self.runner.backends.pods_of(namespace, name)]


class LiveRunner:
    def __init__(self, options: RunnerOptions) -> None:
        self.options = options
        self.subs = mf.Substitutions(
            gateway_class_name=options.gateway_class_name,
            controller_name=options.controller_name,
            usable_addresses=(mf.Address("IPAddress", usable_address(options.address_pool)),),
        )
        self.ctx = ex.ExpectContext(options.controller_name, options.gateway_class_name)
        self.work = Path("/nonexistent")
        self.files = ConfigFiles(self.work)
        self.backends = Backends(options.backend_prefix)
        self.runtime: Any = None
        self.admin: Any = None
        self.http: httpx.AsyncClient | None = None
        self.env = _Env(self)
        self.base: dict[ObjKey, dict[str, Any]] = {}
        self.claimed: frozenset[str] = frozenset()
        self._stop = asyncio.Event()
        self._serve_task: asyncio.Task[None] | None = None
        self._slices: set[ObjKey] = set()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        from gateweave import app

        if self.options.work_dir is not None:
            self.work = self.options.work_dir
            self.work.mkdir(parents=True, exist_ok=True)
        else:
            self.work = Path(tempfile.mkdtemp(prefix="gateweave-conformance-"))
        config = self.work / "config"
        config.mkdir(exist_ok=True)
        self.files = ConfigFiles(config)
        objects = [mf.gateway_class(self.subs)]
        objects += [
            s.obj for s in mf.load_file(self.options.manifests_dir, mf.BASE_MANIFESTS, self.subs)
        ]
        objects += tlsgen.builtin().manifests()
        for obj in objects:
            self.files.put(obj)
        problems = await self.backends.sync(self.files.all(), self.files.get)
        if problems:
            raise RunnerError("base backends: " + "; ".join(problems))
        self._write_slices()
        self.base = dict(self.files.objects)

        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_started(running: app.App) -> None:
            self.runtime, self.admin = running.runtime, running.admin
            if not started.done():
                started.set_result(None)

        settings = app.Settings(
            provider=app.FileSettings(str(config)),
            dataplane=app.HostDataplane(state_dir=str(self.work / "state")),
            controller_name=self.options.controller_name,
            address_pool=self.options.address_pool,
            admin=app.AdminSettings("127.0.0.1:0"),
            runtime=app.RuntimeSettings(check_incremental=self.options.check_incremental),
        )
        self._serve_task = asyncio.create_task(
            app.run(settings, app.Hooks(stop=self._stop, on_started=on_started))
        )
        done, _ = await asyncio.wait(
            [started, self._serve_task], timeout=60, return_when=asyncio.FIRST_COMPLETED
        )
        if self._serve_task in done:
            self._serve_task.result()
            raise RunnerError("gateweave serve stopped during start")
        if not started.done():
            raise RunnerError("gateweave serve did not start within 60s")
        self.http = httpx.AsyncClient(base_url=self.admin.url, timeout=10.0, trust_env=False)
        self.claimed = await self._claimed_features()

    async def close(self) -> None:
        self._stop.set()
        if self._serve_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._serve_task, 30)
        if self.http is not None:
            await self.http.aclose()
        await self.backends.close()
        if self.options.work_dir is None and not self.options.keep_work_dir:
            shutil.rmtree(self.work, ignore_errors=True)

    async def _claimed_features(self) -> frozenset[str]:
        if self.options.supported_features is not None:
            return self.options.supported_features
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            gc = await self._fetch("GatewayClass", "", self.subs.gateway_class_name)
            listed = ((gc or {}).get("status") or {}).get("supportedFeatures") or []
            if listed:
                return frozenset(str(f.get("name") if isinstance(f, dict) else f) for f in listed)
            await asyncio.sleep(POLL)
        raise RunnerError(
            f"GatewayClass {self.subs.gateway_class_name} has no status.supportedFeatures after "
            "60s "
            "(pass --supported-features)"
        )

    # ------------------------------------------------------------ objects

    async def _objects(self) -> dict[ObjKey, dict[str, Any]]:
        assert self.http is not None
        resp = await self.http.get("/api/objects", headers=self.admin.headers)
        resp.raise_for_status()
        return {key_of(o): o for o in resp.json()["items"]}

    async def _fetch(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return (await self._objects()).get((kind, namespace, name))

    async def envoy_server_info(self, gateway: str) -> dict[str, Any] | None:
        """What the Gateway's Envoy reports on its admin ``/server_info`` (None: none runs yet)."""
        infra = getattr(self.runtime.infra_sink, "infra", None)
        process = infra.process(gateway) if infra is not None else None
        if process is None or process.pid is None or self.http is None:
            return None
        try:
            resp = await self.http.get(f"http://{process.admin_address}/server_info")
        except httpx.HTTPError:
            return None
        return dict(resp.json()) if resp.status_code == 200 else None

    def _write_slices(self) -> None:
        desired = {key_of(s): s for s in self.backends.endpoint_slices(self.files.all())}
        for key in self._slices - desired.keys():
            with contextlib.suppress(RunnerError):
                self.files.remove(key)
        for key, obj in desired.items():
            if self.files.objects.get(key) != obj:
                self.files.put(obj)
        self._slices = set(desired)

    async def _changed(self, keys: Iterable[ObjKey]) -> None:
        """After writing or removing ``keys``: backends and EndpointSlices follow, then wait until
        gateweave's store holds exactly what was written and the runtime has translated it."""
        problems = await self.backends.sync(self.files.all(), self.files.get)
        if problems:
            raise RunnerError("backends: " + "; ".join(problems))
        self._write_slices()
        await self._wait_synced(set(keys) | self._slices)

    async def _wait_synced(self, keys: set[ObjKey]) -> None:
        rt = self.runtime
        deadline = time.monotonic() + SYNC_TIMEOUT
        pending = set(keys)
        while pending:
            for key in list(pending):
                want = self.files.objects.get(key)
                if want is not None and not _read_by_gateweave(want):
                    pending.discard(key)
                    continue
                stored = rt.store.get(Key(*key))
                if want is None:
                    if stored is None:
                        pending.discard(key)
                elif stored is not None and _content(stored.raw) == _content(_decoded_raw(want)):
                    pending.discard(key)
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise RunnerError(
                    "gateweave did not pick up "
                    + ", ".join(_key_str(k) for k in sorted(pending)[:3])
                    + f" within {SYNC_TIMEOUT:g}s"
                )
            await asyncio.sleep(0.02)
        wake = getattr(rt, "_wake", None)
        while wake is not None and wake.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)

    # ------------------------------------------------------------ cases

    def select(self, cases: list[Case]) -> list[Case]:
        if self.options.run:
            pattern = re.compile(self.options.run)
            cases = [c for c in cases if pattern.search(c.name)]
        return cases

    async def run_case_guarded(self, case: Case) -> CaseResult:
        """``run_case``, abandoned when ``gateweave serve`` stops (a signal: the run ends)."""
        assert self._serve_task is not None
        task = asyncio.create_task(self.run_case(case))
        await asyncio.wait([task, self._serve_task], return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise RunnerError(f"gateweave serve stopped while {case.name} ran")
        return task.result()

    async def run_case(self, case: Case) -> CaseResult:
        started = time.monotonic()
        result = CaseResult(case.name, "PASS", features=case.features)
        if case.unsupported:
            text = " ".join(case.unsupported[0].text.split())
            result.outcome, result.message = (
                "SKIP",
                f"unsupported step {case.unsupported[0].index}: {text[:160]}",
            )
            return result
        if self.options.skip_tests and re.search(self.options.skip_tests, case.name):
            result.outcome, result.message = "SKIP", "skipped by --skip-tests"
            return result
        skip = feature_skip(case, self.claimed)
        if skip:
            result.outcome, result.message = "SKIP", skip
            return result
        run = _CaseRun(self, case)
        try:
            try:
                await run.setup()
            except (RunnerError, OSError, ValueError, KeyError) as exc:
                result.outcome, result.message = "FAIL", f"setup: {exc}"
                return result
            for step in case.steps:
                try:
                    problem = await run.step(step)
                except (RunnerError, CaseError, ValueError, KeyError) as exc:
                    problem = str(exc)
                if problem:
                    result.outcome, result.message = "FAIL", f"{step.describe()}: {problem}"
                    break
        finally:
            try:
                await run.cleanup()
            except (RunnerError, OSError) as exc:
                if result.outcome == "PASS":
                    result.outcome, result.message = "FAIL", f"cleanup: {exc}"
            result.seconds = time.monotonic() - started
        return result


def _decoded_raw(raw: dict[str, Any]) -> dict[str, Any]:
    decoded, _ = decode(raw, "runner")
    return decoded.raw if decoded is not None else raw


class _CaseRun:
    """One case's objects and steps."""

    def __init__(self, runner: LiveRunner, case: Case) -> None:
        self.r = runner
        self.case = case
        self.created: set[ObjKey] = (
            set()
        )  # keys this case put or deleted (restored from base at cleanup)
        self.remembered: dict[ObjKey, int] = {}

    def _put(self, raw: dict[str, Any]) -> ObjKey:
        key = self.r.files.put(raw)
        self.created.add(key)
        return key

    async def setup(self) -> None:
        keys: list[ObjKey] = []
        extra = tuple(g.to_tls() for g in self.case.generated)
        if extra:
            material = tlsgen.with_extra(extra)
            for spec in extra:
                keys.append(self._put(material.get(spec.kind, spec.ref).manifest()))
        for rel in self.case.manifests:
            self.r.files.next_batch()
            for src in mf.load_file(self.r.options.manifests_dir, rel, self.r.subs):
                keys.append(self._put(src.obj))
        await self.r._changed(keys)

    def ref_key(self, ref: ObjectRef) -> ObjKey:
        name = self.r.subs.gateway_class_name if ref.name == ex.GATEWAY_CLASS_TOKEN else ref.name
        ns, sep, short = name.rpartition("/")
        info = KINDS.get(ref.kind)
        if info is not None and not info.namespaced:
            return ref.kind, "", short
        if not sep:
            raise RunnerError(f"{ref.kind} {name!r}: a namespaced object is named namespace/name")
        return ref.kind, ns, short

    def step_data(self, value: Any) -> Any:
        value = mf.substitute_step_data(value, self.r.subs)
        try:
            return mf.resolve_copies(value, self.r.files.get)
        except KeyError as exc:
            raise RunnerError(str(exc.args[0])) from None

    async def step(self, step: Step) -> str | None:
        kind = step.kind
        if kind == "expect":
            return await self.expect(step)
        if kind in traffic.STEPS:
            return await traffic.run_traffic(kind, self.r.env, self.step_data(step.raw))
        if kind in clientsteps.STEPS:
            step_fn = clientsteps.STEPS[kind]
            return await traffic.run_step(step_fn, self.r.env, self.step_data(step.raw))
        if kind == "generated_objects":
            return await self.generated_objects(step)
        if kind == "apply":
            assert step.apply is not None
            keys = []
            self.r.files.next_batch()
            for rel in step.apply.files:
                for src in mf.load_file(self.r.options.manifests_dir, rel, self.r.subs):
                    keys.append(self._put(src.obj))
            for obj in step.apply.objects:
                keys.append(self._put(mf.substitute(self.step_data(obj), self.r.subs)))
            await self.r._changed(keys)
        elif kind == "patch":
            assert step.patch is not None
            key = self.ref_key(ObjectRef(kind=step.patch.kind, name=step.patch.name))
            current = self.r.files.objects.get(key)
            if current is None:
                raise RunnerError(f"patch: {_key_str(key)} not found")
            patched = merge_patch(current, self.step_data(step.patch.merge))
            await self.r._changed([self._put(patched)])
        elif kind == "delete":
            assert step.ref is not None
            key = self.ref_key(step.ref)
            self.r.files.remove(key)
            self.created.add(key)
            await self.r._changed([key])
        elif kind in ("remember_generation", "expect_generation_changed"):
            assert step.ref is not None
            key = self.ref_key(step.ref)
            stored = self.r.runtime.store.get(Key(*key))
            if stored is None:
                return f"{_key_str(key)}: not found"
            generation = stored.generation
            if kind == "remember_generation":
                self.remembered[key] = generation
            elif key not in self.remembered:
                return f"{_key_str(key)}: expect_generation_changed without remember_generation"
            elif generation == self.remembered[key]:
                return (
                    f"{_key_str(key)}: expected metadata.generation to change from {generation}, "
                    "it did not"
                )
        return None

    async def expect(self, step: Step) -> str | None:
        parsed = parse_step(step.index, {"expect": self.step_data(step.raw)}).expect
        assert parsed is not None
        target = ex.target(parsed, self.r.ctx)
        timeout = parsed.timeout_s or EXPECT_TIMEOUT
        deadline = time.monotonic() + timeout
        while True:
            try:
                obj = await self.r._fetch(*target)
                problem = ex.evaluate(parsed, obj, self.r.ctx)
            except httpx.HTTPError as exc:
                problem = f"admin API: {exc}"
            if problem is None:
                return None
            if time.monotonic() >= deadline:
                return f"{problem} (after {timeout:g}s)"
            await asyncio.sleep(POLL)

    async def generated_objects(self, step: Step) -> str | None:
        """On one machine, what gateweave generates for a Gateway is its Envoy process: once one
        runs, its node metadata must carry the labels and annotations (checked once, as
        upstream)."""
        parsed = parse_step(step.index, {"generated_objects": self.step_data(step.raw)}).generated
        assert parsed is not None
        timeout = parsed.timeout_s or EXPECT_TIMEOUT
        deadline = time.monotonic() + timeout
        while True:
            info = await self.r.envoy_server_info(parsed.gateway)
            if info is not None:
                return generated.check(parsed, {"Envoy": [generated.envoy_object(info)]})
            if time.monotonic() >= deadline:
                return f"no Envoy runs for Gateway {parsed.gateway} (after {timeout:g}s)"
            await asyncio.sleep(POLL)

    async def cleanup(self) -> None:
        files = self.r.files
        gateways = {k for k in self.created if k[0] == "Gateway" and k not in self.r.base}
        for key in sorted(self.created):
            base = self.r.base.get(key)
            if base is not None:
                if files.objects.get(key) != base:
                    files.put(base)
            elif key in files.objects:
                files.remove(key)
        await self.r._changed(self.created)
        infra = getattr(self.r.runtime.infra_sink, "infra", None)
        if infra is None or not gateways:
            return
        names = {f"{ns}/{name}" for _, ns, name in gateways}
        deadline = time.monotonic() + ENVOY_GONE_TIMEOUT
        while names & set(infra.processes()):
            if time.monotonic() >= deadline:
                raise RunnerError(
                    f"Envoys of {sorted(names & set(infra.processes()))} still run after "
                    f"{ENVOY_GONE_TIMEOUT:g}s"
                )
            await asyncio.sleep(POLL)


def load_known_failures(path: Path) -> dict[str, str]:
    """A YAML mapping: case name -> why it fails (every entry needs a reason)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not all(
        isinstance(v, str) and v.strip() for v in data.values()
    ):
        raise ValueError(f"{path}: expected a mapping of case name to a non-empty reason")
    return {str(k): str(v) for k, v in data.items()}


async def run(options: RunnerOptions) -> tuple[list[CaseResult], frozenset[str]]:
    """Run the selected cases; prints one line per case and the summary."""
    cases: list[Case] = []
    results: list[CaseResult] = []
    for path in case_files(options.cases_dir):
        try:
            cases.append(load_case(path))
        except (CaseError, OSError, ValueError) as exc:
            results.append(CaseResult(path.stem, "FAIL", f"case file: {exc}"))
    runner = LiveRunner(options)
    cases = runner.select(cases)
    results = [r for r in results if not options.run or re.search(options.run, r.name)]
    for r in results:
        options.out(r.line())
    try:
        await runner.start()
        for case in cases:
            failed_before = _failed_translations(runner)
            result = await runner.run_case_guarded(case)
            if _failed_translations(runner) > failed_before and result.outcome != "FAIL":
                # A translation raised during the case (with check_incremental: an incremental
                # result that differed from a full translation): never a pass.
                error = runner.runtime.last_translation_error.strip().splitlines()
                result = CaseResult(
                    case.name,
                    "FAIL",
                    "a translation raised: " + (error[-1] if error else "?"),
                    result.seconds,
                    result.features,
                )
            result.known = options.known_failures.get(case.name, "")
            results.append(result)
            options.out(result.line())
    finally:
        await runner.close()
    options.out(summary(results))
    if options.report is not None:
        outcomes = [rp.Outcome(r.name, r.features, r.outcome) for r in results]
        provisional = [c.name for c in cases if c.provisional]
        report = rp.build_report(
            outcomes, runner.claimed, version=__version__, provisional=provisional
        )
        options.report.write_text(rp.dump(report), encoding="utf-8")
    return results, runner.claimed


def _failed_translations(runner: LiveRunner) -> int:
    return int(getattr(runner.runtime, "failed_translations", 0))


def exit_code(results: Iterable[CaseResult]) -> int:
    """1 when a case that is expected to pass failed (known failures excepted), else 0."""
    return 1 if any(r.outcome == "FAIL" and not r.known for r in results) else 0


def run_sync(options: RunnerOptions) -> int:
    results, _ = asyncio.run(run(options))
    return exit_code(results)


__all__ = [
    "CaseResult",
    "LiveRunner",
    "RunnerOptions",
    "exit_code",
    "load_known_failures",
    "run",
    "run_sync",
    "summary",
]
