"""Incremental translation: the same Result as :func:`gateweave.translate.translate`, for a
fraction of the work when little changed.

:class:`IncrementalTranslator` is called like ``translate(snapshot, options)`` with a new
snapshot each time. It keeps what the previous call computed and redoes only what the
difference between the two snapshots can affect. Its output equals a full translation of the
same snapshot (``tests/translate/test_incremental.py`` checks that with hypothesis on the
conformance
object sets and generated ones; ``check=True`` compares every call against a full
translation and raises on the first difference).

What is reused, and what invalidates it (the store hands out the same model instance while an
object does not change, so "unchanged" is an identity check per key):

* **Routes** (any kind): its translation, the listeners it attaches to, its status. Redone
  when the route changes, or a Service or Backend it referred to (found or not) or an
  EndpointSlice of such a Service changes, or a ReferenceGrant in a namespace it refers into
  from its own, or its Namespace's labels while a listener selects namespaces by labels.
* **Gateway side** (GatewayClasses, Gateways, listeners, TLS): recomputed whenever a
  GatewayClass, Gateway, GatewayParameters, Secret, ReferenceGrant, Namespace's labels (or, in
  Kubernetes address mode, a Service) change or the data plane reports something new;
  cheap, it is per Gateway. When what routes
  and the xDS assembly read from it (a fingerprint of every Gateway's acceptance, address,
  listeners and telemetry) is unchanged, the route side is kept; Gateway, ListenerSet and
  GatewayClass statuses and
  the infrastructure IR are taken from the new run.
* **xDS IR**, per Gateway, per Envoy listener, per virtual host: a virtual host is rebuilt
  when an attachment to its domain changed; a RouteConfig/Port/XdsGateway is rebuilt when one
  of its parts changed, and kept (same instance) when the rebuilt one is equal.
* **Envoy Gateway Backends**: their status is written while a route of ours refers to one
  (counted per route), judged again when the Backend changes; a change of a Secret a
  Backend's ``tls`` names is a full translation.
* **Envoy Gateway policies** (BackendTrafficPolicy, ClientTrafficPolicy, SecurityPolicy):
  the attachment stage (``PolicyAttacher``: every policy's targets, holders and status) is
  run again when what every policy reads may have changed - a Gateway (its labels: the rest
  it reads is in the fingerprint), a Secret or ConfigMap, a Service, EndpointSlice or
  Backend while a policy's spec names a backend, a Namespace's labels or a ReferenceGrant
  while a policy has targetSelectors, a route a policy's targetRefs name or of a kind its
  targetSelectors pick from. A change of policies alone is settled where they reach
  (``PolicyAttacher.reattach``: the scopes they name before and after change hands, the
  policies naming those scopes or holding one above them get their report made again), as
  is a ReferenceGrant's (the policies in the namespaces it lets in, as if they changed);
  otherwise its last result holds. Comparing the scopes' holders
  with the last result gives the scopes whose holder changed: the attachments of the routes
  (and rules) and of the listeners under them get their effects computed again (and a
  listener its ClientTrafficPolicy's client settings), as do the attachments of every route
  translated again; those whose effects changed mark their virtual hosts dirty. The
  clusters a policy adds (an auth service, a BackendTrafficPolicy's copies of clusters) are
  kept per attachment and per Envoy listener.
* Anything else - a ConfigMap, BackendTLSPolicy or ListenerSet change, other options, a
  changed fingerprint - is a full translation, which also rebuilds every index.

It runs the stages of a translation as ``translate/core.py`` names them, calling the same
functions for the context, the gateway side, the Gateway statuses and the infrastructure IR;
the route side (:meth:`IncrementalTranslator._add` per route, in ``routes.in_order``) and the
xDS IR (:meth:`IncrementalTranslator._finish`) are its own versions, which remember what
they built.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gateweave import ir
from gateweave.api.kinds import KINDS, POLICY_KINDS, ROUTE_KINDS
from gateweave.ir import Result
from gateweave.snapshot import NN, Snapshot
from gateweave.translate import core, egbackend, routes, xdsir
from gateweave.translate.attachment import Attachment, RouteTranslation, ServicePortKey
from gateweave.translate.backends import BackendResolver
from gateweave.translate.backendtls import BackendTLSIndex
from gateweave.translate.context import Ctx, GatewayCtx, ListenerCtx, SortKey, sort_key
from gateweave.translate.core import release, translate_all
from gateweave.translate.options import TranslateOptions
from gateweave.translate.parentrefs import ParentIndex
from gateweave.translate.policies.attach import (
    ROUTE,
    PolicyAttacher,
    PolicyIndex,
    PolicyReport,
    Resolved,
    Scope,
    listener_chain,
    named_targets,
)
from gateweave.translate.policies.effects import (
    attachment_effects,
    listener_client,
    route_effect_kinds,
)

RouteKey = tuple[str, str, str]  # (kind, namespace, name)
StatusKey = tuple[str, str, str]
_KIND_INDEX = {kind: i for i, kind in enumerate(ROUTE_KINDS)}
_SERVICE_LABEL = "kubernetes.io/service-name"

# Changes the route side cannot take incrementally: a full translation.
_FULL_KINDS = frozenset({"ConfigMap", "BackendTLSPolicy", "ListenerSet"})
# Changes that re-run the gateway side (the route side is kept when its fingerprint holds).
_GATEWAY_KINDS = frozenset({"GatewayClass", "Gateway", "Secret", "GatewayParameters"})


_BACKEND_FIELDS = frozenset({"backendRef", "backendRefs"})
# What the incremental translator keeps of a policy's spec: the routes its targetRefs name,
# the kinds its targetSelectors pick from, whether it names a backend (_names_backends).
_Targets = tuple[frozenset[RouteKey], frozenset[str], bool]


def _names_backends(value: Any) -> bool:
    """Whether a policy's spec holds a ``backendRef``/``backendRefs`` field at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not _BACKEND_FIELDS.isdisjoint(item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _target_view(route: Any) -> tuple[Any, ...] | None:
    """What the attachment stage reads of a route as a target: its labels (targetSelectors), its
    parentRefs (whether it is ours, its ancestors) and its rule names (sectionName)."""
    if route is None:
        return None
    return (
        route.metadata.labels,
        route.spec.parent_refs,
        tuple(getattr(rule, "name", None) for rule in getattr(route.spec, "rules", ())),
    )


def _same_holder(a: PolicyReport | None, b: PolicyReport | None) -> bool:
    """Whether two holders of one scope govern alike (same policy object, both applied or not,
    equal resolved effect)."""
    if a is None or b is None:
        return a is b
    return a.policy is b.policy and a.applied == b.applied and a.effect == b.effect


