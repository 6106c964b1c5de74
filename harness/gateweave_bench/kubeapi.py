"""A Kubernetes API server stand-in (aiohttp, 127.0.0.1, HTTP).

No kube-apiserver can run here, so the Kubernetes provider's tests talk HTTP to this
(through tests/support/kubeapi.py, which adds running gateweave against it), and so does
the benchmark's Kubernetes cold start (:mod:`gateweave_bench.kubecold`).
It implements the semantics a controller depends on, as the API server does them:

* discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>/<version>`` (resource lists
  with ``<plural>/status`` subresources, namespaced flag, verbs), and the part of OpenAPI v3
  ``kubectl`` reads to leave validation to the server (``/openapi/v3``);
* list (``resourceVersion`` of the list; ``limit``/``continue`` paging over the current
  state, not a snapshot), watch (``watch=1``: ADDED/MODIFIED/DELETED/BOOKMARK JSON lines,
  from a resourceVersion within the history window, else an ERROR event with code 410;
  without a resourceVersion or with "0": synthetic ADDED events for what exists, then
  changes; ``timeoutSeconds`` and a server-side cap; :meth:`KubeAPI.disconnect_watches`);
* get, create (POST; 409 AlreadyExists), update (PUT; 409 Conflict on a stale
  ``metadata.resourceVersion``, which custom resources require), patch
  (``application/merge-patch+json``, ``application/json-patch+json``,
  ``application/apply-patch+yaml`` server-side apply, see below), delete;
* label selectors on list and watch (``labelSelector``: equality-based ``k=v``, ``k==v``,
  ``k!=v`` and existence ``k``, ``!k``; a watch passes the events of the objects that match
  after the change: an object that stops matching gets no DELETED);
* the ``status`` subresource: a write there changes only ``status``; a write to the main
  resource keeps the stored ``status`` (and a create drops the given one);
* ``metadata``: ``uid``, ``creationTimestamp`` (from :attr:`KubeAPI.clock`, which tests may
  advance), ``generation`` for kinds that count it (custom resources, Deployments: 1 on
  create, +1 when anything but metadata/status changes), a global ``resourceVersion``
  counter;
* authentication: every request must carry the bearer token of :meth:`KubeAPI.kubeconfig`
  (else 401);
* a request log (:class:`Request`: verb, group, resource, subresource, namespace, name,
  HTTP code) for assertions, and hooks run before each request (to inject a concurrent
  writer).

Server-side apply, simplified but with the ownership rule that matters: every field is
owned by the managers that set it (leaves; lists are atomic, as ``x-kubernetes-list-type:
atomic``). An apply that would change a field another manager owns is a 409 Conflict
naming the field, unless ``force=true`` (the field then moves to the applier); fields the
applier owned before and no longer applies are removed when nobody else owns them.
Updates and patches take ownership of the fields they change (manager ``fieldManager``
or "unknown"). Ownership is kept server-side, not exposed as ``managedFields``.

Not implemented: finalizers/deletionTimestamp (delete is immediate), garbage collection
through ownerReferences, field selectors, strategic merge patch, admission/validation
beyond what is listed, authorization (a request with the bearer token is allowed anything;
RBAC is checked by comparing the request log with the rules, tests/kube/test_rbac.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime
import json
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from gateweave.api.kinds import KINDS
from gateweave_conformance.offline import merge_patch

JSON = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    namespaced: bool
    status: bool  # has a status subresource
    generation: bool  # metadata.generation is counted
    custom: bool = False  # a custom resource (updates need a resourceVersion)

    def api_version(self, version: str | None = None) -> str:
        v = version or self.versions[0]
        return f"{self.group}/{v}" if self.group else v


def default_types() -> list[ResourceType]:
    out = []
    for info in KINDS.values():
        if info.custom:
            has_status = info.kind not in ("ReferenceGrant", "GatewayParameters")
            out.append(
                ResourceType(
                    info.group,
                    info.versions,
                    info.kind,
                    info.plural,
                    info.namespaced,
                    has_status,
                    True,
                    custom=True,
                )
            )
    out += [
        ResourceType("", ("v1",), "Service", "services", True, True, False),
        ResourceType("", ("v1",), "Namespace", "namespaces", False, True, False),
        ResourceType("", ("v1",), "Secret", "secrets", True, False, False),
        ResourceType("", ("v1",), "ConfigMap", "configmaps", True, False, False),
        ResourceType("", ("v1",), "ServiceAccount", "serviceaccounts", True, False, False),
        ResourceType(
            "discovery.k8s.io", ("v1",), "EndpointSlice", "endpointslices", True, False, False
        ),
        ResourceType("apps", ("v1",), "Deployment", "deployments", True, True, True),
        ResourceType(
            "policy", ("v1",), "PodDisruptionBudget", "poddisruptionbudgets", True, True, True
        ),
        ResourceType(
            "autoscaling",
            ("v2",),
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            True,
            True,
            False,
        ),
        ResourceType("coordination.k8s.io", ("v1",), "Lease", "leases", True, False, False),
        # the Kubernetes data plane's Envoy pods, whose statistics are read (gateweave/kube/pods.py)
        ResourceType("", ("v1",), "Pod", "pods", True, True, False),
        # what installing gateweave creates (kubectl apply -k deploy/,
        # tests/kube/test_install_docs.py)
        ResourceType(
            "apiextensions.k8s.io",
            ("v1",),
            "CustomResourceDefinition",
            "customresourcedefinitions",
            False,
            True,
            True,
        ),
        ResourceType(
            "rbac.authorization.k8s.io", ("v1",), "ClusterRole", "clusterroles", False, False, False
        ),
        ResourceType(
            "rbac.authorization.k8s.io",
            ("v1",),
            "ClusterRoleBinding",
            "clusterrolebindings",
            False,
            False,
            False,
        ),
        ResourceType("rbac.authorization.k8s.io", ("v1",), "Role", "roles", True, False, False),
        ResourceType(
            "rbac.authorization.k8s.io", ("v1",), "RoleBinding", "rolebindings", True, False, False
        ),
        ResourceType(
            "admissionregistration.k8s.io",
            ("v1",),
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            False,
            True,
            True,
        ),
        ResourceType(
            "admissionregistration.k8s.io",
            ("v1",),
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            False,
            False,
            True,
        ),
    ]
    return out


@dataclass(frozen=True)
class Request:
    verb: str  # get list watch create update patch delete (RBAC verbs)
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> JSON:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, test."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch is a list of operations")
    for op in ops:
        parts = _pointer(op.get("path", ""))
        parent: Any = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last, kind = parts[-1], op.get("op")
        try:
            if kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if current != op.get("value"):
                    raise ApiError(422, "Invalid", f"test failed at {op['path']}")
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    idx = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(idx, op["value"])
                    else:
                        parent[idx] = op["value"]
                else:
                    parent[last] = op["value"]
            else:
                raise ApiError(422, "Invalid", f"unsupported JSON patch op {kind!r}")
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, "Invalid", f"JSON patch {op}: {exc!r}") from None
    return doc


_META_OWNED = ("labels", "annotations", "ownerReferences", "finalizers")


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Field paths to leaf values (lists are atomic)."""
    if isinstance(obj, dict) and obj:
        out: dict[tuple[str, ...], Any] = {}
        for k, v in obj.items():
            out.update(_leaves(v, (*prefix, str(k))))
        return out
    return {prefix: obj}


