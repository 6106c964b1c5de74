"""Replay the status part of conformance cases offline: no Envoy, no network, no clock.

Each case runs against an in-memory object set that behaves like the API server where
the cases can tell (generation +1 on every spec change, creationTimestamp on create,
status kept apart from spec), with the real :func:`gateweave.translate.translate`
computing the statuses. ``expect`` steps are evaluated once after each change (the
translation is deterministic, so retrying would not change the answer); traffic steps
are skipped. A case with an ``unsupported`` step is reported as skipped, and so is a case
whose features the implementation does not claim (read, as upstream does, from the
GatewayClass's ``status.supportedFeatures`` unless given).

creationTimestamps: the suite setup (GatewayClass, base manifests, TLS material) gets one
time, each of the case's manifest files a later one, each ``apply`` step a later one still;
objects created together share their second, as on a real cluster.

    python -m gateweave_conformance.offline --cases DIR --manifests DIR [--features all|A,B] [NAME
    ...]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import functools
import hashlib
import json
import sys
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from gateweave.api.decode import Decoded, ObjectError, decode
from gateweave.api.kinds import KINDS
from gateweave.sinks.statusmerge import merge_status, owned_list
from gateweave.snapshot import Snapshot
from gateweave_conformance import expect as ex
from gateweave_conformance import manifests as mf
from gateweave_conformance.cases import (
    Case,
    CaseError,
    ObjectRef,
    Step,
    case_files,
    load_case,
    parse_step,
)

Outcome = Literal["PASS", "FAIL", "SKIP"]
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
_EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)

ObjKey = tuple[str, str, str]  # (kind, namespace, name)

# Conditions on supported features that upstream tests check in Go code and the format cannot
# express (each case's notes say so): the case is skipped when the feature is claimed ...
SKIP_IF_CLAIMED: dict[str, str] = {
    "TLSRouteListenerTerminateNotSupported": "TLSRouteModeTerminate",
    "TLSRouteListenerMixedTerminationNotSupported": "TLSRouteModeMixed",
}
# ... or needs these features besides its `features` list.
ALSO_REQUIRES: dict[str, tuple[str, ...]] = {"UDPRouteNotAllowedByListeners": ("TLSRoute",)}


def feature_skip(case: Case, claimed: Iterable[str]) -> str | None:
    """Why upstream would not run ``case`` for an implementation claiming ``claimed`` (None: it
    runs).
    """
    have = set(claimed)
    missing = [f for f in (*case.features, *ALSO_REQUIRES.get(case.name, ())) if f not in have]
    if missing:
        return f"feature(s) not supported: {', '.join(missing)}"
    inverse = SKIP_IF_CLAIMED.get(case.name)
    if inverse and inverse in have:
        return f"applies only to implementations without feature {inverse}"
    return None


class ReplayError(Exception):
    """A step that cannot be carried out (rejected object, missing object, translate failure)."""


# ---------------------------------------------------------------- the in-memory API server


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (lists are replaced whole; null deletes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@functools.lru_cache(maxsize=4096)
def _decode_cached(raw_json: str, origin: str) -> tuple[Decoded | None, tuple[ObjectError, ...]]:
    decoded, errors = decode(json.loads(raw_json), origin)
    return decoded, tuple(errors)


def creation_timestamp(tick: int) -> str:
    return (_EPOCH + datetime.timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Stored:
    raw: dict[str, Any]  # as stored: defaulted, metadata completed, status apart
    model: Any | None  # the typed model (None for kinds gateweave does not read, e.g. Deployment)


class ObjectSet:
    """Objects by (kind, namespace, name), with API-server-like metadata bookkeeping.

    ``tick`` is the current creation time in seconds since an arbitrary epoch: the runner
    advances it between batches (objects created in one batch share a timestamp, as a
    burst of creates within one second does on a real cluster).
    """

    def __init__(self) -> None:
        self.objects: dict[ObjKey, Stored] = {}
        self.tick = 0

    @staticmethod
    def key_of(raw: dict[str, Any]) -> ObjKey:
        kind = str(raw.get("kind") or "")
        meta = raw.get("metadata") or {}
        info = KINDS.get(kind)
        namespaced = info.namespaced if info else kind not in ("Namespace", "ClusterRole")
        ns = str(meta.get("namespace") or "default") if namespaced else ""
        return kind, ns, str(meta.get("name") or "")

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        stored = self.objects.get((kind, namespace, name))
        return stored.raw if stored else None

    def apply(self, raw: dict[str, Any], origin: str) -> None:
        """Create, or replace the non-status content of, one object (raises ReplayError when
        rejected).
        """
        key = self.key_of(raw)
        if not key[2]:
            raise ReplayError(f"{origin}: {key[0]} without metadata.name")
        body = {k: v for k, v in raw.items() if k != "status"}
        body["metadata"] = {
            k: v
            for k, v in (raw.get("metadata") or {}).items()
            if k not in ("generation", "creationTimestamp", "uid", "resourceVersion")
        }
        decoded, errors = _decode_cached(json.dumps(body, sort_keys=True), origin)
        if errors:
            raise ReplayError("rejected by the API server: " + "; ".join(str(e) for e in errors))
        new_raw: dict[str, Any] = (
            copy.deepcopy(decoded.raw) if decoded is not None else copy.deepcopy(body)
        )
        new_raw.pop("status", None)
        old = self.objects.get(key)
        meta = new_raw.setdefault("metadata", {})
        if key[1]:
            meta["namespace"] = key[1]
        if old is None:
            generation, created, uid, version = 1, creation_timestamp(self.tick), _uid(key), 1
            status: Any = None
        else:
            old_meta = old.raw["metadata"]
            changed = _content(old.raw) != _content(new_raw)
            generation = old_meta["generation"] + (1 if changed else 0)
            created, uid = old_meta["creationTimestamp"], old_meta["uid"]
            version = int(old_meta["resourceVersion"]) + 1
            status = old.raw.get("status")
        meta.update(
            generation=generation, creationTimestamp=created, uid=uid, resourceVersion=str(version)
        )
        if status is not None:
            new_raw["status"] = status
        model = None
        if decoded is not None:
            model = msgspec.structs.replace(
                decoded.model,
                metadata=msgspec.structs.replace(
                    decoded.model.metadata,
                    generation=generation,
                    creation_timestamp=created,
                    uid=uid,
                    resource_version=str(version),
                ),
            )
        self.objects[key] = Stored(new_raw, model)

    def patch(self, key: ObjKey, merge: dict[str, Any], origin: str) -> None:
        stored = self.objects.get(key)
        if stored is None:
            raise ReplayError(f"patch: {_key_str(key)} not found")
        patched = merge_patch({k: v for k, v in stored.raw.items() if k != "status"}, merge)
        self.apply(patched, origin)

    def delete(self, key: ObjKey) -> None:
        if self.objects.pop(key, None) is None:
            raise ReplayError(f"delete: {_key_str(key)} not found")

    def raws(self) -> list[dict[str, Any]]:
        return [s.raw for s in self.objects.values()]

    def snapshot(self) -> Snapshot:
        return Snapshot.from_objects(s.model for s in self.objects.values() if s.model is not None)

    def sync_endpoint_slices(self) -> None:
        """Publish the EndpointSlices of Services selecting Deployments, like the EndpointSlice
        controller.
        """
        desired = {self.key_of(s): s for s in mf.endpoint_slices(self.raws())}
        for key, stored in list(self.objects.items()):
            labels = (stored.raw.get("metadata") or {}).get("labels") or {}
            if (
                key[0] == "EndpointSlice"
                and labels.get(MANAGED_BY) == "gateweave-conformance"
                and key not in desired
            ):
                del self.objects[key]
        for key, obj in desired.items():
            current = self.objects.get(key)
            if (
                current is None
                or _content(current.raw) != _content(obj)
                or current.raw["metadata"].get("labels") != obj["metadata"]["labels"]
            ):
                self.apply(obj, "EndpointSlice controller")


def _content(raw: dict[str, Any]) -> Any:
    """What bumps metadata.generation: everything but metadata and status."""
    return {k: v for k, v in raw.items() if k not in ("metadata", "status")}


def _uid(key: ObjKey) -> str:
    h = hashlib.sha256("/".join(key).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _key_str(key: ObjKey) -> str:
    kind, ns, name = key
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


# ---------------------------------------------------------------- statuses


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "gateweave" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    path = f.filename.split("gateweave/", 1)[-1]
    return f" (at gateweave/{path}:{f.lineno} in {f.name})"


def compute_statuses(
    snapshot: Snapshot, controller_name: str
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The real translation's statuses (raises ReplayError saying where translate failed)."""
    try:
        from gateweave.translate import TranslateOptions, translate

        result = translate(snapshot, TranslateOptions(controller_name=controller_name))
    except Exception as exc:
        raise ReplayError(f"translate raised {type(exc).__name__}: {exc}{_where(exc)}") from exc
    # JSON-ready per the IR contract; to_builtins also copies, so stored objects never alias the
    # result.
    return {(k[0], k[1], k[2]): msgspec.to_builtins(v) for k, v in result.statuses.items()}