def _changed_scopes(old: PolicyIndex, new: PolicyIndex) -> dict[str, set[Scope]]:
    """Per policy kind, the scopes whose holder governs otherwise in ``new`` than in ``old``."""
    out: dict[str, set[Scope]] = {}
    for kind in old.holders.keys() | new.holders.keys():
        a, b = old.holders.get(kind, {}), new.holders.get(kind, {})
        diff = {s for s in a.keys() | b.keys() if not _same_holder(a.get(s), b.get(s))}
        if diff:
            out[kind] = diff
    return out


def _moved_scopes(
    before: dict[str, dict[Scope, PolicyReport | None]], index: PolicyIndex
) -> dict[str, set[Scope]]:
    """Per policy kind, the scopes of ``before`` (each with the report that held it) whose
    holder governs otherwise in ``index``."""
    out: dict[str, set[Scope]] = {}
    for kind, held in before.items():
        now = index.holders.get(kind, {})
        diff = {s for s, rep in held.items() if not _same_holder(rep, now.get(s))}
        if diff:
            out[kind] = diff
    return out


def _bump(counts: dict[Any, int], item: Any, step: int) -> None:
    """Add ``step`` to ``item``'s count, forgetting it at zero."""
    left = counts.get(item, 0) + step
    if left:
        counts[item] = left
    else:
        del counts[item]


def _other_options(options: TranslateOptions) -> TranslateOptions:
    """The options a change of which is a full translation: all but the data plane's reports
    (Gateway side) and the rejected routes (each route side entry)."""
    return msgspec.structs.replace(options, dataplane=None, rejected={})


def _order(kind: str, route: Any) -> tuple[Any, ...]:
    """The order a full translation visits routes in (and lists them on a listener): the
    kind's index, then the route's sort_key (a tuple of four: compared as if laid out flat).
    Made when needed, not kept per entry (a pair per route: docs/benchmarks.md, eighth
    round)."""
    return (_KIND_INDEX[kind], sort_key(route))


def _att_order(att: Attachment) -> tuple[Any, ...]:
    return _order(att.translation.kind, att.translation.route)


# A listener's HTTP attachments serving one domain, in route order: the attachment itself when
# it is the only one (most domains: a tuple of one per domain was 1.4 MB at 10,000 routes).
_Bucket = Attachment | tuple[Attachment, ...]


def _bucket(atts: tuple[Attachment, ...]) -> _Bucket:
    return atts[0] if len(atts) == 1 else atts


def _bucket_atts(bucket: _Bucket) -> tuple[Attachment, ...]:
    return (bucket,) if isinstance(bucket, Attachment) else bucket


def _attachments(
    tr: RouteTranslation, attached: list[tuple[ListenerCtx, tuple[str, ...] | None]]
) -> Attachment | tuple[Attachment, ...]:
    """A route's attachments, parallel to the listeners it attached to (``_Entry.held``): one
    per distinct set of hostnames, shared by the listeners it serves alike (a route on an
    HTTP and an HTTPS listener, say) until a policy's effects tell them apart (``_own``)."""
    out: list[Attachment] = []
    for _, hosts in attached:
        for att in out:
            if att.hostnames == hosts:
                break
        else:
            att = Attachment(translation=tr, hostnames=hosts)
        out.append(att)
    return _held(tuple(out))


def _held(atts: tuple[Attachment, ...]) -> Attachment | tuple[Attachment, ...]:
    """``atts`` as an entry holds them (``_Entry.held``)."""
    if not atts:
        return atts
    first = atts[0]
    for att in atts:
        if att is not first:
            return atts
    return first


@dataclass(eq=False, slots=True)
class _Entry:
    """One route as the previous translation left it."""

    key: RouteKey
    model: Any  # (its place among a listener's routes: _order(key[0], model), not kept)
    translation: RouteTranslation
    # its attachment to each listener it attached to (``atts``): the attachment alone when
    # every one of them holds the same (most routes: no tuple per entry), else one per listener
    held: Attachment | tuple[Attachment, ...]
    listeners: tuple[ListenerCtx, ...]  # parallel to atts
    accepted_by: tuple[GatewayCtx, ...]
    status: dict[str, Any]
    services: tuple[tuple[str, ...], ...]  # the Services (NN) it looked up (found or not)
    backends: tuple[NN, ...]  # Envoy Gateway Backends it refers to, when it is ours (their status)

    @property
    def atts(self) -> tuple[Attachment, ...]:
        """One attachment per listener, parallel to ``listeners``."""
        held = self.held
        return (held,) * len(self.listeners) if isinstance(held, Attachment) else held


@dataclass(eq=False)
class _RouteConfigState:
    """One RouteConfig (an HTTP port's, or an HTTPS listener's filter chain's) by domain."""

    name: str
    lcs: list[ListenerCtx]  # the listeners whose routes it serves
    owners: list[ListenerCtx]  # the listeners that compete for its domains
    https: ListenerCtx | None  # the HTTPS listener of a filter chain (misdirected-request hosts)
    vhosts: dict[str, ir.VirtualHost] = field(default_factory=dict)
    domains: list[str] = field(default_factory=list)  # sorted keys of vhosts
    clusters: dict[str, tuple[str, ...]] = field(default_factory=dict)  # domain -> cluster names
    used: dict[str, int] = field(default_factory=dict)  # cluster name -> virtual hosts using it
    extras: dict[str, ir.VirtualHost] = field(default_factory=dict)
    config: ir.RouteConfig | None = None


@dataclass(eq=False)
class _GatewayState:
    ports: dict[str, ir.Port]  # by Envoy listener name, in port-plan order
    port_used: dict[str, set[str]]  # cluster names per Envoy listener
    # per Envoy listener: the copies of clusters with a BackendTrafficPolicy's settings its
    # routes send to (xdsir.policy_clusters)
    port_derived: dict[str, dict[str, ir.Cluster]] = field(default_factory=dict)
    cert_clusters: dict[str, tuple[ir.Cluster, ir.Cluster]] = field(default_factory=dict)
    xds: ir.XdsGateway | None = None


