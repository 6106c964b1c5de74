"""Incremental xDS snapshots: one Gateway's IR -> versioned resources, at the cost of what changed.

Incremental translation hands over a new :class:`ir.XdsGateway` that reuses the very
instances of everything that did not change. :class:`GatewaySnapshots` keeps what its
previous build made of each of them, keyed by identity (the entry holds the object, so
its ``id`` stays valid), and only builds what is new:

* a Port that is the same instance (at the same address) keeps its Listener and its
  RouteConfigurations' bytes; a new HTTP or TLS Port keeps its Listener's bytes while
  what a listener reads of it is equal (:func:`gateweave.xds.listeners.listener_view`: of
  its route configurations, only their names and the routes that turn on a connection
  manager filter), so a route change does not rebuild the Listener: its cost does not grow
  with the routes of the port;
* a RouteConfiguration is its virtual host fields, as wire bytes in parts (never parsed,
  never serialised again, concatenated only when sent: each route's bytes are held once);
  a virtual host that is the same instance keeps its parts, a new one comes from the
  value-keyed cache of :mod:`gateweave.xds.routes`;
* a Cluster that is the same instance - or equal to the one of that name - keeps its bytes;
* a resource whose bytes did not change keeps its :class:`Resource` (version and bytes),
  and a type none of whose resources changed keeps its table and set version.

The result equals ``make_snapshot(build(gw).by_type())`` byte for byte, version for
version (the tests check it). Per Gateway, what is kept is the last build only: the IR
objects it used, the wire bytes of its resources and its snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, compress
from operator import is_not
from types import MappingProxyType

from google.protobuf.message import Message
from msgspec.structs import replace

from gateweave import ir
from gateweave.xds import clusters, listeners, routes, telemetry
from gateweave.xds.build import udp_target
from gateweave.xds.snapshot_cache import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    NodeSnapshot,
    Resource,
    Wire,
    pack,
    set_version,
    snapshot_version,
    wire_bytes,
)

# The type URLs a build produces, in the order of ``Resources.by_type()`` (no Secrets: TLS
# material is inline).
_TYPES = (CLUSTER, ENDPOINT, LISTENER, ROUTE)
_KIND = {
    CLUSTER: "Cluster",
    ENDPOINT: "ClusterLoadAssignment",
    LISTENER: "Listener",
    ROUTE: "RouteConfiguration",
}


@dataclass(frozen=True, slots=True)
class _Config:
    """One RouteConfiguration as last built: its IR, its virtual
    host fields (in order, each in parts), its bytes (in parts: the same bytes objects).
    """

    config: ir.RouteConfig
    listener_port: int
    https: bool
    fields: list[tuple[bytes, ...]]  # fields[i] is config.virtual_hosts[i] built (never mutated)
    hcm: list[tuple[ir.Route, ...]]  # hcm[i]: listeners.hcm_routes(config.virtual_hosts[i])
    view: ir.RouteConfig  # what a listener reads of it: listeners.listener_view of ``hcm``
    raw: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class _PortBuild:
    """What one Port gave: its Listener, RouteConfigurations and (UDP) weighted cluster."""

    port: ir.Port
    view: ir.Port  # what its listener was built from (the port, its route configs' views)
    address: str
    telemetry: ir.Telemetry  # the access logs and tracing its listener was built with
    clusters: tuple[ir.Cluster, ...]  # what a UDP port's weighted cluster was built from
    listener: bytes
    configs: tuple[_Config, ...]
    extra: tuple[
        tuple[str, bytes, bytes | None], ...
    ]  # (name, Cluster bytes, CLA bytes; None: a DNS cluster)


@dataclass(frozen=True, slots=True)
class _Table:
    """One type's resources as last versioned."""

    raw: dict[str, Wire]
    deps: dict[str, str | None]  # ClusterLoadAssignments: the Cluster version mixed in
    resources: Mapping[str, Resource]
    version: str