def merge_statuses(
    objects: ObjectSet, statuses: dict[tuple[str, str, str], dict[str, Any]], controller_name: str
) -> None:
    """Write the computed statuses into the stored objects as the status sink does
    (:func:`gateweave.sinks.statusmerge.merge_status`: other controllers' route/policy entries are
    kept).
    A route or policy without a computed status keeps no entry of ours; any other object
    without one keeps what it has."""
    for key, stored in objects.objects.items():
        computed = statuses.get(key)
        if computed is None:
            if owned_list(key[0]) is None:
                continue
            computed = {}
        current = stored.raw.get("status")
        stored.raw["status"] = copy.deepcopy(
            merge_status(
                key[0],
                current if isinstance(current, dict) else None,
                computed,
                controller_name,
                None,
                namespace=key[1],
            )
        )


# ---------------------------------------------------------------- running a case


@dataclass
class Options:
    subs: mf.Substitutions = field(default_factory=mf.Substitutions)
    include_unsupported: bool = (
        False  # replay the rest of a case that has unsupported steps (still SKIP)
    )
    # Claimed features; None: read the class under test's status.supportedFeatures (as upstream
    # infers them).
    supported_features: frozenset[str] | None = None


@dataclass
class CaseResult:
    name: str
    outcome: Outcome
    message: str = ""
    step: int | None = None
    expects_checked: int = 0
    traffic_skipped: int = 0

    def line(self) -> str:
        if self.outcome == "PASS":
            return (
                f"PASS {self.name} ({self.expects_checked} status checks, {self.traffic_skipped} "
                "traffic steps skipped)"
            )
        return f"{self.outcome} {self.name}: {self.message}"