def _fingerprint(gws: list[GatewayCtx]) -> tuple[Any, ...]:
    """Everything the route side and the xDS assembly read from the gateway side."""

    def lfp(lc: ListenerCtx) -> tuple[Any, ...]:
        owner = lc.listener_set.metadata if lc.listener_set is not None else None
        return (
            lc.listener,
            (owner.namespace, owner.name) if owner is not None else None,
            tuple(lc.supported_kinds),
            lc.accepted,
            lc.ready,
            lc.tls,
        )

    return tuple(
        (
            gw.key,
            gw.accepted,
            gw.serving,
            gw.address,
            gw.backend_client_cert,
            # its GatewayParameters' access log and tracing: a change is a full translation
            gw.telemetry,
            tuple(lfp(lc) for lc in gw.listeners),
            tuple(
                ((ls.metadata.namespace, ls.metadata.name), tuple(lfp(lc) for lc in lcs))
                for ls, lcs in gw.listener_sets
            ),
        )
        for gw in gws
    )


def _listener_id(lc: ListenerCtx) -> tuple[Any, ...]:
    owner = lc.listener_set.metadata if lc.listener_set is not None else None
    return (lc.gateway.key, (owner.namespace, owner.name) if owner is not None else None, lc.name)


def _status_listeners(gws: Iterable[GatewayCtx], ls_results: Iterable[Any]) -> list[ListenerCtx]:
    out: list[ListenerCtx] = []
    for gw in gws:
        out.extend(gw.listeners)
    for lf in ls_results:
        out.extend(lf.listeners)
    return out


def _changed_keys(old: Mapping[NN, Any], new: Mapping[NN, Any]) -> set[NN]:
    """Keys added, removed or whose model is another instance."""
    changed = {k for k, v in new.items() if old.get(k) is not v}
    added = sum(1 for k in changed if k not in old)
    if len(old) != len(new) - added:
        changed.update(k for k in old if k not in new)
    return changed


def _backend_secrets(snapshot: Snapshot) -> set[NN]:
    """The Secrets the ``tls`` of some Envoy Gateway Backend names."""
    out: set[NN] = set()
    for (ns, _), be in snapshot.backends.items():
        tls = be.spec.tls
        if tls is None:
            continue
        out.update((ns, ref.name) for ref in tls.ca_certificate_refs if ref.kind == "Secret")
        if tls.client_certificate_ref is not None:
            out.add((tls.client_certificate_ref.namespace or ns, tls.client_certificate_ref.name))
    return out


def _changes(old: Snapshot, new: Snapshot) -> dict[str, set[NN]]:
    """The keys that differ between two snapshots, by kind: from the store's change log when
    both come from the same store and it still holds the span, else by comparing every key."""
    log = new.changelog
    span = (
        log.between(old.position, new.position)
        if log is not None and old.changelog is log
        else None
    )
    changed: dict[str, set[NN]] = {}
    if span is not None:
        for kind, key in span:
            changed.setdefault(kind, set()).add(key)
        return changed
    for kind in KINDS:
        keys = _changed_keys(old.by_kind(kind), new.by_kind(kind))
        if keys:
            changed[kind] = keys
    return changed