class GatewaySnapshots:
    """The snapshot of one Gateway, rebuilt incrementally from its previous build."""

    def __init__(self) -> None:
        self._gw: ir.XdsGateway | None = None
        self._clusters: dict[str, tuple[ir.Cluster, bytes, bytes | None]] = {}
        self._ports: dict[str, _PortBuild] = {}
        self._tables: dict[str, _Table] = {}
        self._snapshot: NodeSnapshot | None = None

    def snapshot(self, gw: ir.XdsGateway) -> NodeSnapshot:
        """The versioned resources of ``gw``: equal to ``make_snapshot(build(gw).by_type())``.

        Raises ``ValueError`` where :func:`gateweave.xds.build.build` does; the previous
        build is then kept as it was.
        """
        if gw is self._gw and self._snapshot is not None:
            return self._snapshot
        raw: dict[str, dict[str, Wire]] = {t: {} for t in _TYPES}
        cluster_state, by_name = self._build_clusters(gw, raw)
        port_state: dict[str, _PortBuild] = {}
        for port in gw.ports:
            built = self._ports.get(port.name)
            if built is None or not _reusable(built, port, gw):
                built = self._build_port(gw, port, by_name, built)
            port_state.setdefault(port.name, built)
            _put(raw, LISTENER, port.name, built.listener)
            for config in built.configs:
                _put(raw, ROUTE, config.config.name, config.raw)
            for name, cluster_raw, cla_raw in built.extra:
                _put(raw, CLUSTER, name, cluster_raw)
                if cla_raw is not None:
                    _put(raw, ENDPOINT, name, cla_raw)

        tables: dict[str, _Table] = {}
        for type_url in _TYPES:
            deps: Mapping[str, Resource] = {}
            if type_url == ENDPOINT and CLUSTER in tables:
                deps = tables[CLUSTER].resources
            table = _version(type_url, raw[type_url], deps, self._tables.get(type_url))
            if table is not None:
                tables[type_url] = table
        old = self._snapshot
        if old is not None and all(
            tables.get(t) is self._tables.get(t) for t in set(tables) | set(self._tables)
        ):
            snapshot = old
        else:
            resources = {t: table.resources for t, table in tables.items()}
            version = snapshot_version({t: table.version for t, table in tables.items()})
            snapshot = NodeSnapshot(version=version, resources=MappingProxyType(resources))
        self._gw, self._clusters, self._ports, self._tables = gw, cluster_state, port_state, tables
        self._snapshot = snapshot
        return snapshot

    # -- building

    def _build_clusters(
        self, gw: ir.XdsGateway, raw: dict[str, dict[str, Wire]]
    ) -> tuple[dict[str, tuple[ir.Cluster, bytes, bytes | None]], dict[str, ir.Cluster]]:
        state: dict[str, tuple[ir.Cluster, bytes, bytes | None]] = {}
        by_name: dict[str, ir.Cluster] = {}
        for c in telemetry.gateway_clusters(gw):
            known = by_name.setdefault(c.name, c)
            if known is not c and known != c:
                raise ValueError(f"two different clusters named {c.name!r}")
            entry = self._clusters.get(c.name)
            if entry is None or (entry[0] is not c and entry[0] != c):
                cla = clusters.load_assignment(c)
                entry = (c, _wire(clusters.cluster(c)), None if cla is None else _wire(cla))
            state[c.name] = entry
            raw[CLUSTER][c.name] = entry[1]
            if entry[2] is not None:  # a DNS cluster has its endpoints inline
                raw[ENDPOINT][c.name] = entry[2]
        return state, by_name

    def _build_port(
        self,
        gw: ir.XdsGateway,
        port: ir.Port,
        by_name: dict[str, ir.Cluster],
        previous: _PortBuild | None,
    ) -> _PortBuild:
        configs: list[_Config] = []
        extra: list[tuple[str, bytes, bytes | None]] = []
        http = port.protocol in ("HTTP", "TLS")
        view = self._http_view(port, configs) if http else port
        listener: bytes
        if (
            http
            and previous is not None
            and previous.view == view
            and previous.address == gw.address
            and previous.telemetry == gw.telemetry
        ):
            listener = previous.listener  # what its listener reads is the same: so are its bytes
        elif port.protocol == "HTTP":
            listener = _wire(listeners.http_listener(gw, view))
        elif port.protocol == "TLS":
            listener = _wire(listeners.tls_listener(gw, view))
        elif port.protocol == "TCP":
            listener = _wire(listeners.tcp_listener(gw, port))
        elif port.protocol == "UDP":
            target, weighted = udp_target(port, by_name)
            if weighted is not None:
                cluster_msg, cla_msg = weighted
                extra.append(
                    (target, _wire(cluster_msg), None if cla_msg is None else _wire(cla_msg))
                )
            listener = _wire(listeners.udp_listener(gw, port, target))
        else:
            raise ValueError(f"port {port.name}: unknown protocol {port.protocol!r}")
        return _PortBuild(
            port=port,
            view=view,
            address=gw.address,
            telemetry=gw.telemetry,
            clusters=gw.clusters,
            listener=listener,
            configs=tuple(configs),
            extra=tuple(extra),
        )

    def _http_view(self, port: ir.Port, configs: list[_Config]) -> ir.Port:
        """Build the route configurations of an HTTP or TLS ``port`` into ``configs``; the
        port as its listener sees it (each route configuration replaced by its view)."""
        if port.protocol == "HTTP":
            assert port.http is not None
            config = self._config(port.http, port.port, False)
            configs.append(config)
            return replace(port, http=config.view)
        chains = []
        for fc in port.filter_chains:
            if fc.http is not None:
                config = self._config(fc.http, port.port, True)
                configs.append(config)
                fc = replace(fc, http=config.view)
            chains.append(fc)
        return replace(port, filter_chains=tuple(chains))

    def _config(self, config: ir.RouteConfig, listener_port: int, https: bool) -> _Config:
        """``config`` as wire bytes, reusing the fields of the virtual hosts it had before."""
        previous = self._previous_config(config.name, listener_port, https)
        if previous is not None and previous.config is config:
            return previous
        vhosts = config.virtual_hosts
        if previous is None:
            fields = [routes.virtual_host_field(vh, listener_port, https) for vh in vhosts]
            hcm = [listeners.hcm_routes(vh) for vh in vhosts]
            same_hcm = False
        else:
            fields, hcm, same_hcm = _reuse_fields(previous, vhosts)
        if previous is not None and same_hcm:
            view = previous.view
        else:
            view = listeners.listener_view(config.name, tuple(chain.from_iterable(hcm)))
        raw = routes.route_configuration_wire(config.name, fields)
        return _Config(config, listener_port, https, fields, hcm, view, raw)

    def _previous_config(self, name: str, listener_port: int, https: bool) -> _Config | None:
        for built in self._ports.values():
            for config in built.configs:
                if (
                    config.config.name == name
                    and config.listener_port == listener_port
                    and config.https == https
                ):
                    return config
        return None


