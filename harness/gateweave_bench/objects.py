"""A realistic, seeded set of manifests for benchmarks: the same ``(routes, seed)`` gives the same
objects.

For ``routes`` HTTPRoutes it makes:

* one GatewayClass and a few Gateways (``infra`` namespace), each with four listeners:
  HTTP on port 80 (any hostname and ``*.apps.bench.example``) and HTTPS on port 443
  (``*.bench.example`` with its certificate in the Gateway's namespace, and
  ``secure.bench.example`` with its certificate in the ``certs`` namespace, allowed by a
  ReferenceGrant);
* team namespaces (labelled, so a listener can select them) holding the routes, their
  Services and EndpointSlices (3-5 ready endpoints each, one slice of them sometimes not
  ready), and a ``shared`` namespace whose Services routes reach across namespaces, each
  team allowed by one ReferenceGrant there;
* HTTPRoutes with 1-3 rules of path (prefix, exact, regex), header, query-param and
  method matches, header modifiers, URL rewrites, redirects, mirrors and weighted
  backends.

With ``policies`` (a fraction of the routes, default 0: none), Envoy Gateway policies too:
per Gateway a BackendTrafficPolicy (request timeout), a ClientTrafficPolicy (trusted hops)
and a SecurityPolicy on its ``https`` listener (CORS); for that fraction of the routes a
BackendTrafficPolicy of their own (retry; every third a conflicting younger one, every
fourth also one on the first rule, a rate limit) and for every other one a SecurityPolicy
(authorization by client address). The routes' rules are then named (``rule-0``...).

Everything is a plain dict as a manifest file would hold it. Sizes are bounded by
``routes`` (about one Service per 8 routes); nothing depends on the clock or a hash seed.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

G = "gateway.networking.k8s.io"
V1 = f"{G}/v1"
V1BETA1 = f"{G}/v1beta1"
CLASS = "gateweave"
CONTROLLER = "gateweave.io/gateway-controller"
GATEWAY_NS = "infra"
CERTS_NS = "certs"
SHARED_NS = "shared"
DEFAULT_SEED = 7

# A self-signed ECDSA certificate for *.bench.example and bench.example, valid 2025-2124:
# a fixed value keeps the generated objects identical from run to run.
CERT_PEM = """-----BEGIN CERTIFICATE-----
MIIBUjCB+KADAgECAgEBMAoGCCqGSM49BAMCMBoxGDAWBgNVBAMMDyouYmVuY2gu
ZXhhbXBsZTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI0MTIwODAwMDAwMFowGjEYMBYG
A1UEAwwPKi5iZW5jaC5leGFtcGxlMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
efluEjWVer07in1VAX7LS3fFjrNEpWcal6sKC0wtGYWdg3hh5ZJBhjzeV++ICnM4
c3j+cY8kficE7fJAMDlhnqMtMCswKQYDVR0RBCIwIIIPKi5iZW5jaC5leGFtcGxl
gg1iZW5jaC5leGFtcGxlMAoGCCqGSM49BAMCA0kAMEYCIQCP7IRefCTrRDS6tr8c
rGLo6Q69VbvWfCSC2TvPF+yXNgIhAI7Feqns4+A9SO7ay2ZAzTSqENUTP7/HIMBq
JElf8OdI
-----END CERTIFICATE-----
"""
KEY_PEM = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7pMQ+9Hzm9gmzqHy
CNjhHUBaUzJTdXuHuAfnQuOfv6ShRANCAAR5+W4SNZV6vTuKfVUBfstLd8WOs0Sl
ZxqXqwoLTC0ZhZ2DeGHlkkGGPN5X74gKczhzeP5xjyR+JwTt8kAwOWGe
-----END PRIVATE KEY-----
"""


