"""The RBAC rules in deploy/rbac.yaml against what gateweave actually asks the API server
(the stand-in's request log) in a run that uses every feature: the provider, the status
writer (with a conflict), leader election and the Kubernetes data plane (with a
PodDisruptionBudget and an autoscaler)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import yaml

from gateweave.app import KubeDataplane
from tests.support.data import QUICKSTART, ROOT
from tests.support.kubeapi import KubeAPI, Request, serving, settle, write_kubeconfig

LEASE_NS = "gateweave-system"
# An Envoy Gateway Backend a route of the quickstart Gateway uses: its status is written too.
BACKEND = [
    {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {"endpoints": [{"fqdn": {"hostname": "demo.example.internal", "port": 80}}]},
    },
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "demo-backend", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "quickstart"}],
            "hostnames": ["backend.example.com"],
            "rules": [
                {
                    "backendRefs": [
                        {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "demo"}
                    ]
                }
            ],
        },
    },
]


# Parameters asking for an Envoy fleet: a PodDisruptionBudget and an autoscaler are applied too.
FLEET = {
    "apiVersion": "gateweave.io/v1alpha1",
    "kind": "GatewayParameters",
    "metadata": {"name": "fleet", "namespace": "default"},
    "spec": {
        "kubernetes": {
            "podDisruptionBudget": {"minAvailable": 1},
            "autoscaling": {"minReplicas": 2, "maxReplicas": 4, "cpuUtilization": 70},
        }
    },
}


def with_fleet(doc: dict[str, Any]) -> dict[str, Any]:
    """The quickstart Gateway with the fleet's parameters; other objects as they are."""
    if doc["kind"] != "Gateway":
        return doc
    ref = {"group": "gateweave.io", "kind": "GatewayParameters", "name": "fleet"}
    return {**doc, "spec": {**doc["spec"], "infrastructure": {"parametersRef": ref}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rules(docs: list[Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(namespace the rule applies in, "" = everywhere; the rule) of
    ``docs`` (deploy/rbac.yaml's).
    """
    out = []
    for doc in (
        docs
        if docs is not None
        else yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text())
    ):
        if doc and doc["kind"] in ("ClusterRole", "Role"):
            scope = doc["metadata"].get("namespace", "") if doc["kind"] == "Role" else ""
            out += [(scope, r) for r in doc["rules"]]
    return out


def allowed(req: Request, granted: list[tuple[str, dict[str, Any]]]) -> bool:
    resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    return any(
        (not scope or scope == req.namespace)
        and req.group in r["apiGroups"]
        and resource in r["resources"]
        and req.verb in r["verbs"]
        for scope, r in granted
    )


async def test_rbac_rules_match_the_requests_made(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in [*yaml.safe_load_all(QUICKSTART.read_text()), *BACKEND, FLEET]:
        if doc:
            api.put(with_fleet(doc))
    conflict = {"httproutes": False, "backends": False}

    def other_writer(req: Request) -> None:
        # one status write of each kind of status meets a conflict (then the object is read again)
        if req.subresource == "status" and req.resource in conflict and not conflict[req.resource]:
            conflict[req.resource] = True
            status: dict[str, Any]
            kind, name, status = (
                ("HTTPRoute", "demo", {"parents": []})
                if req.resource == "httproutes"
                else ("Backend", "demo", {"conditions": []})
            )
            obj = api.get(kind, "default", name)
            assert obj is not None
            api._update(api.rtype(kind), "default", name, {**obj, "status": status}, True, "x")

    api.hooks.append(other_writer)
    try:
        async with serving(
            api,
            write_kubeconfig(api, str(tmp_path / "kc")),
            leader_elect=True,
            lease_namespace=LEASE_NS,
            lease_duration=1.0,
            renew_deadline=0.8,
            retry_period=0.05,
            dataplane=KubeDataplane(xds_bind="127.0.0.1", xds_port=free_port()),
        ) as (runtime, source):
            for _ in range(200):
                if source.elector.leading:
                    break
                await settle(api, runtime, source)
            await settle(api, runtime, source)
            assert source.status_writer.conflicts == 2
            backend = api.get("Backend", "default", "demo")
            assert (
                backend is not None and backend["status"]["conditions"][0]["reason"] == "Accepted"
            )
            assert api.get("HorizontalPodAutoscaler", "default", "gateweave-quickstart") is not None
            api.remove("Gateway", "default", "quickstart")  # its infrastructure is deleted
            await settle(api, runtime, source)
            await source.elector.try_acquire_or_renew()  # a renewal (update)
            await source.infra.certs.rotate()  # the xDS CA's rotation (update)
    finally:
        await api.stop()

    granted = rules()
    denied = sorted(
        {(r.verb, r.group, r.resource, r.subresource) for r in api.log if not allowed(r, granted)}
    )
    assert denied == []
    # and nothing granted goes unused: every verb of every rule was used on one of its resources
    used = {
        (r.verb, r.group, f"{r.resource}/{r.subresource}" if r.subresource else r.resource)
        for r in api.log
    }
    for _, rule in granted:
        for verb in rule["verbs"]:
            assert any(
                (verb, g, res) in used for g in rule["apiGroups"] for res in rule["resources"]
            ), (verb, rule)