def _reuse_fields(
    previous: _Config, vhosts: tuple[ir.VirtualHost, ...]
) -> tuple[list[tuple[bytes, ...]], list[tuple[ir.Route, ...]], bool]:
    """The fields and listener routes (``hcm_routes``) of ``vhosts``: those of the same
    instances in ``previous``, the others built; and whether the listener routes are those of
    ``previous`` (then so is its listener view, without a pass over every virtual host).

    Virtual hosts usually keep their positions: then only the positions holding a new
    instance are visited (found in C by ``map``/``compress``). Otherwise each is looked
    up by identity.
    """
    port, https = previous.listener_port, previous.https
    before = previous.config.virtual_hosts
    if len(before) == len(vhosts):
        fields, hcm = list(previous.fields), list(previous.hcm)
        same = True
        for i in compress(range(len(vhosts)), map(is_not, before, vhosts)):
            fields[i] = routes.virtual_host_field(vhosts[i], port, https)
            hcm[i] = listeners.hcm_routes(vhosts[i])
            same = same and hcm[i] == previous.hcm[i]
        return fields, hcm, same
    # ``before`` is held by ``previous``, so the ids of its virtual hosts stay theirs.
    position = {id(vh): i for i, vh in enumerate(before)}
    fields, hcm = [], []
    for vh in vhosts:
        at = position.get(id(vh))
        if at is not None and before[at] is vh:
            fields.append(previous.fields[at])
            hcm.append(previous.hcm[at])
        else:
            fields.append(routes.virtual_host_field(vh, port, https))
            hcm.append(listeners.hcm_routes(vh))
    return fields, hcm, False