class _Replay:
    def __init__(self, case: Case, manifests_dir: Path, options: Options) -> None:
        self.case = case
        self.manifests_dir = manifests_dir
        self.options = options
        self.subs = options.subs
        self.objects = ObjectSet()
        self.dirty = True
        self.remembered: dict[ObjKey, int] = {}
        self.ctx = ex.ExpectContext(self.subs.controller_name, self.subs.gateway_class_name)
        self.expects = 0
        self.traffic = 0

    def ref_key(self, ref: ObjectRef) -> ObjKey:
        name = self.subs.gateway_class_name if ref.name == ex.GATEWAY_CLASS_TOKEN else ref.name
        ns, sep, short = name.rpartition("/")
        info = KINDS.get(ref.kind)
        if info is not None and not info.namespaced:
            return ref.kind, "", short
        if not sep:
            raise ReplayError(f"{ref.kind} {name!r}: a namespaced object is named namespace/name")
        return ref.kind, ns, short

    def setup(self) -> None:
        prepared = mf.case_manifests(self.manifests_dir, self.case, self.subs)
        # Suite setup (GatewayClass, base manifests, TLS material) happened long before the test.
        files_seen: list[str] = []
        for src in prepared.objects:
            rel = src.origin.split("#", 1)[0]
            if rel in self.case.manifests and rel not in files_seen:
                files_seen.append(rel)
                self.objects.tick += 60
            self._apply(src.obj, src.origin)
        self.objects.sync_endpoint_slices()

    def claimed_features(self) -> frozenset[str]:
        if self.options.supported_features is not None:
            return self.options.supported_features
        self.refresh()
        gc = self.objects.get("GatewayClass", "", self.subs.gateway_class_name) or {}
        listed = (gc.get("status") or {}).get("supportedFeatures") or []
        if not listed:
            raise ReplayError(
                f"GatewayClass {self.subs.gateway_class_name} has no status.supportedFeatures to "
                "infer the "
                "claimed features from (pass them explicitly)"
            )
        return frozenset(str(f.get("name") if isinstance(f, dict) else f) for f in listed)

    def _apply(self, obj: dict[str, Any], origin: str) -> None:
        try:
            self.objects.apply(obj, origin)
        except ReplayError as exc:
            raise ReplayError(
                f"apply {_key_str(ObjectSet.key_of(obj))} ({origin}): {exc}"
            ) from None

    def refresh(self) -> None:
        if not self.dirty:
            return
        statuses = compute_statuses(self.objects.snapshot(), self.subs.controller_name)
        merge_statuses(self.objects, statuses, self.subs.controller_name)
        self.dirty = False

    def step_data(self, value: Any) -> Any:
        value = mf.substitute_step_data(value, self.subs)
        try:
            return mf.resolve_copies(value, self.objects.get)
        except KeyError as exc:
            raise ReplayError(str(exc.args[0])) from None

    def run_step(self, step: Step) -> str | None:
        kind = step.kind
        if kind == "expect":
            assert step.expect is not None
            self.refresh()
            parsed = parse_step(step.index, {"expect": self.step_data(step.raw)}).expect
            assert parsed is not None
            self.expects += 1
            obj = self.objects.get(*ex.target(parsed, self.ctx))
            return ex.evaluate(parsed, obj, self.ctx)
        if kind == "apply":
            assert step.apply is not None
            self.objects.tick += 60
            for rel in step.apply.files:
                for src in mf.load_file(self.manifests_dir, rel, self.subs):
                    self._apply(src.obj, src.origin)
            for i, obj in enumerate(step.apply.objects):
                self._apply(
                    mf.substitute(self.step_data(obj), self.subs), f"step {step.index} object {i}"
                )
            self._changed()
        elif kind == "patch":
            assert step.patch is not None
            key = self.ref_key(ObjectRef(kind=step.patch.kind, name=step.patch.name))
            self.objects.patch(key, self.step_data(step.patch.merge), f"step {step.index} patch")
            self._changed()
        elif kind == "delete":
            assert step.ref is not None
            self.objects.delete(self.ref_key(step.ref))
            self._changed()
        elif kind in ("remember_generation", "expect_generation_changed"):
            assert step.ref is not None
            key = self.ref_key(step.ref)
            obj = self.objects.get(*key)
            if obj is None:
                return f"{_key_str(key)}: not found"
            generation = obj["metadata"]["generation"]
            if kind == "remember_generation":
                self.remembered[key] = generation
            elif key not in self.remembered:
                return f"{_key_str(key)}: expect_generation_changed without remember_generation"
            elif generation == self.remembered[key]:
                return (
                    f"{_key_str(key)}: expected metadata.generation to change from {generation}, "
                    "it did not"
                )
        elif kind == "unsupported":
            pass
        else:
            self.traffic += 1
        return None

    def _changed(self) -> None:
        self.objects.sync_endpoint_slices()
        self.dirty = True

    def run(self) -> CaseResult:
        result = CaseResult(self.case.name, "PASS")
        try:
            self.setup()
        except (ReplayError, OSError, ValueError) as exc:
            result.outcome, result.message = "FAIL", f"setup: {exc}"
            return result
        try:
            skip = feature_skip(self.case, self.claimed_features())
        except ReplayError as exc:
            result.outcome, result.message = "FAIL", f"setup: {exc}"
            return result
        if skip:
            result.outcome, result.message = "SKIP", skip
            return result
        for step in self.case.steps:
            try:
                problem = self.run_step(step)
            except (ReplayError, CaseError, ValueError) as exc:
                problem = str(exc)
            if problem:
                result.outcome, result.step = "FAIL", step.index
                result.message = f"{step.describe()}: {problem}"
                break
        result.expects_checked, result.traffic_skipped = self.expects, self.traffic
        return result


