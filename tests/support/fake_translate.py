"""A small, pure stand-in for ``gateweave.translate.translate`` used by the runtime,
status and admin tests: statuses for GatewayClasses, Gateways and HTTPRoutes, and xDS
and infra IR for every Gateway of one of our classes, all derived from the snapshot."""

from __future__ import annotations

from typing import Any

from gateweave.api.models import GATEWAY_GROUP
from gateweave.ir import (
    InfraGateway,
    InfraPort,
    Port,
    Result,
    Route,
    RouteConfig,
    RouteMatch,
    VirtualHost,
    XdsGateway,
)
from gateweave.snapshot import Snapshot
from gateweave.translate.options import DataplaneState, TranslateOptions


def _cond(type_: str, ok: bool, reason: str, generation: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": "",
        "observedGeneration": generation,
    }


def fake_translate(snapshot: Snapshot, options: TranslateOptions) -> Result:
    ctrl = options.controller_name
    ours = {
        name
        for (_, name), gc in snapshot.gateway_classes.items()
        if gc.spec.controller_name == ctrl
    }
    statuses: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (_, name), gc in sorted(snapshot.gateway_classes.items()):
        if name in ours:
            statuses[("GatewayClass", "", name)] = {
                "conditions": [_cond("Accepted", True, "Accepted", gc.metadata.generation)]
            }

    attached: dict[tuple[str, str], list[str]] = {}
    for (ns, name), route in sorted(snapshot.http_routes.items()):
        parents = []
        for ref in route.spec.parent_refs:
            gw_ns = ref.namespace or ns
            gw = snapshot.gateways.get((gw_ns, ref.name))
            if gw is not None and gw.spec.gateway_class_name not in ours:
                continue  # another controller's Gateway: not ours to report on
            ok = gw is not None
            parents.append(
                {
                    "parentRef": {
                        "group": GATEWAY_GROUP,
                        "kind": "Gateway",
                        "namespace": gw_ns,
                        "name": ref.name,
                    },
                    "controllerName": ctrl,
                    "conditions": [
                        _cond(
                            "Accepted",
                            ok,
                            "Accepted" if ok else "NoMatchingParent",
                            route.metadata.generation,
                        ),
                        _cond("ResolvedRefs", True, "ResolvedRefs", route.metadata.generation),
                    ],
                }
            )
            if ok:
                attached.setdefault((gw_ns, ref.name), []).append(f"{ns}/{name}")
        statuses[("HTTPRoute", ns, name)] = {"parents": parents}

    xds: dict[str, XdsGateway] = {}
    infra: dict[str, InfraGateway] = {}
    our_gateways = sorted(
        k for k, gw in snapshot.gateways.items() if gw.spec.gateway_class_name in ours
    )
    for index, (ns, name) in enumerate(our_gateways):
        gw = snapshot.gateways[(ns, name)]
        full = f"{ns}/{name}"
        routes = sorted(attached.get((ns, name), []))
        gen = gw.metadata.generation
        state = None if options.dataplane is None else options.dataplane.get(full, DataplaneState())
        programmed = state is None or state.acked
        statuses[("Gateway", ns, name)] = {
            "addresses": [{"type": "IPAddress", "value": f"127.10.0.{index + 1}"}],
            "conditions": [
                _cond("Accepted", True, "Accepted", gen),
                _cond("Programmed", programmed, "Programmed" if programmed else "Pending", gen),
            ],
            "listeners": [
                {
                    "name": listener.name,
                    "attachedRoutes": len(routes),
                    "supportedKinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}],
                    "conditions": [_cond("Accepted", True, "Accepted", gen)],
                }
                for listener in gw.spec.listeners
            ],
        }
        address = f"127.10.0.{index + 1}"
        xds[full] = XdsGateway(
            name=full,
            address=address,
            ports=tuple(
                Port(
                    name=f"{full}/{listener.port}",
                    port=listener.port,
                    protocol="HTTP",
                    http=RouteConfig(
                        name=f"{full}/{listener.port}",
                        virtual_hosts=(
                            VirtualHost(
                                name="any",
                                domains=("*",),
                                routes=tuple(Route(name=r, match=RouteMatch()) for r in routes),
                            ),
                        ),
                    ),
                )
                for listener in gw.spec.listeners
            ),
        )
        infra[full] = InfraGateway(
            name=full,
            namespace=ns,
            gateway_name=name,
            gateway_class=gw.spec.gateway_class_name,
            address=address,
            ports=tuple(
                InfraPort(name=listener.name, port=listener.port, protocol="TCP")
                for listener in gw.spec.listeners
            ),
        )
    return Result(statuses=statuses, infra=infra, xds=xds)


SEED = {
    "GatewayClass": """\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: gateweave
spec:
  controllerName: gateweave.io/gateway-controller
""",
    "Gateway": """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: default
spec:
  gatewayClassName: gateweave
  listeners:
  - name: http
    port: 80
    protocol: HTTP
""",
    "HTTPRoute": """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: route
  namespace: default
spec:
  parentRefs:
  - name: gw
  rules:
  - backendRefs:
    - name: svc
      port: 8080
""",
}