def _reusable(built: _PortBuild, port: ir.Port, gw: ir.XdsGateway) -> bool:
    """Whether the previous build of this port still holds for ``gw``."""
    if built.port is not port or built.address != gw.address or built.telemetry != gw.telemetry:
        return False
    # A UDP port's weighted cluster is made of other clusters' endpoints.
    return port.protocol != "UDP" or built.clusters is gw.clusters


def _wire(msg: Message) -> bytes:
    return msg.SerializeToString(deterministic=True)


def _put(raw: dict[str, dict[str, Wire]], type_url: str, name: str, data: Wire) -> None:
    """Add a resource; a second, different one of the same name is an IR bug (as in build)."""
    table = raw[type_url]
    known = table.get(name)
    if known is not None and known is not data and wire_bytes(known) != wire_bytes(data):
        raise ValueError(f"two different {_KIND[type_url]} resources named {name!r}")
    table[name] = data


def _version(
    type_url: str,
    raw: dict[str, Wire],
    clusters_now: Mapping[str, Resource],
    previous: _Table | None,
) -> _Table | None:
    """``raw`` versioned, reusing every resource of ``previous`` whose bytes did not change."""
    if not raw:
        return None
    endpoint = type_url == ENDPOINT
    deps: dict[str, str | None] = {}
    if endpoint:
        for name in raw:
            found = clusters_now.get(name)
            deps[name] = found.version if found is not None else None
    if (
        previous is not None
        and len(previous.raw) == len(raw)
        and all(previous.raw.get(name) is data for name, data in raw.items())
        and previous.deps == deps
    ):
        return previous
    resources: dict[str, Resource] = {}
    old_raw = previous.raw if previous is not None else {}
    old = previous.resources if previous is not None else {}
    old_deps = previous.deps if previous is not None else {}
    changed = previous is None or len(old_raw) != len(raw)
    for name in sorted(raw):
        data = raw[name]
        kept = old.get(name)
        before = old_raw.get(name)
        if (
            kept is not None
            and before is not None
            and (before is data or before == data)
            and old_deps.get(name) == deps.get(name)
        ):
            resources[name] = kept
        else:
            resources[name] = pack(type_url, name, data, deps.get(name))
            changed = True
    if not changed and previous is not None:
        return _Table(raw, deps, previous.resources, previous.version)
    return _Table(raw, deps, MappingProxyType(resources), set_version(resources))


class IncrementalSnapshots:
    """The snapshots of every Gateway, by name, each rebuilt from its previous build.

    Memory: one :class:`GatewaySnapshots` per Gateway, holding its last build only
    (IR references, wire bytes, the snapshot); :meth:`forget` drops it.
    """

    def __init__(self) -> None:
        self._gateways: dict[str, GatewaySnapshots] = {}

    def snapshot(self, gw: ir.XdsGateway) -> NodeSnapshot:
        """``make_snapshot(build(gw).by_type())``, at the cost of what changed since the
        previous call for the Gateway ``gw.name``."""
        builder = self._gateways.get(gw.name)
        if builder is None:
            builder = self._gateways[gw.name] = GatewaySnapshots()
        return builder.snapshot(gw)

    def forget(self, name: str) -> None:
        self._gateways.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._gateways