def run_case(case: Case, manifests_dir: Path, options: Options | None = None) -> CaseResult:
    """Replay one case's status steps offline."""
    options = options or Options()
    unsupported = case.unsupported
    if unsupported and not options.include_unsupported:
        text = " ".join(unsupported[0].text.split())
        return CaseResult(
            case.name, "SKIP", f"unsupported step {unsupported[0].index}: {text[:160]}"
        )
    result = _Replay(case, manifests_dir, options).run()
    if unsupported:
        verdict = (
            "status steps pass"
            if result.outcome == "PASS"
            else f"status replay fails: {result.message}"
        )
        return CaseResult(
            case.name,
            "SKIP",
            f"{len(unsupported)} unsupported step(s); {verdict}",
            result.step,
            result.expects_checked,
            result.traffic_skipped,
        )
    return result


def run_file(path: Path, manifests_dir: Path, options: Options | None = None) -> CaseResult:
    try:
        case = load_case(path)
    except (CaseError, OSError, ValueError) as exc:
        return CaseResult(path.stem, "FAIL", f"case file: {exc}")
    return run_case(case, manifests_dir, options)


def run_all(
    cases_dir: Path, manifests_dir: Path, names: Sequence[str] = (), options: Options | None = None
) -> list[CaseResult]:
    results = []
    for path in case_files(cases_dir):
        if names and path.stem not in names:
            continue
        results.append(run_file(path, manifests_dir, options))
    return results


