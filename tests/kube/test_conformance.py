"""Conformance status steps replayed through the Kubernetes API (stand-in,
harness/gateweave_bench/kubeapi.py).

For each case: the objects are applied over HTTP to the API-server stand-in, gateweave
serves it (``serve(kube=...)`` with a kubeconfig file: the Kubernetes provider and the
status writer, no data plane), and every ``expect`` step reads the object back over HTTP
once gateweave has settled, and evaluates it with gateweave_conformance.expect. The
outcome (PASS/FAIL/SKIP and the failing step) must equal the offline replay's
(gateweave_conformance.offline).

By default a representative subset (:data:`SUBSET`) runs; ``GATEWEAVE_KUBE_ALL_CASES=1``
runs every case file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateweave_conformance import expect as ex
from gateweave_conformance import manifests as mf
from gateweave_conformance import offline
from gateweave_conformance.cases import Case, CaseError, load_case, parse_step
from tests.support.data import CASES, MANIFESTS, case_files
from tests.support.kubeapi import KubeAPI, serving, settle, write_kubeconfig

SUBSET = [
    "HTTPRouteSimpleSameNamespace",
    "HTTPRouteCrossNamespace",
    "HTTPRouteInvalidCrossNamespaceParentRef",
    "HTTPRouteReferenceGrant",
    "HTTPRouteObservedGenerationBump",
    "HTTPRouteMultipleGateways",
    "HTTPRoutePartiallyInvalidViaInvalidReferenceGrant",
    "HTTPRouteInvalidBackendRefUnknownKind",
    "GatewayObservedGenerationBump",
    "GatewayInvalidRouteKind",
    "GatewayWithAttachedRoutes",
    "GatewaySecretReferenceGrantAllInNamespace",
    "GatewayInvalidTLSConfiguration",
    "GRPCRouteListenerHostnameMatching",
    "TLSRouteHostnameIntersection",
    "TCPRouteMultipleRoutesAttachment",
    "UDPRouteNotAllowedByListeners",
    "BackendTLSPolicyObservedGenerationBump",
    "BackendTLSPolicyConflictResolution",
    "ListenerSetProtocolConflict",
    "ListenerSetRouteStatusScopedToParentRef",
]

_ALL = os.environ.get("GATEWEAVE_KUBE_ALL_CASES") == "1"
_FILES = case_files(CASES)
_SELECTED = [p for p in _FILES if _ALL or p.stem in SUBSET]


class StepError(Exception):
    pass


class ApiReplay:
    """The offline replay's steps, carried out over HTTP against the stand-in."""

    def __init__(
        self, api: KubeAPI, http: httpx.AsyncClient, case: Case, runtime: Any, source: Any
    ) -> None:
        self.api, self.http, self.case = api, http, case
        self.runtime, self.source = runtime, source
        self.subs = mf.Substitutions()
        self.ctx = ex.ExpectContext(self.subs.controller_name, self.subs.gateway_class_name)
        self.remembered: dict[tuple[str, str, str], int] = {}
        self.expects = 0

    # -------------------------------------------------------- kubectl

    def path(self, kind: str, ns: str, name: str = "", sub: str = "") -> str | None:
        try:
            t = self.api.rtype(kind)
        except StopIteration:
            return None
        base = f"/apis/{t.group}/{t.versions[0]}" if t.group else "/api/v1"
        if t.namespaced:
            base += f"/namespaces/{ns or 'default'}"
        out = f"{base}/{t.plural}"
        if name:
            out += f"/{name}"
        return out + (f"/{sub}" if sub else "")

    def key(self, obj: dict[str, Any]) -> tuple[str, str, str]:
        return offline.ObjectSet.key_of(obj)

    async def get(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        path = self.path(kind, ns, name)
        if path is None:
            return None
        resp = await self.http.get(path)
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        return dict(resp.json())

    async def apply(self, obj: dict[str, Any]) -> None:
        kind, ns, name = self.key(obj)
        if self.path(kind, ns) is None:
            return  # a kind the cluster does not serve (and gateweave does not read)
        body = {k: v for k, v in obj.items() if k != "status"}
        meta = {
            k: v
            for k, v in (obj.get("metadata") or {}).items()
            if k not in ("generation", "creationTimestamp", "uid", "resourceVersion")
        }
        if ns:
            meta["namespace"] = ns
        body["metadata"] = meta
        current = await self.get(kind, ns, name)
        if current is None:
            resp = await self.http.post(self.path(kind, ns) or "", json=body)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            resp = await self.http.put(self.path(kind, ns, name) or "", json=body)
        if resp.status_code >= 300:
            raise StepError(f"apply {kind} {ns}/{name}: {resp.status_code} {resp.text[:200]}")

    async def sync_endpoint_slices(self) -> None:
        raws = [o for t in self.api.types for o in self.api.objects(t.kind)]
        desired = {self.key(s): s for s in mf.endpoint_slices(raws)}
        for obj in self.api.objects("EndpointSlice"):
            labels = obj["metadata"].get("labels") or {}
            key = self.key(obj)
            if labels.get(offline.MANAGED_BY) == "gateweave-conformance" and key not in desired:
                await self.http.delete(self.path(*key) or "")
        for key, obj in desired.items():
            current = self.api.get(*key)
            if (
                current is None
                or offline._content(current) != offline._content(obj)
                or (current["metadata"].get("labels") != obj["metadata"]["labels"])
            ):
                await self.apply(obj)

    def ref_key(self, kind: str, name: str) -> tuple[str, str, str]:
        name = self.subs.gateway_class_name if name == ex.GATEWAY_CLASS_TOKEN else name
        ns, _, short = name.rpartition("/")
        t = self.api.rtype(kind)
        return (kind, "", short) if not t.namespaced else (kind, ns, short)

    def lookup(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return self.api.get(kind, ns, name)

    def step_data(self, value: Any) -> Any:
        value = mf.substitute_step_data(value, self.subs)
        try:
            return mf.resolve_copies(value, self.lookup)
        except KeyError as exc:
            raise StepError(str(exc.args[0])) from None

    async def settle(self) -> None:
        await settle(self.api, self.runtime, self.source)

    # -------------------------------------------------------- the case

    async def setup(self) -> None:
        prepared = mf.case_manifests(MANIFESTS, self.case, self.subs)
        seen: list[str] = []
        for src in prepared.objects:
            rel = src.origin.split("#", 1)[0]
            if rel in self.case.manifests and rel not in seen:
                seen.append(rel)
                self.api.advance(60)
            await self.apply(src.obj)
        await self.sync_endpoint_slices()
        await self.settle()

    async def claimed(self) -> frozenset[str]:
        gc = await self.get("GatewayClass", "", self.subs.gateway_class_name) or {}
        listed = (gc.get("status") or {}).get("supportedFeatures") or []
        return frozenset(str(f.get("name") if isinstance(f, dict) else f) for f in listed)

    async def run_step(self, step: Any) -> str | None:
        kind = step.kind
        if kind == "expect":
            await self.settle()
            parsed = parse_step(step.index, {"expect": self.step_data(step.raw)}).expect
            assert parsed is not None
            self.expects += 1
            obj = await self.get(*ex.target(parsed, self.ctx))
            return ex.evaluate(parsed, obj, self.ctx)
        if kind == "apply":
            self.api.advance(60)
            for rel in step.apply.files:
                for src in mf.load_file(MANIFESTS, rel, self.subs):
                    await self.apply(src.obj)
            for obj in step.apply.objects:
                await self.apply(mf.substitute(self.step_data(obj), self.subs))
            await self.sync_endpoint_slices()
        elif kind == "patch":
            key = self.ref_key(step.patch.kind, step.patch.name)
            resp = await self.http.patch(
                self.path(*key) or "",
                json=self.step_data(step.patch.merge),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            if resp.status_code >= 300:
                return f"patch {key}: {resp.status_code} {resp.text[:200]}"
            await self.sync_endpoint_slices()
        elif kind == "delete":
            key = self.ref_key(step.ref.kind, step.ref.name)
            resp = await self.http.delete(self.path(*key) or "")
            if resp.status_code >= 300:
                return f"delete {key}: {resp.status_code}"
            await self.sync_endpoint_slices()
        elif kind in ("remember_generation", "expect_generation_changed"):
            key = self.ref_key(step.ref.kind, step.ref.name)
            obj = await self.get(*key)
            if obj is None:
                return f"{key}: not found"
            generation = obj["metadata"]["generation"]
            if kind == "remember_generation":
                self.remembered[key] = generation
            elif key not in self.remembered:
                return f"{key}: expect_generation_changed without remember_generation"
            elif generation == self.remembered[key]:
                return (
                    f"{key}: expected metadata.generation to change from {generation}, it did not"
                )
        return None


async def replay_via_api(path: Path, tmp_path: Path) -> offline.CaseResult:
    case = load_case(path)
    if case.unsupported:
        return offline.CaseResult(case.name, "SKIP", "unsupported steps")
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    kubeconfig = write_kubeconfig(api, str(tmp_path / "kubeconfig"))
    result = offline.CaseResult(case.name, "PASS")
    try:
        async with (
            httpx.AsyncClient(
                base_url=api.url, timeout=10, headers={"Authorization": "Bearer standin-token"}
            ) as http,
            serving(api, kubeconfig) as (runtime, source),
        ):
            replay = ApiReplay(api, http, case, runtime, source)
            try:
                await replay.setup()
            except (StepError, httpx.HTTPError, ValueError) as exc:
                return offline.CaseResult(case.name, "FAIL", f"setup: {exc}")
            skip = offline.feature_skip(case, await replay.claimed())
            if skip:
                return offline.CaseResult(case.name, "SKIP", skip)
            for step in case.steps:
                try:
                    problem = await replay.run_step(step)
                except (StepError, CaseError, ValueError, httpx.HTTPError) as exc:
                    problem = str(exc)
                if problem:
                    result.outcome, result.step, result.message = (
                        "FAIL",
                        step.index,
                        f"{step.describe()}: {problem}",
                    )
                    break
            result.expects_checked = replay.expects
    finally:
        await api.stop()
    return result


@pytest.mark.parametrize("path", _SELECTED, ids=[p.stem for p in _SELECTED])
async def test_case_via_api_matches_offline(path: Path, tmp_path: Path) -> None:
    expected = offline.run_file(path, MANIFESTS)
    got = await replay_via_api(path, tmp_path)
    if expected.outcome == "SKIP" and got.outcome == "SKIP":
        pytest.skip(expected.message)
    assert (got.outcome, got.step) == (expected.outcome, expected.step), (
        f"via API: {got.outcome} {got.message}\noffline: {expected.outcome} {expected.message}"
    )
    if got.outcome == "PASS":
        assert got.expects_checked == expected.expects_checked > 0