class IncrementalTranslator:
    """``translate`` with memory: call it with successive snapshots (one processor at a time)."""

    def __init__(self, *, check: bool = False) -> None:
        self.check = check
        self.full_translations = 0  # how many calls were full translations (tests, metrics)
        self._snapshot: Snapshot | None = None
        self._options: TranslateOptions | None = None
        self._gws: list[GatewayCtx] = []  # route side: attachments and xDS read these
        self._status_gws: list[GatewayCtx] = self._gws  # statuses and the infra IR read these
        self._pindex = PolicyIndex()  # the policy stage's last result
        self._attacher: PolicyAttacher | None = None  # the stage kept (None: no policy)
        self._resolved: Resolved = {}  # what each policy's kind made of it (attach.py)
        # per policy: the routes its targetRefs name, the kinds its selectors pick from and
        # whether its spec names a backend (it reads Services and EndpointSlices)
        self._targets: dict[StatusKey, _Targets] = {}
        self._fresh: list[tuple[ListenerCtx, RouteKey, Attachment]] = []  # added since last stage
        self._named: dict[RouteKey, int] = {}  # every policy's targetRefs (how many name each)
        self._selected: dict[str, int] = {}  # the kinds policies' targetSelectors pick from
        self._service_readers = 0  # the policies whose spec names a backend

    def __call__(self, snapshot: Snapshot, options: TranslateOptions | None = None) -> Result:
        options = options or TranslateOptions()
        try:
            result = self._translate(snapshot, options)
        except BaseException:
            self._snapshot = None  # never build on a state a failure left half-updated
            raise
        if self.check:
            _compare(result, translate_all(snapshot, options))
        return result

    # ------------------------------------------------------------ deciding

    def _translate(self, snapshot: Snapshot, options: TranslateOptions) -> Result:
        old, old_options = self._snapshot, self._options
        if (
            old is None
            or old_options is None
            or _other_options(old_options) != _other_options(options)
        ):
            return self._full(snapshot, options)
        changed = _changes(old, snapshot)
        # A route that enters or leaves the quarantine is translated again, as if it changed.
        before, after = old_options.rejected, options.rejected
        if before != after:
            for kind, ns, name in before.keys() | after.keys():
                if (
                    before.get((kind, ns, name)) != after.get((kind, ns, name))
                    and kind in _KIND_INDEX
                ):
                    changed.setdefault(kind, set()).add((ns, name))
        if _FULL_KINDS & changed.keys():
            return self._full(snapshot, options)
        if (
            "Secret" in changed
            and snapshot.backends
            and changed["Secret"] & _backend_secrets(snapshot)
        ):
            return self._full(snapshot, options)
        rerun_gateways = (
            bool(_GATEWAY_KINDS & changed.keys()) or old_options.dataplane != options.dataplane
        )
        if options.address_mode == "kubernetes" and "Service" in changed:
            rerun_gateways = True
        return self._step(snapshot, options, changed, rerun_gateways)

    # ------------------------------------------------------------ a full translation

    def _full(self, snapshot: Snapshot, options: TranslateOptions) -> Result:
        self.full_translations += 1
        self._release()
        ctx = core.context(snapshot, options)
        gws = core.gateway_side(ctx)
        self._ctx = ctx
        self._gws = gws
        self._status_gws = gws
        self._ls_results = list(ctx.listener_set_results)
        self._fingerprint = _fingerprint(gws)
        self._gateway_statuses: dict[StatusKey, dict[str, Any]] = dict(
            ctx.statuses
        )  # GatewayClass statuses
        self._infra = core.infra_ir(ctx, gws)
        # The route side, one route at a time (_add), remembering what each one did.
        self._tls = BackendTLSIndex(ctx)
        self._parents = ParentIndex(ctx, gws)
        self._slice_keys: dict[NN, set[NN]] = {}
        for key, eps in snapshot.endpoint_slices.items():
            svc = eps.metadata.labels.get(_SERVICE_LABEL)
            if svc:
                self._slice_keys.setdefault((key[0], svc), set()).add(key)
        self._entries: dict[RouteKey, _Entry] = {}
        # Each distinct tuple of listeners an entry attached to, and of Gateways that accepted
        # it, kept once (most routes repeat a few): for one call (emptied by each step, so it
        # never holds listeners a rerun gateway side replaced).
        self._tuples: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # A Service's (or Backend's) users: the routes that refer to it, as a dict's keys (half
        # the memory of a set of the same keys; thousands of these at scale).
        self._users: dict[tuple[str, ...], dict[RouteKey, None]] = {}
        # Per listener, per domain: the HTTP attachments, in route order (a tuple, replaced on a
        # change: most domains have one, and a tuple of one is a third of a list of one).
        self._domain_atts: dict[ListenerCtx, dict[str, _Bucket]] = {}
        self._clusters: dict[str, ir.Cluster] = {}
        self._cluster_refs: dict[str, int] = {}
        # Service port -> Gateway -> routes accepted there that use it (BackendTLSPolicy ancestors)
        self._using: dict[ServicePortKey, dict[GatewayCtx, int]] = {}
        self._dirty: dict[ListenerCtx, set[str]] = {}
        self._dirty_gateways: set[GatewayCtx] = set()
        self._rcs: dict[str, _RouteConfigState] = {}
        self._gw_states: dict[NN, _GatewayState] = {}
        self._statuses: dict[StatusKey, dict[str, Any]] = {}
        self._other_keys: set[StatusKey] = set()
        self._xds: dict[str, ir.XdsGateway] = {}
        self._visited: set[str] = set()
        self._backend_users: dict[NN, int] = {}  # Backend -> routes of ours referring to it
        self._backend_statuses: dict[
            NN, tuple[Any, dict[str, Any]]
        ] = {}  # Backend -> (model, status)
        self._pindex = PolicyIndex()
        self._resolved = {}
        self._policy_statuses: dict[StatusKey, dict[str, Any]] = {}
        # the attachments whose policy effects add clusters (an auth service), per listener
        self._effect_atts: dict[ListenerCtx, dict[RouteKey, Attachment]] = {}
        self._fresh = []

        resolver = BackendResolver(ctx, self._tls, touched=set())
        for kind, order, route in routes.in_order(snapshot):
            self._add(kind, route, resolver, order)
        self._policies(ctx, None)
        self._snapshot, self._options = snapshot, options
        return self._finish(ctx, rebuild_all=True)

    def _release(self) -> None:
        """Let reference counting free the previous state at once (see core.release)."""
        release(self._gws)
        if self._status_gws is not self._gws:
            release(self._status_gws)
        self._rcs = {}
        self._domain_atts = {}
        self._dirty = {}

    # ------------------------------------------------------------ an incremental step

    def _step(
        self,
        snapshot: Snapshot,
        options: TranslateOptions,
        changed: dict[str, set[NN]],
        rerun_gateways: bool,
    ) -> Result:
        self._tuples = {}
        ctx = self._ctx
        ctx.snapshot = snapshot
        ctx.options = options
        # Namespace labels and ReferenceGrants: the context's indexes kept current (the
        # gateway side reads both: it runs again, its fingerprint deciding as for a Gateway).
        relabelled = self._relabel(ctx, changed.get("Namespace", ()))
        granting = {ns for ns, _ in changed.get("ReferenceGrant", ())}
        for ns in granting:
            grants = [g for (gns, _), g in sorted(snapshot.reference_grants.items()) if gns == ns]
            if grants:
                ctx.grants_by_namespace[ns] = grants
            else:
                ctx.grants_by_namespace.pop(ns, None)
        if relabelled or granting:
            rerun_gateways = True
        if not relabelled:
            changed.pop("Namespace", None)  # annotations or the like: nothing reads them
        if rerun_gateways:
            gctx = Ctx(snapshot, options)
            gctx.namespace_labels = ctx.namespace_labels
            gctx.grants_by_namespace = ctx.grants_by_namespace
            gctx.slices_by_service = ctx.slices_by_service
            gws = core.gateway_side(gctx)
            if _fingerprint(gws) != self._fingerprint:
                return self._full(snapshot, options)
            if self._status_gws is not self._gws:
                release(self._status_gws)
            self._status_gws = gws
            self._ls_results = list(gctx.listener_set_results)
            self._gateway_statuses = dict(gctx.statuses)
            self._infra = core.infra_ir(gctx, gws)

        affected: set[RouteKey] = set()
        services: set[NN] = set(changed.get("Service", ()))
        old_slices, new_slices = self._snapshot, snapshot
        assert old_slices is not None
        for slice_key in changed.get("EndpointSlice", ()):
            for snap in (old_slices, new_slices):
                eps = snap.endpoint_slices.get(slice_key)
                label = eps.metadata.labels.get(_SERVICE_LABEL) if eps is not None else None
                if label:
                    services.add((slice_key[0], label))
            self._reindex_slice(slice_key, old_slices, new_slices)
        for svc in services:
            keys = self._slice_keys.get(svc)
            if keys:
                ctx.slices_by_service[svc] = [snapshot.endpoint_slices[k] for k in sorted(keys)]
            else:
                ctx.slices_by_service.pop(svc, None)
            affected.update(self._users.get(svc, ()))
        for kind in ROUTE_KINDS:
            affected.update((kind, ns, name) for ns, name in changed.get(kind, ()))
        # A ReferenceGrant: the routes referring into its namespace from one it lets in (in the
        # last snapshot or this). A Backend: the routes referring to it. (Their records hold
        # every backendRef, found, permitted or not.)
        if granting:
            let_in = self._granted(snapshot, changed["ReferenceGrant"])
            for (ns, _), users in self._users.items():
                if ns in granting:
                    affected.update(key for key in users if key[1] in let_in and key[1] != ns)
        for key in changed.get("Backend", ()):
            affected.update(self._users.get(key, ()))
        # Namespace labels: the routes in those namespaces, when a listener selects by them.
        if relabelled and any(
            lc.listener.allowed_routes.namespaces.from_ == "Selector"
            for gw in self._gws
            for lc in gw.all_listeners()
        ):
            self._parents.forget_namespaces(relabelled)
            affected.update(key for key in self._entries if key[1] in relabelled)

        for route_key in affected:
            entry = self._entries.get(route_key)
            if entry is not None:
                self._remove(entry)
        resolver = BackendResolver(ctx, self._tls, touched=set())
        for kind, ns, name in sorted(affected, key=lambda k: (_KIND_INDEX[k[0]], k[1], k[2])):
            route = snapshot.by_kind(kind).get((ns, name))
            if route is not None:
                self._add(kind, route, resolver)
            else:
                self._statuses.pop((kind, ns, name), None)
        self._policies(ctx, changed)
        self._snapshot, self._options = snapshot, options
        return self._finish(ctx, rebuild_all=False)

    @staticmethod
    def _relabel(ctx: Ctx, keys: Iterable[NN]) -> set[str]:
        """Keep ``ctx``'s namespace labels current; the namespaces whose labels changed."""
        out: set[str] = set()
        for key in keys:
            name = key[1]
            ns = ctx.snapshot.namespaces.get(key)
            labels = dict(ns.metadata.labels) if ns is not None else None
            if labels == ctx.namespace_labels.get(name):
                continue
            out.add(name)
            if labels is None:
                del ctx.namespace_labels[name]
            else:
                ctx.namespace_labels[name] = labels
        return out

    def _reindex_slice(self, key: NN, old: Snapshot, new: Snapshot) -> None:
        before, after = old.endpoint_slices.get(key), new.endpoint_slices.get(key)
        if before is not None and (svc := before.metadata.labels.get(_SERVICE_LABEL)):
            keys = self._slice_keys.get((key[0], svc))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._slice_keys[(key[0], svc)]
        if after is not None and (svc := after.metadata.labels.get(_SERVICE_LABEL)):
            self._slice_keys.setdefault((key[0], svc), set()).add(key)

    # ------------------------------------------------------------ the policy stage

    def _policies(self, ctx: Ctx, changed: dict[str, set[NN]] | None) -> None:
        """Stage 4 (core.policies) for what changed (``changed`` None: a full translation).

        The attachment (translate/policies/attach.py) is computed again when what it reads
        may have changed: a Gateway (its labels), a Secret or ConfigMap (what policies
        resolve), a Service or EndpointSlice while a policy's spec names a backend, a route a
        policy names or whose kind a selector picks from. A change of policies alone is
        settled where they reach (PolicyAttacher.reattach); else the last one holds. Effects
        are computed again for the attachments added since the last stage and those under a
        scope whose holder changed; listener client settings for the listeners under such
        scopes."""
        snapshot = ctx.snapshot
        fresh, self._fresh = self._fresh, []
        gone = self._refresh_targets(snapshot, changed)
        if not self._targets and not self._pindex.reports:
            self._attacher = None
            return  # no policy, now or before
        pctx = Ctx(snapshot, ctx.options)
        pctx.namespace_labels = ctx.namespace_labels
        pctx.grants_by_namespace = ctx.grants_by_namespace
        pctx.slices_by_service = ctx.slices_by_service
        scopes: dict[str, set[Scope]] | None = {}
        attacher = self._attacher
        how = (
            "all"
            if changed is None or attacher is None
            else self._policy_inputs_changed(snapshot, changed, gone)
        )
        if how == "all" or attacher is None or changed is None:
            attacher = self._attacher = PolicyAttacher(pctx, self._status_gws, self._resolved)
            scopes = None if changed is None else _changed_scopes(self._pindex, attacher.index)
            self._pindex = attacher.index
            self._policy_statuses = pctx.statuses
        else:
            # keep the targets it knows current (what changed here no target reads)
            attacher.moved_on(pctx, self._status_gws)
            for kind in ROUTE_KINDS:
                for ns, name in changed.get(kind, ()):
                    attacher.route_changed(kind, ns, name, snapshot.by_kind(kind).get((ns, name)))
            if how == "policies":
                mine = {kind: set(changed[kind]) for kind in POLICY_KINDS if kind in changed}
                # a ReferenceGrant: the policies in the namespaces it lets in (before or now)
                # resolve again, as if they changed (what they refer to may be let in or out)
                granted = self._granted(snapshot, changed.get("ReferenceGrant", ()))
                for key in [k for k in self._targets if k[1] in granted]:
                    self._resolved.pop(key, None)
                    mine.setdefault(key[0], set()).add((key[1], key[2]))
                before = attacher.reattach(pctx, mine, self._resolved, self._policy_statuses)
                scopes = _moved_scopes(before, attacher.index)
        index = self._pindex
        # (by listener and attachment: the listeners of a route share its attachment while no
        # policy's effects tell them apart)
        todo: dict[tuple[int, int], tuple[ListenerCtx, RouteKey, Attachment]] = {
            (id(lc), id(att)): (lc, key, att) for lc, key, att in fresh
        }
        listeners: list[ListenerCtx] = []
        if scopes is None:
            listeners = [lc for gw in self._gws for lc in gw.all_listeners()]
        elif scopes:
            held = [s for ss in scopes.values() for s in ss]
            for s in held:
                if s.level <= ROUTE:
                    entry = self._entries.get((s.kind, s.namespace, s.name))
                    if entry is not None:
                        for lc, att in zip(entry.listeners, entry.atts, strict=True):
                            todo[(id(lc), id(att))] = (lc, entry.key, att)
            side = {s for s in held if s.level > ROUTE}
            if side:
                for gw in self._gws:
                    for lc in gw.all_listeners():
                        if any(s in side for s in listener_chain(lc)):
                            listeners.append(lc)
                            for att in lc.routes:
                                meta = att.route.metadata
                                key = (att.kind, meta.namespace, meta.name)
                                todo[(id(lc), id(att))] = (lc, key, att)
        kinds = route_effect_kinds(index)
        for lc, key, att in todo.values():
            effects, clusters = attachment_effects(index, kinds, lc, att)
            if effects == att.effects and clusters == att.effect_clusters:
                continue
            if att.effect_clusters:
                del self._effect_atts[lc][key]
            att = self._own(lc, key, att)
            att.effects, att.effect_clusters = effects, clusters
            if clusters:
                self._effect_atts.setdefault(lc, {})[key] = att
            self._touch(lc, att.hostnames or ("*",))
        for lc in listeners:
            client = listener_client(index, lc)
            if client != lc.client:
                lc.client = client
                self._touch(lc, ())

    def _refresh_targets(
        self, snapshot: Snapshot, changed: dict[str, set[NN]] | None
    ) -> tuple[set[RouteKey], set[str]]:
        """Keep what each policy names up to date; what the changed ones named before."""
        if changed is None:
            self._targets, self._named, self._selected = {}, {}, {}
            self._service_readers = 0
            keys = [
                (kind, ns, name) for kind in POLICY_KINDS for ns, name in snapshot.by_kind(kind)
            ]
        else:
            keys = [(kind, ns, name) for kind in POLICY_KINDS for ns, name in changed.get(kind, ())]
        named: set[RouteKey] = set()
        selected: set[str] = set()
        for kind, ns, name in keys:
            old = self._targets.pop((kind, ns, name), None)
            if old is not None:
                self._count(old, -1)
                named |= old[0]
                selected |= old[1]
            policy = snapshot.by_kind(kind).get((ns, name))
            if policy is None:
                self._resolved.pop((kind, ns, name), None)
            else:
                new = (*named_targets(policy), _names_backends(policy.spec))
                self._targets[(kind, ns, name)] = new
                self._count(new, 1)
        return named, selected

    def _count(self, targets: _Targets, step: int) -> None:
        refs, kinds, reads = targets
        for ref in refs:
            _bump(self._named, ref, step)
        for kind in kinds:
            _bump(self._selected, kind, step)
        self._service_readers += step if reads else 0

    def _policy_inputs_changed(
        self, snapshot: Snapshot, changed: dict[str, set[NN]], gone: tuple[set[RouteKey], set[str]]
    ) -> str:
        """How the attachment stage may come out otherwise than the last time: "all" (what
        every policy reads may have changed), "policies" (only some policies changed) or ""
        (nothing it reads changed). ``gone``: what the changed policies named before."""
        # The gateway side's fingerprint held (else this is a full translation): of Gateways,
        # only their labels (targetSelectors) are new to the attachment.
        if ("Service" in changed or "EndpointSlice" in changed) and self._service_readers:
            self._resolved.clear()  # what policies resolved may read them
            return "all"
        if "Backend" in changed and self._service_readers:
            self._resolved.clear()
            return "all"
        if "Secret" in changed or "ConfigMap" in changed:
            self._resolved.clear()  # what policies resolve may read them
            return "all"
        if "ReferenceGrant" in changed and self._selected:
            self._resolved.clear()  # a targetSelector's namespaces may need a grant
            return "all"
        if "Gateway" in changed:
            return "all"
        if "Namespace" in changed and self._selected:
            return "all"  # a targetSelector's namespaces may read labels
        old = self._snapshot
        assert old is not None
        named, selected = gone
        for kind in ROUTE_KINDS:
            picked = kind in self._selected or kind in selected
            for ns, name in changed.get(kind, ()):
                key = (kind, ns, name)
                if (picked or key in self._named or key in named) and _target_view(
                    old.by_kind(kind).get((ns, name))
                ) != _target_view(snapshot.by_kind(kind).get((ns, name))):
                    return "all"
        if "ReferenceGrant" in changed or any(kind in changed for kind in POLICY_KINDS):
            return "policies"
        return ""

    def _granted(self, snapshot: Snapshot, keys: Iterable[NN]) -> set[str]:
        """The namespaces the ReferenceGrants ``keys`` let in, in the last snapshot or this."""
        out: set[str] = set()
        old = self._snapshot
        assert old is not None
        for key in keys:
            for snap in (old, snapshot):
                grant = snap.reference_grants.get(key)
                if grant is not None:
                    out.update(f.namespace for f in grant.spec.from_)
        return out

    def _touch(self, lc: ListenerCtx, domains: Iterable[str]) -> None:
        """Mark listener ``lc`` (its port) and ``domains`` of it for the xDS IR to rebuild."""
        self._dirty_gateways.add(lc.gateway)
        self._dirty.setdefault(lc, set()).update(domains)

    # ------------------------------------------------------------ routes in and out

    def _add(
        self,
        kind: str,
        route: Any,
        resolver: BackendResolver,
        order: SortKey | None = None,
    ) -> None:
        """The route side for one route (``order``: its sort_key, when known)."""
        resolver.touched = set()
        order = order or sort_key(route)
        tr = routes.translate_route(kind, route, resolver, order)
        outcome = routes.judge_route(self._ctx, self._parents, tr)
        key = (kind, route.metadata.namespace, route.metadata.name)
        old_status = self._statuses.get(key)
        status = (
            old_status
            if old_status is not None and old_status == outcome.status
            else outcome.status
        )
        entry = _Entry(
            key=key,
            model=route,
            translation=tr,
            held=_attachments(tr, outcome.attached),
            listeners=self._shared(tuple([lc for lc, _ in outcome.attached])),
            accepted_by=self._shared(tuple(outcome.accepted_by)),
            status=status,
            services=tuple(resolver.touched),
            backends=tr.backends if outcome.owned else (),
        )
        self._entries[key] = entry
        self._statuses[key] = status
        for svc in entry.services:
            self._users.setdefault(svc, {})[key] = None
        for be in entry.backends:
            self._backend_users[be] = self._backend_users.get(be, 0) + 1
        for port in tr.services:
            for gw in entry.accepted_by:
                counts = self._using.setdefault(port, {})
                counts[gw] = counts.get(gw, 0) + 1
        for cl in tr.clusters:
            name = cl.name
            known = self._clusters.get(name)
            if known is None or known != cl:
                self._clusters[name] = cl
            self._cluster_refs[name] = self._cluster_refs.get(name, 0) + 1
        place = (_KIND_INDEX[kind], order)  # (_order's, from the sort key at hand)
        for lc, att in zip(entry.listeners, entry.atts, strict=True):
            self._fresh.append((lc, key, att))
            lc.attached_routes += 1
            routes_of = lc.routes
            if not routes_of or _att_order(routes_of[-1]) < place:
                routes_of.append(att)
            else:
                routes_of.insert(bisect.bisect_left(routes_of, place, key=_att_order), att)
            self._index(lc, entry, att, add=True)

    def _own(self, lc: ListenerCtx, key: RouteKey, att: Attachment) -> Attachment:
        """Route ``key``'s attachment to listener ``lc`` for ``lc`` alone: ``att`` itself when no
        other listener holds it, else a copy put in its place (in the entry, the listener's
        routes and its per-domain index), for effects of ``lc``'s own."""
        entry = self._entries.get(key)
        if entry is None or sum(1 for a in entry.atts if a is att) < 2:
            return att
        own = Attachment(translation=att.translation, hostnames=att.hostnames)
        entry.held = _held(
            tuple(
                [
                    own if a is att and on is lc else a
                    for on, a in zip(entry.listeners, entry.atts, strict=True)
                ]
            )
        )
        routes_of = lc.routes
        i = bisect.bisect_left(routes_of, _order(key[0], entry.model), key=_att_order)
        while routes_of[i] is not att:
            i += 1
        routes_of[i] = own
        by_domain = self._domain_atts.get(lc, {})
        for domain in att.hostnames or ("*",):
            bucket = by_domain.get(domain)
            if bucket is not None:
                by_domain[domain] = _bucket(
                    tuple([own if a is att else a for a in _bucket_atts(bucket)])
                )
        return own

    def _shared(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """The one kept instance of a tuple equal to ``items`` (of listeners or Gateways)."""
        return self._tuples.setdefault(items, items)

    def _remove(self, entry: _Entry) -> None:
        del self._entries[entry.key]
        for svc in entry.services:
            users = self._users.get(svc)
            if users is not None:
                users.pop(entry.key, None)
                if not users:
                    del self._users[svc]
        for be in entry.backends:
            left = self._backend_users[be] - 1
            if left:
                self._backend_users[be] = left
            else:
                del self._backend_users[be]
        for port in entry.translation.services:
            for gw in entry.accepted_by:
                counts = self._using[port]
                if counts[gw] > 1:
                    counts[gw] -= 1
                else:
                    del counts[gw]
                    if not counts:
                        del self._using[port]
        for cl in entry.translation.clusters:
            name = cl.name
            left = self._cluster_refs[name] - 1
            if left:
                self._cluster_refs[name] = left
            else:
                del self._cluster_refs[name]
                del self._clusters[name]
        place = _order(entry.key[0], entry.model)
        for lc, att in zip(entry.listeners, entry.atts, strict=True):
            if att.effect_clusters:
                del self._effect_atts[lc][entry.key]
            lc.attached_routes -= 1
            routes_of = lc.routes
            i = bisect.bisect_left(routes_of, place, key=_att_order)
            while routes_of[i] is not att:
                i += 1
            del routes_of[i]
            self._index(lc, entry, att, add=False)

    def _index(self, lc: ListenerCtx, entry: _Entry, att: Attachment, *, add: bool) -> None:
        """Keep the per-listener, per-domain index of HTTP attachments; note what got dirty."""
        self._dirty_gateways.add(lc.gateway)
        dirty = self._dirty.setdefault(lc, set())
        if att.kind not in xdsir.HTTP_KINDS:
            dirty.add("")  # the listener's L4 routes changed
            return
        by_domain = self._domain_atts.setdefault(lc, {})
        tr = att.translation  # (one per entry: what tells an entry's attachments apart)
        for domain in att.hostnames or ("*",):
            dirty.add(domain)
            bucket = by_domain.get(domain)
            if add:
                if bucket is None:
                    by_domain[domain] = att
                    continue
                held = _bucket_atts(bucket)
                i = next((i for i, a in enumerate(held) if a.translation is tr), None)
                if i is None:
                    i = bisect.bisect_right(held, _att_order(att), key=_att_order)
                    by_domain[domain] = (*held[:i], att, *held[i:])
                else:
                    by_domain[domain] = _bucket((*held[:i], att, *held[i + 1 :]))
            else:
                assert bucket is not None
                left = tuple([a for a in _bucket_atts(bucket) if a.translation is not tr])
                if left:
                    by_domain[domain] = _bucket(left)
                else:
                    del by_domain[domain]

    # ------------------------------------------------------------ statuses and IRs

    def _finish(self, ctx: Ctx, *, rebuild_all: bool) -> Result:
        # Gateway and ListenerSet statuses (attachedRoutes), GatewayClass, BackendTLSPolicy.
        if self._status_gws is not self._gws:
            counts = {
                _listener_id(lc): lc.attached_routes
                for gw in self._gws
                for lc in gw.all_listeners()
            }
            for lc in _status_listeners(self._status_gws, self._ls_results):
                lc.attached_routes = counts.get(_listener_id(lc), 0)
        sctx = Ctx(ctx.snapshot, ctx.options)
        sctx.listener_set_results = self._ls_results
        core.gateway_statuses(sctx, self._status_gws)
        if self._tls.results:
            self._tls.ctx = sctx
            self._tls.write_statuses({svc: list(users) for svc, users in self._using.items()})
            self._tls.ctx = ctx
        others = {
            **self._gateway_statuses,
            **sctx.statuses,
            **self._backend_status_of_used(ctx),
            **self._policy_statuses,
        }
        for key in self._other_keys - others.keys():
            self._statuses.pop(key, None)
        for key, status in others.items():
            old = self._statuses.get(key)
            self._statuses[key] = old if old is not None and old == status else status
        self._other_keys = set(others)

        # xDS IR of every Gateway whose attachments changed.
        todo = (
            [gw for gw in self._gws if gw.serving]
            if rebuild_all
            else [gw for gw in self._dirty_gateways if gw.serving]
        )
        for gw in sorted(todo, key=lambda g: g.key):
            self._xds[gw.name] = self._gateway_xds(gw, rebuild_all)
        if rebuild_all:
            self._xds = {name: self._xds[name] for name in sorted(self._xds)}
        # A RouteConfig state that a dirty listener feeds but no rebuild visited is stale.
        for lc in self._dirty:
            for name in [
                n for n, rc in self._rcs.items() if lc in rc.lcs and n not in self._visited
            ]:
                del self._rcs[name]
        self._dirty.clear()
        self._dirty_gateways.clear()
        self._visited = set()
        xds, infra = core.by_envoy(self._status_gws, dict(self._xds), dict(self._infra))
        return Result(statuses=dict(self._statuses), infra=infra, xds=xds)

    def _backend_status_of_used(self, ctx: Ctx) -> dict[StatusKey, dict[str, Any]]:
        """The status of every Envoy Gateway Backend a route of ours refers to (each judged
        again only when its model is another: what else it depends on is a full translation)."""
        out: dict[StatusKey, dict[str, Any]] = {}
        known = self._backend_statuses
        for key in self._backend_users:
            be = ctx.snapshot.backends.get(key)
            if be is None:
                continue
            hit = known.get(key)
            if hit is None or hit[0] is not be:
                hit = known[key] = (be, egbackend.backend_status(be, egbackend.judge(ctx, be)))
            out[("Backend", key[0], key[1])] = hit[1]
        if len(known) > len(out):
            self._backend_statuses = {
                key: known[key] for key in known if ("Backend", key[0], key[1]) in out
            }
        return out

    def _gateway_xds(self, gw: GatewayCtx, rebuild_all: bool) -> ir.XdsGateway:
        state = self._gw_states.get(gw.key)
        if state is None or rebuild_all:
            state = self._gw_states[gw.key] = _GatewayState(ports={}, port_used={})
        ports: dict[str, ir.Port] = {}
        for port, _, family, name, lcs in xdsir.port_plan(gw):
            old = state.ports.get(name)
            if old is not None and not any(lc in self._dirty for lc in lcs):
                ports[name] = old
                continue
            if family == "HTTP":
                rc = self._route_config(name, lcs, None, None)
                new = ir.Port(
                    name=name,
                    port=port,
                    protocol="HTTP",
                    address=gw.address,
                    http=rc.config,
                    client=xdsir.port_client(lcs),
                )
                used = set(rc.used)
            else:
                rcs: list[_RouteConfigState] = []
                new = xdsir.l4_port(
                    name,
                    port,
                    gw.address,
                    family,
                    lcs,
                    functools.partial(self._https_config, built=rcs),
                )
                used = xdsir.proxy_clusters(new)
                for rc in rcs:
                    used.update(rc.used)
            ports[name] = old if old is not None and old == new else new
            state.port_used[name] = used
            state.port_derived[name] = (
                xdsir.policy_clusters([new], self._clusters)
                if "BackendTrafficPolicy" in self._pindex.holders
                else {}
            )
        for name in [n for n in state.port_used if n not in ports]:
            del state.port_used[name]
            state.port_derived.pop(name, None)
        state.ports = ports
        used_all: set[str] = set()
        for names in state.port_used.values():
            used_all |= names
        # a policy's own upstreams (an auth service), then the clusters with a policy's settings
        extra: dict[str, ir.Cluster] = {}
        for lc in gw.all_listeners():
            for att in self._effect_atts.get(lc, {}).values():
                extra.update(att.effect_clusters or {})
        for derived in state.port_derived.values():
            extra.update(derived)
        used_all |= extra.keys()
        clusters = self._gateway_clusters(gw, state, used_all, extra)
        new_gw = ir.XdsGateway(
            name=gw.name,
            address=gw.address,
            ports=tuple(ports.values()),
            clusters=clusters,
            telemetry=gw.telemetry,
        )
        if state.xds is not None and state.xds == new_gw:
            return state.xds
        state.xds = new_gw
        return new_gw

    def _https_config(
        self,
        cname: str,
        lc: ListenerCtx,
        peers: list[ListenerCtx],
        *,
        built: list[_RouteConfigState],
    ) -> ir.RouteConfig:
        rc = self._route_config(cname, [lc], lc, peers)
        built.append(rc)
        assert rc.config is not None
        return rc.config

    def _gateway_clusters(
        self, gw: GatewayCtx, state: _GatewayState, used: set[str], extra: dict[str, ir.Cluster]
    ) -> tuple[ir.Cluster, ...]:
        cert = gw.backend_client_cert
        out = []
        for cname in sorted(used):
            cl = extra.get(cname) or self._clusters.get(cname)
            if cl is None:
                continue
            if cl.tls is not None and cert is not None:
                hit = state.cert_clusters.get(cname)
                if hit is None or hit[0] is not cl:
                    hit = state.cert_clusters[cname] = (cl, xdsir.with_client_cert(cl, cert))
                cl = hit[1]
            out.append(cl)
        return tuple(out)

    def _route_config(
        self,
        name: str,
        lcs: list[ListenerCtx],
        https: ListenerCtx | None,
        peers: list[ListenerCtx] | None,
    ) -> _RouteConfigState:
        """The RouteConfig ``name`` of listeners ``lcs`` (``https``/``peers``: an HTTPS filter
        chain's listener and the port's HTTPS listeners), updated for what is dirty."""
        self._visited.add(name)
        owners = lcs if peers is None else peers
        rc = self._rcs.get(name)
        if rc is None or rc.lcs != lcs or rc.owners != owners or rc.https is not https:
            rc = self._rcs[name] = _RouteConfigState(
                name=name, lcs=list(lcs), owners=list(owners), https=https
            )
            domains: set[str] = set()
            for lc in lcs:
                domains.update(self._domain_atts.get(lc, ()))
        else:
            domains = set()
            for lc in lcs:
                domains.update(d for d in self._dirty.get(lc, ()) if d)
            if not domains and rc.config is not None:
                return rc
        for domain in domains:
            self._rebuild_vhost(rc, domain)
        vhosts = [rc.vhosts[d] for d in rc.domains]
        if https is not None and peers is not None:
            extras = xdsir.misdirected(name, https, peers, rc.vhosts.__contains__)
            for domain, vh in extras.items():
                old = rc.extras.get(domain)
                if old is not None and old == vh:
                    extras[domain] = old
            rc.extras = extras
            if extras:
                vhosts = sorted(vhosts + list(extras.values()), key=lambda vh: vh.domains[0])
        config = ir.RouteConfig(name=name, virtual_hosts=tuple(vhosts))
        rc.config = rc.config if rc.config is not None and rc.config == config else config
        return rc

    def _rebuild_vhost(self, rc: _RouteConfigState, domain: str) -> None:
        owner = xdsir.owner(rc.owners, domain)
        bucket = (
            self._domain_atts.get(owner, {}).get(domain)
            if owner is not None and owner in rc.lcs
            else None
        )
        old = rc.vhosts.get(domain)
        if bucket is not None:
            atts = list(_bucket_atts(bucket))
            vh = xdsir.virtual_host(rc.name, domain, atts)
            if old is not None and old == vh:
                return
            if old is None:
                bisect.insort(rc.domains, domain)
            rc.vhosts[domain] = vh
            self._count_clusters(rc, domain, xdsir.atts_clusters(atts))
        elif old is not None:
            del rc.vhosts[domain]
            del rc.domains[bisect.bisect_left(rc.domains, domain)]
            self._count_clusters(rc, domain, set())

    @staticmethod
    def _count_clusters(rc: _RouteConfigState, domain: str, names: set[str]) -> None:
        before = set(rc.clusters.pop(domain, ()))
        if names:
            rc.clusters[domain] = tuple(names)  # (kept per virtual host: a tuple is the smaller)
        for n in before - names:
            left = rc.used[n] - 1
            if left:
                rc.used[n] = left
            else:
                del rc.used[n]
        for n in names - before:
            rc.used[n] = rc.used.get(n, 0) + 1


class IncrementalMismatch(AssertionError):
    """An incremental result differs from a full translation (a missing dependency: a bug)."""


def _compare(got: Result, want: Result) -> None:
    for what in ("statuses", "infra", "xds"):
        a, b = getattr(got, what), getattr(want, what)
        if a == b:
            continue
        keys = sorted(set(a) | set(b), key=repr)
        first = next(k for k in keys if a.get(k) != b.get(k))
        raise IncrementalMismatch(f"incremental {what} differ from a full translation at {first!r}")