def summary(results: Iterable[CaseResult]) -> str:
    results = list(results)
    counts = {o: sum(1 for r in results if r.outcome == o) for o in ("PASS", "FAIL", "SKIP")}
    return f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateweave_conformance.offline", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cases", type=Path, required=True, help="directory of case files")
    parser.add_argument(
        "--manifests", type=Path, required=True, help="directory holding base/ and tests/"
    )
    parser.add_argument(
        "--include-unsupported",
        action="store_true",
        help="replay cases with unsupported steps too (still SKIP)",
    )
    parser.add_argument(
        "--features",
        help=(
            "comma-separated claimed features (default: the GatewayClass's "
            "status.supportedFeatures); 'all': every feature"
        ),
    )
    parser.add_argument("names", nargs="*", help="only these cases (by file name without .yaml)")
    args = parser.parse_args(argv)
    features: frozenset[str] | None = None
    if args.features == "all":
        features = frozenset(f for path in case_files(args.cases) for f in load_case(path).features)
    elif args.features:
        features = frozenset(f.strip() for f in args.features.split(",") if f.strip())
    options = Options(include_unsupported=args.include_unsupported, supported_features=features)
    results = run_all(args.cases, args.manifests, args.names, options)
    for r in results:
        print(r.line())
    print(summary(results))
    return 1 if any(r.outcome == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