@dataclass(frozen=True)
class Shape:
    """How many of each thing a benchmark with ``routes`` HTTPRoutes has."""

    routes: int
    gateways: int
    team_namespaces: int
    services_per_namespace: int
    shared_services: int

    @classmethod
    def for_routes(cls, routes: int) -> Shape:
        if routes < 0:
            raise ValueError("routes must be >= 0")
        teams = max(2, min(40, routes // 250))
        per_ns = max(2, -(-routes // (8 * teams)))
        return cls(
            routes=routes,
            gateways=max(2, min(4, routes // 1000 + 1)),
            team_namespaces=teams,
            services_per_namespace=per_ns,
            shared_services=max(2, min(20, routes // 500)),
        )


@dataclass
class BenchObjects:
    """The generated manifests, and where the pieces a benchmark changes are."""

    shape: Shape
    manifests: list[dict[str, Any]] = field(default_factory=list)
    route_index: list[int] = field(
        default_factory=list
    )  # positions of the HTTPRoutes in ``manifests``
    slice_index: list[int] = field(default_factory=list)  # positions of the EndpointSlices
    # positions of the routes' own BackendTrafficPolicies (retry), the ReferenceGrants of the
    # shared namespace and the team Namespaces: what the split bench's other changes change
    policy_index: list[int] = field(default_factory=list)
    grant_index: list[int] = field(default_factory=list)
    namespace_index: list[int] = field(default_factory=list)

    def route(self, i: int) -> dict[str, Any]:
        return self.manifests[self.route_index[i % len(self.route_index)]]

    def endpoint_slice(self, i: int) -> dict[str, Any]:
        return self.manifests[self.slice_index[i % len(self.slice_index)]]


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def _timestamp(i: int) -> str:
    """Distinct, ordered creation timestamps (one second apart from 2025-01-01)."""
    day, rest = divmod(i, 86400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def team_namespace(i: int) -> str:
    return f"team-{i:02d}"


def _namespaces(shape: Shape) -> list[dict[str, Any]]:
    names = [GATEWAY_NS, CERTS_NS, SHARED_NS] + [
        team_namespace(i) for i in range(shape.team_namespaces)
    ]
    out = []
    for name in names:
        labels = {"bench.gateweave.io/tier": "team" if name.startswith("team-") else "platform"}
        out.append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, labels=labels)}
        )
    return out


def _secret(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, namespace),
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": CERT_PEM, "tls.key": KEY_PEM},
    }


def _gateway(i: int) -> dict[str, Any]:
    team_selector = {"matchLabels": {"bench.gateweave.io/tier": "team"}}
    return {
        "apiVersion": V1,
        "kind": "Gateway",
        "metadata": _meta(f"gw-{i}", GATEWAY_NS, creationTimestamp=_timestamp(i)),
        "spec": {
            "gatewayClassName": CLASS,
            "listeners": [
                {
                    "name": "http",
                    "protocol": "HTTP",
                    "port": 80,
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                },
                {
                    "name": "http-apps",
                    "protocol": "HTTP",
                    "port": 80,
                    "hostname": "*.apps.bench.example",
                    "allowedRoutes": {
                        "namespaces": {"from": "Selector", "selector": team_selector}
                    },
                },
                {
                    "name": "https",
                    "protocol": "HTTPS",
                    "port": 443,
                    "hostname": "*.bench.example",
                    "tls": {
                        "mode": "Terminate",
                        "certificateRefs": [{"kind": "Secret", "name": "bench-tls"}],
                    },
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                },
                {
                    "name": "https-secure",
                    "protocol": "HTTPS",
                    "port": 443,
                    "hostname": "secure.bench.example",
                    "tls": {
                        "mode": "Terminate",
                        "certificateRefs": [
                            {"kind": "Secret", "name": "secure-tls", "namespace": CERTS_NS}
                        ],
                    },
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                },
            ],
        },
    }


def _service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, namespace),
        "spec": {
            "selector": {"app": name},
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
            ],
        },
    }


def _endpoint_slice(
    name: str, namespace: str, service: str, serial: int, rng: random.Random
) -> dict[str, Any]:
    endpoints = []
    for e in range(rng.randint(3, 5)):
        n = serial * 8 + e
        endpoints.append(
            {
                "addresses": [f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"],
                "conditions": {"ready": rng.random() > 0.1},
                "nodeName": f"node-{n % 7}",
            }
        )
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": _meta(name, namespace, labels={"kubernetes.io/service-name": service}),
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [
            {"name": "http", "port": 8080, "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "protocol": "TCP"},
        ],
    }


def _reference_grant(
    name: str, namespace: str, from_kind: str, from_ns: str, to_kind: str
) -> dict[str, Any]:
    return {
        "apiVersion": V1BETA1,
        "kind": "ReferenceGrant",
        "metadata": _meta(name, namespace),
        "spec": {
            "from": [{"group": G, "kind": from_kind, "namespace": from_ns}],
            "to": [{"group": "", "kind": to_kind}],
        },
    }


def _backend(rng: random.Random, shape: Shape, ns_index: int) -> dict[str, Any]:
    if rng.random() < 0.15:
        return {
            "name": f"shared-{rng.randrange(shape.shared_services)}",
            "namespace": SHARED_NS,
            "port": 80,
        }
    return {"name": f"svc-{ns_index:02d}-{rng.randrange(shape.services_per_namespace)}", "port": 80}


def _match(rng: random.Random, i: int, j: int) -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.6:
        path = {"type": "PathPrefix", "value": f"/api/v{j + 1}/r{i}"}
    elif kind < 0.9:
        path = {"type": "Exact", "value": f"/exact/{i}/{j}"}
    else:
        path = {"type": "RegularExpression", "value": f"/re/{i}/[a-z]+/[0-9]{{1,6}}"}
    match: dict[str, Any] = {"path": path}
    if rng.random() < 0.5:
        match["headers"] = [{"name": "x-tenant", "value": f"tenant-{i % 97}"}]
        if rng.random() < 0.3:
            match["headers"].append(
                {"type": "RegularExpression", "name": "x-build", "value": "v[0-9]+"}
            )
    if rng.random() < 0.3:
        match["queryParams"] = [{"name": "version", "value": str(j + 1)}]
    if rng.random() < 0.2:
        match["method"] = rng.choice(["GET", "POST"])
    return match


def _rule(rng: random.Random, shape: Shape, ns_index: int, i: int, j: int) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "matches": [_match(rng, i, j * 2 + k) for k in range(rng.randint(1, 2))]
    }
    filters: list[dict[str, Any]] = []
    pick = rng.random()
    if pick < 0.05:
        redirect = {"scheme": "https", "statusCode": 301}
        rule["filters"] = [{"type": "RequestRedirect", "requestRedirect": redirect}]
        return rule
    if rng.random() < 0.5:
        filters.append(
            {
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {
                    "set": [{"name": "x-route", "value": f"route-{i}"}],
                    "remove": ["x-debug"],
                },
            }
        )
    if rng.random() < 0.3:
        filters.append(
            {
                "type": "ResponseHeaderModifier",
                "responseHeaderModifier": {"add": [{"name": "x-served-by", "value": "gateweave"}]},
            }
        )
    if (
        pick > 0.85
        and len(rule["matches"]) == 1
        and rule["matches"][0]["path"]["type"] == "PathPrefix"
    ):
        filters.append(
            {
                "type": "URLRewrite",
                "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
            }
        )
    if rng.random() < 0.05:
        filters.append(
            {
                "type": "RequestMirror",
                "requestMirror": {"backendRef": _backend(rng, shape, ns_index)},
            }
        )
    if filters:
        rule["filters"] = filters
    refs = [_backend(rng, shape, ns_index) for _ in range(rng.choice((1, 1, 1, 2)))]
    if len(refs) == 2:
        refs[0]["weight"], refs[1]["weight"] = 90, 10
    rule["backendRefs"] = refs
    return rule


def _route(rng: random.Random, shape: Shape, i: int, named: bool = False) -> dict[str, Any]:
    ns_index = i % shape.team_namespaces
    gw = f"gw-{i % shape.gateways}"
    parent: dict[str, Any] = {"name": gw, "namespace": GATEWAY_NS}
    placement = rng.random()
    if placement < 0.4:
        hostnames = [f"app-{i}.apps.bench.example"]
    elif placement < 0.8:
        hostnames = [f"svc-{i}.bench.example"]
        if rng.random() < 0.5:
            parent["sectionName"] = "https"
    elif placement < 0.9:
        hostnames = ["secure.bench.example"]
        parent["sectionName"] = "https-secure"
    else:
        hostnames = [f"legacy-{i}.example.com"]
        parent["sectionName"] = "http"
    rules = [_rule(rng, shape, ns_index, i, j) for j in range(rng.randint(1, 3))]
    if named:
        for j, rule in enumerate(rules):
            rule["name"] = f"rule-{j}"
    return {
        "apiVersion": V1,
        "kind": "HTTPRoute",
        "metadata": _meta(
            f"route-{i:05d}",
            team_namespace(ns_index),
            creationTimestamp=_timestamp(100 + i),
            labels={"app": f"app-{i % 50}"},
        ),
        "spec": {"parentRefs": [parent], "hostnames": hostnames, "rules": rules},
    }


EG_V1ALPHA1 = "gateway.envoyproxy.io/v1alpha1"


def _policy(
    kind: str, name: str, namespace: str, serial: int, target: dict[str, Any], spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": EG_V1ALPHA1,
        "kind": kind,
        "metadata": _meta(name, namespace, creationTimestamp=_timestamp(serial)),
        "spec": {"targetRefs": [{"group": G, **target}], **spec},
    }


def _policies(shape: Shape, fraction: float, first: int) -> list[dict[str, Any]]:
    """The policies of a benchmark with ``policies=fraction`` (see the module's docstring);
    creation timestamps from ``first`` on, in list order."""
    out: list[dict[str, Any]] = []

    def add(kind: str, name: str, ns: str, target: dict[str, Any], spec: dict[str, Any]) -> None:
        out.append(_policy(kind, name, ns, first + len(out), target, spec))

    for g in range(shape.gateways):
        gw = {"kind": "Gateway", "name": f"gw-{g}"}
        add(
            "BackendTrafficPolicy",
            f"gw-{g}",
            GATEWAY_NS,
            gw,
            {"timeout": {"http": {"requestTimeout": "10s"}}},
        )
        add(
            "ClientTrafficPolicy",
            f"gw-{g}",
            GATEWAY_NS,
            gw,
            {"clientIPDetection": {"xForwardedFor": {"numTrustedHops": 1}}},
        )
        add(
            "SecurityPolicy",
            f"gw-{g}-https",
            GATEWAY_NS,
            {**gw, "sectionName": "https"},
            {"cors": {"allowOrigins": ["https://*.bench.example"]}},
        )
    every = max(1, round(1 / fraction))
    for k, i in enumerate(range(0, shape.routes, every)):
        ns = team_namespace(i % shape.team_namespaces)
        route = {"kind": "HTTPRoute", "name": f"route-{i:05d}"}
        add("BackendTrafficPolicy", f"route-{i:05d}", ns, route, {"retry": {"numRetries": 2}})
        if k % 3 == 0:
            add(
                "BackendTrafficPolicy",
                f"route-{i:05d}-late",
                ns,
                route,
                {"retry": {"numRetries": 5}},
            )
        if k % 4 == 0:
            limit = {"requests": 100, "unit": "Second"}
            add(
                "BackendTrafficPolicy",
                f"route-{i:05d}-rule",
                ns,
                {**route, "sectionName": "rule-0"},
                {"rateLimit": {"type": "Local", "local": {"rules": [{"limit": limit}]}}},
            )
        if k % 2 == 0:
            allow = {"action": "Allow", "principal": {"clientCIDRs": ["10.0.0.0/8"]}}
            add(
                "SecurityPolicy",
                f"route-{i:05d}",
                ns,
                route,
                {"authorization": {"defaultAction": "Deny", "rules": [allow]}},
            )
    return out


def generate(routes: int, seed: int = DEFAULT_SEED, policies: float = 0.0) -> BenchObjects:
    """The benchmark's objects for ``routes`` HTTPRoutes, identical for the same arguments
    (``policies``: the fraction of the routes with policies of their own, see above)."""
    if not 0.0 <= policies <= 1.0:
        raise ValueError("policies must be a fraction between 0 and 1")
    shape = Shape.for_routes(routes)
    rng = random.Random(seed)
    out = BenchObjects(shape)
    add = out.manifests.append
    add(
        {
            "apiVersion": V1,
            "kind": "GatewayClass",
            "metadata": _meta(CLASS),
            "spec": {"controllerName": CONTROLLER},
        }
    )
    for namespace in _namespaces(shape):
        if namespace["metadata"]["name"].startswith("team-"):
            out.namespace_index.append(len(out.manifests))
        add(namespace)
    add(_secret("bench-tls", GATEWAY_NS))
    add(_secret("secure-tls", CERTS_NS))
    add(_reference_grant("gateways-read-certs", CERTS_NS, "Gateway", GATEWAY_NS, "Secret"))
    for g in range(shape.gateways):
        add(_gateway(g))
    serial = 0
    services = [(SHARED_NS, f"shared-{s}") for s in range(shape.shared_services)]
    for t in range(shape.team_namespaces):
        services += [
            (team_namespace(t), f"svc-{t:02d}-{s}") for s in range(shape.services_per_namespace)
        ]
        out.grant_index.append(len(out.manifests))
        add(
            _reference_grant(
                f"from-{team_namespace(t)}", SHARED_NS, "HTTPRoute", team_namespace(t), "Service"
            )
        )
    for ns, name in services:
        add(_service(name, ns))
        for part in range(2 if serial % 5 == 0 else 1):
            out.slice_index.append(len(out.manifests))
            add(_endpoint_slice(f"{name}-{part}", ns, name, serial, rng))
            serial += 1
    for i in range(routes):
        out.route_index.append(len(out.manifests))
        add(_route(rng, shape, i, named=policies > 0))
    if policies > 0:
        for policy in _policies(shape, policies, 100 + routes):
            if "retry" in policy["spec"] and not policy["metadata"]["name"].endswith("-late"):
                out.policy_index.append(len(out.manifests))
            add(policy)
    return out


def changed_route(objects: BenchObjects, i: int, version: int) -> dict[str, Any]:
    """Route ``i`` with one more request header set: a spec change (the generation moves)."""
    route = copy.deepcopy(objects.route(i))
    rule = route["spec"]["rules"][0]
    header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"set": [{"name": "x-bench-rev", "value": str(version)}]},
    }
    if "requestRedirect" in str(rule.get("filters", "")):
        rule["matches"][0]["headers"] = [{"name": "x-bench-rev", "value": str(version)}]
    else:
        kept = [f for f in rule.get("filters", []) if f["type"] != "RequestHeaderModifier"]
        rule["filters"] = [header, *kept]
    return route