def _owned_fields(obj: JSON, status: bool) -> dict[tuple[str, ...], Any]:
    if status:
        return _leaves({"status": obj.get("status")}) if obj.get("status") is not None else {}
    meta = obj.get("metadata") or {}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    body["metadata"] = {k: meta[k] for k in _META_OWNED if k in meta}
    return {p: v for p, v in _leaves(body).items() if p and p != ("metadata",)}


def _set_path(obj: JSON, path: tuple[str, ...], value: Any) -> None:
    for p in path[:-1]:
        nxt = obj.get(p)
        if not isinstance(nxt, dict):
            nxt = obj[p] = {}
        obj = nxt
    obj[path[-1]] = copy.deepcopy(value)


def _del_path(obj: JSON, path: tuple[str, ...]) -> None:
    chain = [obj]
    for p in path[:-1]:
        nxt = chain[-1].get(p)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(path[-1], None)
    for i in range(len(chain) - 1, 0, -1):  # prune emptied maps
        if not chain[i]:
            chain[i - 1].pop(path[i - 1], None)


def _compact(value: Any) -> str:
    """JSON without spaces, as the API server writes it."""
    return json.dumps(value, separators=(",", ":"))


@dataclass
class _Watcher:
    rtype: ResourceType
    version: str
    namespace: str
    selects: Callable[[JSON], bool]
    queue: asyncio.Queue[JSON | None] = field(default_factory=asyncio.Queue)


