"""The system as a graph: what ``GET /api/graph`` serves and the dashboard draws.

Built from what the server already holds - the current objects, the statuses the last
translation gave them (as ``/api/objects`` serves them) and that translation's IR - never
by translating again:

* nodes: GatewayClasses, Gateways, ListenerSets, listeners, routes of every kind, the
  backends routes refer to (Services, Envoy Gateway Backends), ReferenceGrants and
  policies (any object with ``spec.targetRefs``: BackendTLSPolicy today);
* edges: class -> Gateway -> (ListenerSet ->) listener -> route -> backend, a grant -> the
  reference it permits (a backend, or the listener whose certificate it lets in), a
  policy -> what it targets. A route's edge comes from the listener that serves it
  (:mod:`gateweave.dashboard.served`), or, where the IR cannot say (TCP/UDP), from the
  listeners of its accepted parentRef that take its kind; a rejected parentRef is a
  ``rejected`` edge carrying the reason;
* each node's health from its conditions (:func:`health`), the conditions themselves with
  the parent or ancestor each is about, the configuration errors about it, and the
  ``explain`` URL where ``gateweave explain`` knows the kind (the page fetches the object
  itself, with its status, on a click: ``/api/object``).

Positions come from :mod:`gateweave.dashboard.layout`; the same inputs give the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from gateweave import ir
from gateweave.api import models as m
from gateweave.api.kinds import ROUTE_KINDS, Key
from gateweave.dashboard import layout
from gateweave.dashboard.served import RouteId, served_listeners
from gateweave.explain import EXPLAINABLE
from gateweave.ir import Result
from gateweave.providers import ConfigError
from gateweave.snapshot import Snapshot
from gateweave.statusview import is_bad
from gateweave.translate.backends import backend_kind
from gateweave.translate.context import Ctx
from gateweave.translate.options import TranslateOptions

# Health of a node or an edge, from its conditions.
OK, WARN, FAIL, NONE = "ok", "warn", "fail", "none"
# A False Accepted or Programmed (or a True Conflicted) fails; any other condition that is not
# as it should be, or a Programmed still Pending, only degrades.
_FAILING_TYPES = ("Accepted", "Programmed")

# Columns, left to right (empty ones take no room).
COLUMN = {
    "GatewayClass": 0,
    "Gateway": 1,
    "ListenerSet": 2,
    "Listener": 3,
    **dict.fromkeys(ROUTE_KINDS, 4),
}
BACKEND_COLUMN, BINDING_COLUMN = 5, 6  # backends; ReferenceGrants and policies


class Condition(msgspec.Struct, kw_only=True, omit_defaults=True):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    scope: str = ""  # the parentRef or ancestor a route's or a policy's condition is about


class Node(msgspec.Struct, kw_only=True, omit_defaults=True):
    # "<Kind>/<namespace>/<name>" ("" namespace when cluster-scoped); listeners: "<parent
    # id>/listener/<name>"
    id: str
    kind: str
    name: str
    namespace: str = ""
    label: str  # first line drawn
    sublabel: str = ""  # second line drawn
    column: int
    health: str = NONE
    why: str = ""  # the first condition that is not as it should be: "Type Reason: message (scope)"
    conditions: list[Condition] = []
    details: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []  # /api/errors items about this object
    explain: str = ""  # the /api/explain URL, for kinds explain knows
    x: int = 0
    y: int = 0


class Edge(msgspec.Struct, kw_only=True, omit_defaults=True):
    source: str
    target: str
    # class | listener | listenerset | attach | rejected | unjudged | backend | grant | policy
    kind: str
    label: str = ""
    health: str = ""


class Graph(msgspec.Struct, kw_only=True):
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    node_width: int = layout.NODE_W
    node_height: int = layout.NODE_H


@dataclass(frozen=True)
class Inputs:
    snapshot: Snapshot  # the current objects
    objects: Mapping[Key, Mapping[str, Any]]  # custom objects with their status (/api/objects)
    result: Result | None  # the last translation
    errors: Sequence[ConfigError]
    options: TranslateOptions


def health(conditions: Sequence[Condition]) -> tuple[str, str]:
    """(health, why) of a set of conditions: NONE without any, or when none is known yet (the
    API server's defaults, Unknown/Pending, until a controller judges the object)."""
    if not any(c.status in ("True", "False") for c in conditions):
        return NONE, _why(conditions[0]) if conditions else ""
    bad = [c for c in conditions if is_bad({"type": c.type, "status": c.status})]
    if not bad:
        return OK, ""
    failing = any(
        (c.type in _FAILING_TYPES and c.reason != "Pending") or c.type == "Conflicted" for c in bad
    )
    return (FAIL if failing else WARN), _why(bad[0])


def _why(c: Condition) -> str:
    return f"{c.type} {c.reason}: {c.message}" + (f" ({c.scope})" if c.scope else "")


def build(inputs: Inputs) -> Graph:
    builder = _Builder(inputs)
    builder.run()
    nodes = sorted(builder.nodes.values(), key=lambda n: n.id)
    edges = sorted(builder.edges.values(), key=lambda e: (e.source, e.target, e.kind))
    width, height = layout.place(nodes, edges)
    nodes.sort(key=lambda n: (n.column, n.y, n.id))
    return Graph(nodes=nodes, edges=edges, width=width, height=height)


def node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


@dataclass(frozen=True)
class _Listener:
    id: str
    name: str
    port: int
    kinds: frozenset[str]  # status supportedKinds


def _conditions(raw: Iterable[Mapping[str, Any]], scope: str = "") -> list[Condition]:
    return [
        Condition(
            type=str(c.get("type", "")),
            status=str(c.get("status", "")),
            reason=str(c.get("reason", "")),
            message=str(c.get("message", "")),
            scope=scope,
        )
        for c in raw
    ]


def _ref_label(ref: Mapping[str, Any], default_ns: str) -> str:
    out = f"{ref.get('kind', 'Gateway')} {ref.get('namespace') or default_ns}/{ref.get('name')}"
    if ref.get("sectionName"):
        out += f"/{ref['sectionName']}"
    if ref.get("port"):
        out += f":{ref['port']}"
    return out


class _Builder:
    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.snapshot = inputs.snapshot
        self.ours = inputs.options.controller_name
        self.ctx = Ctx.build(inputs.snapshot, inputs.options)  # its ReferenceGrant index only
        self.nodes: dict[str, Node] = {}
        self.edges: dict[tuple[str, str, str], Edge] = {}
        self.listeners: dict[str, list[_Listener]] = defaultdict(
            list
        )  # by Gateway / ListenerSet id
        self.gateway_of: dict[
            str, str
        ] = {}  # Gateway / ListenerSet id -> the IR's Gateway name "ns/name"
        self.errors: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for err in inputs.errors:
            if err.kind:
                self.errors[node_id(err.kind, err.namespace, err.name)].append(err.to_dict())
        result = inputs.result
        clusters = {c.name: c for gw in result.xds.values() for c in gw.clusters} if result else {}
        self.clusters: dict[tuple[str, str, str], list[ir.Cluster]] = defaultdict(
            list
        )  # by backend
        for cname, cluster in sorted(clusters.items()):
            backend = cluster_backend(cname)
            if backend is not None:
                self.clusters[backend].append(cluster)
        self.served: dict[tuple[str, RouteId], set[str]] = {}

    def run(self) -> None:
        snap = self.snapshot
        hostnames: dict[tuple[str, str], str | None] = {}
        for _, gc in sorted(snap.gateway_classes.items()):
            self._object_node(gc, sublabel=f"GatewayClass · {gc.spec.controller_name}")
        for (ns, name), gw in sorted(snap.gateways.items()):
            gid = self._object_node(gw, sublabel=f"Gateway · {ns}")
            self.gateway_of[gid] = f"{ns}/{name}"
            self._edge(node_id("GatewayClass", "", gw.spec.gateway_class_name), gid, "class")
            self._listener_nodes(gid, gw, "Gateway", gw.spec.listeners)
            hostnames.update(
                ((f"{ns}/{name}", lst.name), lst.hostname) for lst in gw.spec.listeners
            )
        for (ns, _), ls in sorted(snap.listener_sets.items()):
            lid = self._object_node(ls, sublabel=f"ListenerSet · {ns}")
            ref = ls.spec.parent_ref
            parent_ns = ref.namespace or ns
            self.gateway_of[lid] = f"{parent_ns}/{ref.name}"
            self._edge(node_id(ref.kind, parent_ns, ref.name), lid, "listenerset")
            self._listener_nodes(lid, ls, "ListenerSet", ls.spec.listeners)
            for lst in ls.spec.listeners:
                hostnames.setdefault((f"{parent_ns}/{ref.name}", lst.name), lst.hostname)
        if self.inputs.result is not None:
            self.served = served_listeners(
                self.inputs.result.xds, self.inputs.result.infra, hostnames
            )
        for kind in ROUTE_KINDS:
            for _, route in sorted(snap.by_kind(kind).items()):
                self._route(kind, route)
        for _, grant in sorted(snap.reference_grants.items()):
            self._object_node(
                grant,
                column=BINDING_COLUMN,
                sublabel=f"ReferenceGrant · {grant.metadata.namespace}",
            )
        self._certificate_grants()
        for obj in sorted(
            snap.objects(), key=lambda o: (o.kind, o.metadata.namespace, o.metadata.name)
        ):
            if getattr(getattr(obj, "spec", None), "target_refs", None) is not None:
                self._policy(obj)
        self._drop_dangling_edges()
        binding = {e.source for e in self.edges.values() if e.kind == "grant"}
        for node in self.nodes.values():
            if node.kind == "ReferenceGrant":
                node.health, node.why = (
                    (OK, "") if node.id in binding else (NONE, "permits no reference that is made")
                )

    # ------------------------------------------------------------ nodes

    def _object_node(self, obj: Any, *, column: int | None = None, sublabel: str = "") -> str:
        meta = obj.metadata
        nid = node_id(obj.kind, meta.namespace, meta.name)
        raw = self.inputs.objects.get(Key(obj.kind, meta.namespace, meta.name))
        status: Mapping[str, Any] = (raw or {}).get("status") or {}
        conds = _conditions(status.get("conditions", []))
        node = Node(
            id=nid,
            kind=obj.kind,
            name=meta.name,
            namespace=meta.namespace,
            label=meta.name,
            sublabel=sublabel,
            column=COLUMN.get(obj.kind, BINDING_COLUMN) if column is None else column,
            conditions=conds,
            errors=self.errors.get(nid, []),
            explain=f"/api/explain/{obj.kind}/{meta.namespace}/{meta.name}"
            if obj.kind in EXPLAINABLE
            else "",
        )
        node.health, node.why = health(conds)
        self.nodes[nid] = node
        return nid

    def _listener_nodes(
        self, parent_id: str, owner: Any, owner_kind: str, listeners: Sequence[m.Listener]
    ) -> None:
        raw = (
            self.inputs.objects.get(Key(owner_kind, owner.metadata.namespace, owner.metadata.name))
            or {}
        )
        specs = {lst.get("name"): lst for lst in (raw.get("spec") or {}).get("listeners", [])}
        statuses = {s.get("name"): s for s in (raw.get("status") or {}).get("listeners", [])}
        for lst in listeners:
            lid = f"{parent_id}/listener/{lst.name}"
            st = statuses.get(lst.name, {})
            conds = _conditions(st.get("conditions", []))
            where = f"{lst.protocol} :{lst.port}" + (f" {lst.hostname}" if lst.hostname else "")
            node = Node(
                id=lid,
                kind="Listener",
                name=lst.name,
                namespace=owner.metadata.namespace,
                label=lst.name,
                sublabel=where,
                column=COLUMN["Listener"],
                conditions=conds,
                details={
                    "listener": specs.get(lst.name, {}),
                    "of": parent_id,
                    **{k: st[k] for k in ("attachedRoutes", "supportedKinds") if k in st},
                },
            )
            node.health, node.why = health(conds)
            self.nodes[lid] = node
            self._edge(parent_id, lid, "listener")
            kinds = frozenset(k.get("kind", "") for k in st.get("supportedKinds", []))
            self.listeners[parent_id].append(_Listener(lid, lst.name, lst.port, kinds))

    def _backend_node(self, kind: str, ns: str, name: str) -> str:
        nid = node_id(kind, ns, name)
        if nid in self.nodes:
            return nid
        if kind == "Backend" and (ns, name) in self.snapshot.backends:
            self._object_node(
                self.snapshot.backends[(ns, name)],
                column=BACKEND_COLUMN,
                sublabel=f"Backend · {ns}",
            )
        else:
            self.nodes[nid] = Node(
                id=nid,
                kind=kind,
                name=name,
                namespace=ns,
                label=name,
                sublabel=f"{kind} · {ns}",
                column=BACKEND_COLUMN,
            )
        node = self.nodes[nid]
        clusters = self.clusters.get((kind, ns, name), [])
        node.details = {
            "clusters": [
                {
                    "name": c.name,
                    "protocol": c.protocol,
                    "tls": c.tls is not None,
                    "endpoints": [
                        e.address if e.type == "Unix" else f"{e.address}:{e.port}"
                        for e in c.endpoints
                    ],
                }
                for c in clusters
            ]
        }
        if kind == "Service":
            svc = self.snapshot.services.get((ns, name))
            if svc is None:
                node.health, node.why = FAIL, f"Service {ns}/{name} not found"
            else:
                node.details["ports"] = [msgspec.to_builtins(p) for p in svc.spec.ports]
                if not clusters:
                    node.health, node.why = NONE, "no route of ours sends to it"
                elif any(c.endpoints for c in clusters):
                    node.health = OK
                else:
                    node.health, node.why = WARN, "no ready endpoints"
        return nid

    # ------------------------------------------------------------ routes

    def _route(self, kind: str, route: Any) -> None:
        ns = route.metadata.namespace
        rid = self._object_node(route, sublabel=f"{kind} · {ns}")
        node = self.nodes[rid]
        raw = self.inputs.objects.get(Key(kind, ns, route.metadata.name)) or {}
        judged: set[tuple[Any, ...]] = set()
        conds: list[Condition] = []
        for entry in (raw.get("status") or {}).get("parents", []):
            if entry.get("controllerName") != self.ours:
                continue
            ref = entry.get("parentRef") or {}
            judged.add(_ref_key(ref, ns))
            entry_conds = _conditions(
                entry.get("conditions", []), scope=f"parent {_ref_label(ref, ns)}"
            )
            conds.extend(entry_conds)
            self._parent_edges(kind, rid, ns, ref, entry_conds)
        node.conditions = conds
        node.health, node.why = health(conds)
        for pref in route.spec.parent_refs:
            ref = {
                "kind": pref.kind,
                "namespace": pref.namespace,
                "name": pref.name,
                "sectionName": pref.section_name,
                "port": pref.port,
            }
            if _ref_key(ref, ns) not in judged:
                self._edge(
                    node_id(pref.kind, pref.namespace or ns, pref.name),
                    rid,
                    "unjudged",
                    label="not ours to judge",
                    health=NONE,
                )
        for ref, role in _backend_refs(route):
            self._backend_edge(kind, rid, ns, ref, role)

    def _parent_edges(
        self, kind: str, rid: str, ns: str, ref: Mapping[str, Any], conds: list[Condition]
    ) -> None:
        parent = node_id(
            ref.get("kind", "Gateway"), ref.get("namespace") or ns, str(ref.get("name"))
        )
        section, port = ref.get("sectionName"), ref.get("port")
        candidates = [
            lst
            for lst in self.listeners.get(parent, [])
            if (section is None or lst.name == section) and (port is None or lst.port == port)
        ]
        accepted = next((c for c in conds if c.type == "Accepted"), None)
        if accepted is None or accepted.status != "True":
            source = candidates[0].id if section is not None and candidates else parent
            self._edge(
                source,
                rid,
                "rejected",
                label=accepted.reason if accepted else "not accepted",
                health=FAIL,
            )
            return
        served = self.served.get((self.gateway_of.get(parent, ""), rid), set())
        chosen = [lst.id for lst in candidates if lst.name in served] or [
            lst.id for lst in candidates if kind in lst.kinds
        ]
        edge_health, _ = health(conds)
        for source in chosen or [parent]:
            self._edge(source, rid, "attach", health=edge_health)

    def _backend_edge(self, route_kind: str, rid: str, route_ns: str, ref: Any, role: str) -> None:
        kind, group = backend_kind(ref.group, ref.kind) or (ref.kind, ref.group)
        ns = ref.namespace or route_ns
        target = self._backend_node(kind, ns, ref.name)
        label = role if role else (f":{ref.port}" if ref.port is not None else "")
        weight = getattr(ref, "weight", 1)
        if not role and weight != 1:
            label += f" w{weight}"
        key = (rid, target, "backend")
        if key in self.edges:
            labels = {*self.edges[key].label.split(", "), label} - {""}
            self.edges[key].label = ", ".join(sorted(labels))
        else:
            self._edge(rid, target, "backend", label=label)
        if ns != route_ns:
            grant = self.ctx.granting(
                m.GATEWAY_GROUP, route_kind, route_ns, group, kind, ns, ref.name
            )
            if grant is not None:
                self._edge(
                    node_id("ReferenceGrant", ns, grant.metadata.name),
                    target,
                    "grant",
                    label=f"from {route_kind} in {route_ns}",
                )

    # ------------------------------------------------------------ bindings

    def _certificate_grants(self) -> None:
        """A grant that lets a listener use a Secret of another namespace binds to that listener."""
        owners: list[tuple[str, Any]] = [
            ("Gateway", gw) for _, gw in sorted(self.snapshot.gateways.items())
        ]
        owners += [("ListenerSet", ls) for _, ls in sorted(self.snapshot.listener_sets.items())]
        for owner_kind, owner in owners:
            ons = owner.metadata.namespace
            for lst in owner.spec.listeners:
                for ref in lst.tls.certificate_refs if lst.tls is not None else ():
                    ns = ref.namespace or ons
                    if ns == ons:
                        continue
                    grant = self.ctx.granting(
                        m.GATEWAY_GROUP, owner_kind, ons, ref.group, ref.kind, ns, ref.name
                    )
                    if grant is not None:
                        lid = f"{node_id(owner_kind, ons, owner.metadata.name)}/listener/{lst.name}"
                        self._edge(
                            node_id("ReferenceGrant", ns, grant.metadata.name),
                            lid,
                            "grant",
                            label=f"{ref.kind} {ns}/{ref.name}",
                        )

    def _policy(self, policy: Any) -> None:
        ns = policy.metadata.namespace
        pid = self._object_node(policy, column=BINDING_COLUMN, sublabel=f"{policy.kind} · {ns}")
        node = self.nodes[pid]
        conds: list[Condition] = []
        raw = self.inputs.objects.get(Key(policy.kind, ns, policy.metadata.name)) or {}
        for entry in (raw.get("status") or {}).get("ancestors", []):
            if entry.get("controllerName") == self.ours:
                scope = f"ancestor {_ref_label(entry.get('ancestorRef') or {}, ns)}"
                conds.extend(_conditions(entry.get("conditions", []), scope=scope))
        node.conditions = conds
        node.health, node.why = health(conds)
        for ref in policy.spec.target_refs:
            section = getattr(ref, "section_name", None)
            backend = backend_kind(ref.group, ref.kind)
            if backend is not None:  # a Service (BackendTLSPolicy) or a Backend: its backend node
                kind = backend[0]
                exists = (ns, ref.name) in (
                    self.snapshot.services if kind == "Service" else self.snapshot.backends
                )
                if not exists and node_id(kind, ns, ref.name) not in self.nodes:
                    continue
                target = self._backend_node(kind, ns, ref.name)
            elif ref.kind in ("Gateway", "ListenerSet") and section:
                target = f"{node_id(ref.kind, ns, ref.name)}/listener/{section}"
                section = None
            else:
                target = node_id(ref.kind, ns, ref.name)
            self._edge(pid, target, "policy", label=section or "")

    # ------------------------------------------------------------ edges

    def _edge(
        self, source: str, target: str, kind: str, *, label: str = "", health: str = ""
    ) -> None:
        self.edges.setdefault(
            (source, target, kind),
            Edge(source=source, target=target, kind=kind, label=label, health=health),
        )

    def _drop_dangling_edges(self) -> None:
        """Edges to or from what is not there (a Gateway's missing class, a policy's missing
        target).
        """
        self.edges = {
            k: e for k, e in self.edges.items() if e.source in self.nodes and e.target in self.nodes
        }


def _ref_key(ref: Mapping[str, Any], default_ns: str) -> tuple[Any, ...]:
    return (
        ref.get("kind") or "Gateway",
        ref.get("namespace") or default_ns,
        ref.get("name"),
        ref.get("sectionName"),
        ref.get("port"),
    )


def _backend_refs(route: Any) -> Iterable[tuple[Any, str]]:
    """(backendRef, role) of every rule of a route: role "" for a
    backend, "mirror" for a mirror's.
    """
    for rule in route.spec.rules:
        for ref in rule.backend_refs:
            yield ref, ""
        for f in getattr(rule, "filters", ()):
            mirror = getattr(f, "request_mirror", None)
            if mirror is not None:
                yield mirror.backend_ref, "mirror"


def cluster_backend(cluster_name: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the backend an IR cluster reaches: translate/backends.py names
    them ``<ns>/<service>/<port>/<protocol>`` and ``<ns>/<backend>/Backend/<protocol>``."""
    parts = cluster_name.split("/")
    if len(parts) < 4:
        return None
    if parts[2] == "Backend":
        return ("Backend", parts[0], parts[1])
    if parts[2].isdigit():
        return ("Service", parts[0], parts[1])
    return None