def changed_policy(objects: BenchObjects, i: int, version: int) -> dict[str, Any]:
    """Route ``i``'s own BackendTrafficPolicy (of those there are) with another retry count."""
    policy = copy.deepcopy(objects.manifests[objects.policy_index[i % len(objects.policy_index)]])
    policy["spec"]["retry"]["numRetries"] = 10 + version
    return policy


def changed_grant(objects: BenchObjects, i: int, version: int) -> dict[str, Any]:
    """ReferenceGrant ``i`` of the shared namespace letting its team's GRPCRoutes in too (and a
    version label, so that every change is another object)."""
    grant = copy.deepcopy(objects.manifests[objects.grant_index[i % len(objects.grant_index)]])
    grant["metadata"]["labels"] = {"bench.gateweave.io/rev": str(version)}
    spec = grant["spec"]
    spec["from"] = [spec["from"][0], {**spec["from"][0], "kind": "GRPCRoute"}]
    return grant


def changed_namespace(objects: BenchObjects, i: int, version: int) -> dict[str, Any]:
    """Team Namespace ``i`` with one more label (no selector of the bench reads it)."""
    ns = copy.deepcopy(objects.manifests[objects.namespace_index[i % len(objects.namespace_index)]])
    ns["metadata"]["labels"]["bench.gateweave.io/rev"] = str(version)
    return ns