def label_selector(text: str) -> Callable[[JSON], bool]:
    """Whether an object's labels match a ``labelSelector`` (equality-based and existence)."""
    terms: list[tuple[str, str, str]] = []  # (key, operator, value)
    for term in filter(None, (t.strip() for t in text.split(","))):
        for op in ("!=", "==", "="):
            key, sep, value = term.partition(op)
            if sep:
                terms.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            negated = term.startswith("!")
            terms.append((term.lstrip("!").strip(), "!" if negated else "exists", ""))

    def selects(obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, value in terms:
            if op == "=" and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
            if op == "exists" and key not in labels:
                return False
            if op == "!" and key in labels:
                return False
        return True

    return selects


@dataclass
class _Obj:
    raw: JSON
    owners: dict[tuple[str, ...], set[str]] = field(default_factory=dict)


Hook = Callable[[Request], Awaitable[None] | None]


class KubeAPI:
    """The stand-in. ``history``: how many past events a watch can resume from."""

    def __init__(
        self,
        *,
        history: int = 1000,
        bookmark_interval: float = 0.1,
        max_watch_seconds: float = 300.0,
        types: list[ResourceType] | None = None,
        token: str | None = "standin-token",
    ) -> None:
        self.token = token  # the bearer token every request must carry (None: no authentication)
        self.types = types if types is not None else default_types()
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.rv = 0
        self.now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        self.log: list[Request] = []
        self.hooks: list[Hook] = []
        self.status_writes: list[
            tuple[Request, JSON]
        ] = []  # each successful status write, with the status stored
        self._objects: dict[tuple[str, str], dict[tuple[str, str], _Obj]] = {}
        self._events: deque[tuple[int, ResourceType, str, JSON]] = deque()
        self._service_ips = 0
        self._compacted = 0  # watches from resourceVersions below this get 410 Gone
        self._watchers: list[_Watcher] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self.disconnect_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    def kubeconfig(self, namespace: str = "default") -> JSON:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {"token": self.token or "none"}}],
            "contexts": [
                {
                    "name": "standin",
                    "context": {"cluster": "standin", "user": "standin", "namespace": namespace},
                }
            ],
        }

    # ------------------------------------------------------------ test controls

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)

    def disconnect_watches(self) -> int:
        """End every open watch (as an API server restart or a load balancer would)."""
        gone, self._watchers = self._watchers, []
        for w in gone:
            w.queue.put_nowait(None)
        return len(gone)

    @property
    def watch_count(self) -> int:
        return len(self._watchers)

    def requests(
        self,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        ok: bool | None = None,
    ) -> list[Request]:
        return [
            r
            for r in self.log
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (subresource is None or r.subresource == subresource)
            and (ok is None or (200 <= r.code < 300) == ok)
        ]

    def rtype(self, kind: str) -> ResourceType:
        return next(t for t in self.types if t.kind == kind)

    # direct access (as another client would have, without the request log)

    def get(self, kind: str, namespace: str, name: str) -> JSON | None:
        t = self.rtype(kind)
        o = self._objects.get((t.group, t.plural), {}).get(
            (namespace if t.namespaced else "", name)
        )
        return copy.deepcopy(o.raw) if o else None

    def put(self, obj: JSON, manager: str = "test") -> JSON:
        """Create or update ``obj`` (main resource), bypassing the request log."""
        t = self.rtype(obj["kind"])
        meta = obj.get("metadata") or {}
        ns = (meta.get("namespace") or "default") if t.namespaced else ""
        if self._find(t, ns, meta["name"]) is None:
            return self._create(t, ns, obj, manager)
        cur = self._find(t, ns, meta["name"])
        assert cur is not None
        body = copy.deepcopy(obj)
        body.setdefault("metadata", {})["resourceVersion"] = cur.raw["metadata"]["resourceVersion"]
        return self._update(t, ns, meta["name"], body, False, manager)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        t = self.rtype(kind)
        self._delete(t, namespace if t.namespaced else "", name)

    def objects(self, kind: str) -> list[JSON]:
        t = self.rtype(kind)
        return [
            copy.deepcopy(o.raw)
            for _, o in sorted(self._objects.get((t.group, t.plural), {}).items())
        ]

    # ------------------------------------------------------------ storage

    def _store(self, t: ResourceType) -> dict[tuple[str, str], _Obj]:
        return self._objects.setdefault((t.group, t.plural), {})

    def _find(self, t: ResourceType, ns: str, name: str) -> _Obj | None:
        return self._store(t).get((ns, name))

    def _emit(self, t: ResourceType, etype: str, raw: JSON) -> None:
        rv = int(raw["metadata"]["resourceVersion"])
        self._events.append((rv, t, etype, copy.deepcopy(raw)))
        while len(self._events) > self.history:
            old = self._events.popleft()
            self._compacted = old[0]
        ns = (raw.get("metadata") or {}).get("namespace", "")
        for w in self._watchers:
            if w.rtype == t and (not w.namespace or w.namespace == ns) and w.selects(raw):
                w.queue.put_nowait({"type": etype, "object": self._served(raw, t, w.version)})

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    @staticmethod
    def _served(raw: JSON, t: ResourceType, version: str) -> JSON:
        out = copy.deepcopy(raw)
        out["apiVersion"] = t.api_version(version)
        return out

    def _take_ownership(self, o: _Obj, before: JSON, manager: str, status: bool) -> None:
        old, new = _owned_fields(before, status), _owned_fields(o.raw, status)
        for path in set(old) - set(new):
            o.owners.pop(path, None)
        for path, value in new.items():
            if old.get(path, object()) != value or path not in o.owners:
                o.owners[path] = {manager}

    def _create(self, t: ResourceType, ns: str, body: JSON, manager: str) -> JSON:
        meta = dict(body.get("metadata") or {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if t.namespaced and meta.get("namespace") not in (None, "", ns):
            raise ApiError(
                400, "BadRequest", "the namespace of the object does not match the request"
            )
        if self._find(t, ns, name) is not None:
            raise ApiError(409, "AlreadyExists", f'{t.plural}.{t.group} "{name}" already exists')
        raw = copy.deepcopy(body)
        raw["apiVersion"], raw["kind"] = t.api_version(), t.kind
        if t.status:
            raw.pop("status", None)
        for k in (
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
            "deletionTimestamp",
        ):
            meta.pop(k, None)
        if t.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if t.generation:
            meta["generation"] = 1
        meta["resourceVersion"] = self._next_rv()
        raw["metadata"] = meta
        if t.kind == "Service":  # the service IP allocator
            spec = raw.setdefault("spec", {})
            if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
                self._service_ips += 1
                spec["clusterIP"] = (
                    f"10.96.{self._service_ips // 250}.{self._service_ips % 250 + 1}"
                )
        o = _Obj(raw)
        self._take_ownership(o, {}, manager, False)
        self._store(t)[(ns, name)] = o
        self._emit(t, "ADDED", raw)
        return copy.deepcopy(raw)

    def _check_rv(self, o: _Obj, body: JSON, t: ResourceType, required: bool) -> None:
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want in (None, ""):
            if required:
                raise ApiError(
                    422,
                    "Invalid",
                    "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                )
            return
        if str(want) != o.raw["metadata"]["resourceVersion"]:
            name = o.raw["metadata"]["name"]
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {t.plural}.{t.group} "
                f'"{name}": the object has been modified; please apply your changes to the '
                "latest version and try again",
            )

    def _update(
        self,
        t: ResourceType,
        ns: str,
        name: str,
        body: JSON,
        status: bool,
        manager: str,
        *,
        rv_required: bool | None = None,
    ) -> JSON:
        o = self._find(t, ns, name)
        if o is None:
            raise ApiError(404, "NotFound", f'{t.plural}.{t.group} "{name}" not found')
        if status and not t.status:
            raise ApiError(404, "NotFound", f"{t.plural} has no status subresource")
        self._check_rv(o, body, t, t.custom if rv_required is None else rv_required)
        before = o.raw
        if status:
            new = copy.deepcopy(before)
            if body.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = copy.deepcopy(body["status"])
        else:
            new = copy.deepcopy(body)
            new["apiVersion"], new["kind"] = t.api_version(), t.kind
            new.pop("status", None)
            if before.get("status") is not None and t.status:
                new["status"] = copy.deepcopy(before["status"])
            elif not t.status and body.get("status") is not None:
                new["status"] = copy.deepcopy(body["status"])
            meta = dict(new.get("metadata") or {})
            bmeta = before["metadata"]
            for k in ("uid", "creationTimestamp", "generation", "namespace", "name"):
                if k in bmeta:
                    meta[k] = bmeta[k]
                else:
                    meta.pop(k, None)
            meta.pop("managedFields", None)
            new["metadata"] = meta
            old_ip = (before.get("spec") or {}).get("clusterIP")
            if t.kind == "Service" and old_ip and isinstance(new.get("spec"), dict):
                new["spec"].setdefault("clusterIP", old_ip)
            if t.generation:
                spec_old = {k: v for k, v in before.items() if k not in ("metadata", "status")}
                spec_new = {k: v for k, v in new.items() if k not in ("metadata", "status")}
                if spec_old != spec_new:
                    meta["generation"] = int(bmeta.get("generation", 1)) + 1
        new["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
        if new == before:
            return copy.deepcopy(before)  # a no-op write changes nothing, not even resourceVersion
        new["metadata"]["resourceVersion"] = self._next_rv()
        o.raw = new
        self._take_ownership(o, before, manager, status)
        self._emit(t, "MODIFIED", new)
        return copy.deepcopy(new)

    def _apply(
        self,
        t: ResourceType,
        ns: str,
        name: str,
        applied: JSON,
        status: bool,
        manager: str,
        force: bool,
    ) -> JSON:
        if not manager:
            raise ApiError(422, "Invalid", "fieldManager is required for apply requests")
        o = self._find(t, ns, name)
        if o is None:
            body = copy.deepcopy(applied)
            body.setdefault("metadata", {})["name"] = name
            if status:
                raise ApiError(404, "NotFound", f'{t.plural}.{t.group} "{name}" not found')
            created = self._create(t, ns, body, manager)
            return created
        self._check_rv(o, applied, t, False)
        wanted = _owned_fields(applied, status)
        current = _owned_fields(o.raw, status)
        conflicting = {
            p
            for p, v in wanted.items()
            if current.get(p, object()) != v and (o.owners.get(p, set()) - {manager})
        }
        conflicts = sorted(".".join(p) for p in conflicting)
        if conflicts and not force:
            raise ApiError(
                409,
                "Conflict",
                f"Apply failed with {len(conflicts)} conflict(s): "
                + "; ".join(f"conflict with another manager: {c}" for c in conflicts),
            )
        new = copy.deepcopy(o.raw)
        for path, value in wanted.items():
            _set_path(new, path, value)
        for path, owners in list(o.owners.items()):
            if path not in wanted and manager in owners:
                owners.discard(manager)
                if not owners:
                    _del_path(new, path)
                    del o.owners[path]
        new["metadata"]["resourceVersion"] = o.raw["metadata"]["resourceVersion"]
        result = self._update(t, ns, name, new, status, manager, rv_required=False)
        for path in wanted:  # a forced apply takes the conflicting fields; equal values are shared
            if path in conflicting or path not in o.owners:
                o.owners[path] = {manager}
            else:
                o.owners[path].add(manager)
        return result

    def _delete(self, t: ResourceType, ns: str, name: str) -> JSON:
        o = self._store(t).pop((ns, name), None)
        if o is None:
            raise ApiError(404, "NotFound", f'{t.plural}.{t.group} "{name}" not found')
        raw = copy.deepcopy(o.raw)
        raw["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(t, "DELETED", raw)
        return raw

    # ------------------------------------------------------------ HTTP

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for t in self.types:
            if t.group:
                versions = groups.setdefault(t.group, [])
                versions += [v for v in t.versions if v not in versions]
        return groups

    def _discovery(self, parts: list[str]) -> JSON | None:
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in sorted(self._groups().items())
                ],
            }
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in self._groups():
            g, vs = parts[1], self._groups()[parts[1]]
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
            }
        if parts == ["api", "v1"]:
            group, version = "", "v1"
        elif len(parts) == 3 and parts[0] == "apis":
            group, version = parts[1], parts[2]
        else:
            return None
        resources = []
        for t in self.types:
            if t.group != group or version not in t.versions:
                continue
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            resources.append(
                {
                    "name": t.plural,
                    "singularName": t.kind.lower(),
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": verbs,
                }
            )
            if t.status:
                resources.append(
                    {
                        "name": f"{t.plural}/status",
                        "singularName": "",
                        "namespaced": t.namespaced,
                        "kind": t.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        if not resources:
            return None
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }

    def _openapi(self, parts: list[str]) -> JSON | None:
        """OpenAPI v3, as much as kubectl reads: the root's group-version list, and per group
        version each kind's PATCH operation with its ``fieldValidation`` query parameter (so
        kubectl leaves validation to the server, which here validates nothing)."""
        gvs = sorted(
            {
                ("api/v1" if not t.group else f"apis/{t.group}/{v}")
                for t in self.types
                for v in t.versions
            }
        )
        if parts == ["openapi", "v3"]:
            return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}"} for gv in gvs}}
        gv = "/".join(parts[2:])
        if parts[:2] != ["openapi", "v3"] or gv not in gvs:
            return None
        paths = {}
        for t in self.types:
            for v in t.versions:
                if ("api/v1" if not t.group else f"apis/{t.group}/{v}") != gv:
                    continue
                scope = "namespaces/{namespace}/" if t.namespaced else ""
                paths[f"/{gv}/{scope}{t.plural}/{{name}}"] = {
                    "patch": {
                        "x-kubernetes-group-version-kind": {
                            "group": t.group,
                            "version": v,
                            "kind": t.kind,
                        },
                        "parameters": [
                            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
                        ],
                    }
                }
        return {"openapi": "3.0.0", "info": {"title": "stand-in", "version": "v1"}, "paths": paths}

    def _route(self, parts: list[str]) -> tuple[ResourceType, str, str, str, str]:
        """(type, version, namespace, name, subresource) of a resource path."""
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = ""
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            ns, rest = rest[1], rest[2:]
        plural, name, sub = (
            rest[0],
            (rest[1] if len(rest) > 1 else ""),
            (rest[2] if len(rest) > 2 else ""),
        )
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        for t in self.types:
            if t.group == group and t.plural == plural and version in t.versions:
                if ns and not t.namespaced:
                    break
                return t, version, ns, name, sub
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            err = ApiError(401, "Unauthorized", "Unauthorized")
            return web.json_response(err.body(), status=401)
        if request.method == "GET":
            found = self._discovery(parts) or self._openapi(parts)
            if found is not None:
                return web.json_response(found)
        info: dict[str, str] = dict.fromkeys(
            ("verb", "group", "resource", "subresource", "namespace", "name"), ""
        )
        try:
            t, version, ns, name, sub = self._route(parts)
            q = request.query
            watch = q.get("watch") in ("1", "true")
            verb = {
                "GET": "watch" if watch else ("get" if name else "list"),
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete",
            }.get(request.method, request.method.lower())
            info = {
                "verb": verb,
                "group": t.group,
                "resource": t.plural,
                "subresource": sub,
                "namespace": ns,
                "name": name,
            }
            if sub and sub != "status":
                raise ApiError(404, "NotFound", f"subresource {sub!r} not found")
            for hook in list(self.hooks):
                outcome = hook(Request(**info, code=0))
                if outcome is not None:
                    await outcome
            if verb == "watch":
                self.log.append(Request(**info, code=200))
                return await self._watch(request, t, version, ns)
            result = await self._serve(request, verb, t, version, ns, name, sub == "status")
            code = 201 if verb == "create" else 200
            self.log.append(Request(**info, code=code))
            if sub == "status" and verb in ("update", "patch"):
                self.status_writes.append((self.log[-1], result.get("status") or {}))
            return web.json_response(result, status=code, dumps=_compact)
        except ApiError as err:
            self.log.append(Request(**info, code=err.code))
            return web.json_response(err.body(), status=err.code)

    async def _body(self, request: web.Request) -> Any:
        text = await request.text()
        try:
            if request.content_type == "application/apply-patch+yaml":
                return yaml.safe_load(text)
            return json.loads(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"cannot decode the body: {exc}") from None

    async def _serve(
        self,
        request: web.Request,
        verb: str,
        t: ResourceType,
        version: str,
        ns: str,
        name: str,
        status: bool,
    ) -> JSON:
        if t.namespaced and not ns and verb not in ("list",):
            raise ApiError(404, "NotFound", "a namespaced resource needs a namespace in the path")
        manager = request.query.get("fieldManager", "")
        if verb == "list":
            return self._list(request, t, version, ns)
        if verb == "create":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body is not an object")
            return self._served(self._create(t, ns, body, manager or "unknown"), t, version)
        o = self._find(t, ns, name)
        if verb == "get":
            if o is None:
                raise ApiError(404, "NotFound", f'{t.plural}.{t.group} "{name}" not found')
            return self._served(o.raw, t, version)
        if verb == "delete":
            return self._served(self._delete(t, ns, name), t, version)
        body = await self._body(request)
        if verb == "update":
            if not isinstance(body, dict) or (body.get("metadata") or {}).get("name") not in (
                None,
                name,
            ):
                raise ApiError(
                    400, "BadRequest", "the name of the object does not match the request"
                )
            if o is None and not status:
                return self._served(self._create(t, ns, body, manager or "unknown"), t, version)
            return self._served(
                self._update(t, ns, name, body, status, manager or "unknown"), t, version
            )
        # patch
        ctype = request.content_type
        if ctype == "application/apply-patch+yaml":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "an apply body is an object")
            force = request.query.get("force") in ("1", "true")
            return self._served(self._apply(t, ns, name, body, status, manager, force), t, version)
        if o is None:
            raise ApiError(404, "NotFound", f'{t.plural}.{t.group} "{name}" not found')
        if ctype == "application/merge-patch+json":
            patched = merge_patch(o.raw, body)
        elif ctype == "application/json-patch+json":
            patched = _json_patch(o.raw, body)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {ctype}",
            )
        if not isinstance(patched, dict):
            raise ApiError(422, "Invalid", "the patch does not give an object")
        meta = patched.setdefault("metadata", {})
        patched_rv = (
            (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        )
        if patched_rv is None:
            meta["resourceVersion"] = o.raw["metadata"]["resourceVersion"]  # no precondition
        return self._served(
            self._update(t, ns, name, patched, status, manager or "unknown", rv_required=False),
            t,
            version,
        )

    def _list(self, request: web.Request, t: ResourceType, version: str, ns: str) -> JSON:
        selects = label_selector(request.query.get("labelSelector", ""))
        items = sorted(
            (k, o) for k, o in self._store(t).items() if (not ns or k[0] == ns) and selects(o.raw)
        )
        start = ()
        token = request.query.get("continue")
        if token:
            try:
                start = tuple(json.loads(base64.b64decode(token)))
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid continue token") from None
            items = [(k, o) for k, o in items if k > start]
        limit = int(request.query.get("limit") or 0)
        meta: JSON = {"resourceVersion": str(self.rv)}
        if limit and len(items) > limit:
            items = items[:limit]
            meta["continue"] = base64.b64encode(json.dumps(list(items[-1][0])).encode()).decode()
            meta["remainingItemCount"] = len(self._store(t)) - limit
        api_version = t.api_version(version)
        # Shallow copies: the list is serialised as soon as it is returned and not kept, so
        # the stored objects need no deep copy (a page of routes would cost more to copy than
        # the client takes to decode it).
        return {
            "kind": f"{t.kind}List",
            "apiVersion": api_version,
            "metadata": meta,
            "items": [{**o.raw, "apiVersion": api_version} for _, o in items],
        }

    async def _watch(
        self, request: web.Request, t: ResourceType, version: str, ns: str
    ) -> web.StreamResponse:
        q = request.query
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)

        async def send(event: JSON) -> None:
            await resp.write(_compact(event).encode() + b"\n")

        rv_param = q.get("resourceVersion") or ""
        selects = label_selector(q.get("labelSelector", ""))
        watcher = _Watcher(t, version, ns, selects)
        backlog: list[JSON] = []
        if rv_param in ("", "0"):
            for (ons, _), o in sorted(self._store(t).items()):
                if (not ns or ons == ns) and selects(o.raw):
                    backlog.append({"type": "ADDED", "object": self._served(o.raw, t, version)})
        else:
            since = int(rv_param)
            if since < self._compacted:
                await send(
                    {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "reason": "Expired",
                            "code": 410,
                            "message": f"too old resource version: {since} ({self._compacted})",
                        },
                    }
                )
                await resp.write_eof()
                return resp
            for rv, et, etype, raw in self._events:
                if (
                    et == t
                    and rv > since
                    and (not ns or raw["metadata"].get("namespace") == ns)
                    and selects(raw)
                ):
                    backlog.append({"type": etype, "object": self._served(raw, t, version)})
        self._watchers.append(watcher)
        timeout = min(
            float(q.get("timeoutSeconds") or self.max_watch_seconds), self.max_watch_seconds
        )
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for old_event in backlog:
                await send(old_event)
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait = min(left, self.bookmark_interval) if bookmarks else left
                try:
                    async with asyncio.timeout(wait):  # not wait_for: see pyproject's TID251
                        event: JSON | None = await watcher.queue.get()
                except TimeoutError:
                    # A bookmark promises every event up to its resourceVersion was sent:
                    # not while an event (or a disconnect's end) is still queued, as when the
                    # loop was busy as the timer fired - those go first.
                    if bookmarks and watcher.queue.empty():
                        await send(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": t.kind,
                                    "apiVersion": t.api_version(version),
                                    "metadata": {"resourceVersion": str(self.rv)},
                                },
                            }
                        )
                    continue
                if event is None:  # forced disconnect
                    break
                await send(event)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watcher)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp


# ---------------------------------------------------------------- a client's view


def write_kubeconfig(api: KubeAPI, path: str) -> str:
    with open(path, "w") as f:
        yaml.safe_dump(api.kubeconfig(), f)
    return path