def changed_endpoint_slice(objects: BenchObjects, i: int, version: int) -> dict[str, Any]:
    """EndpointSlice ``i`` with its first endpoint moved to another address (a pod replaced)."""
    eps = copy.deepcopy(objects.endpoint_slice(i))
    eps["endpoints"][0]["addresses"] = [f"10.255.{(version >> 8) & 255}.{version & 255}"]
    eps["endpoints"][0]["conditions"] = {"ready": True}
    return eps


def referenced_slices(objects: BenchObjects) -> list[int]:
    """Indices (for :meth:`BenchObjects.endpoint_slice`) of the slices of Services some route sends
    to.
    """
    used: set[tuple[str, str]] = set()
    for pos in objects.route_index:
        route = objects.manifests[pos]
        ns = route["metadata"]["namespace"]
        for rule in route["spec"]["rules"]:
            refs = list(rule.get("backendRefs", []))
            refs += [
                f["requestMirror"]["backendRef"]
                for f in rule.get("filters", [])
                if f["type"] == "RequestMirror"
            ]
            used.update((ref.get("namespace", ns), ref["name"]) for ref in refs)
    out = []
    for i, pos in enumerate(objects.slice_index):
        meta = objects.manifests[pos]["metadata"]
        if (meta["namespace"], meta["labels"]["kubernetes.io/service-name"]) in used:
            out.append(i)
    return out
