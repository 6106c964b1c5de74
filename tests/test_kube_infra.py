"""The Kubernetes data plane's infrastructure against the API-server stand-in: per Gateway
an Envoy Deployment, Service, ServiceAccount and bootstrap ConfigMap, owned by the Gateway,
with spec.infrastructure labels/annotations; status.addresses from the Service."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import yaml
from kubeapi import KubeAPI, serving, settle, write_kubeconfig

from gateweave.infra.kubernetes import object_name

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart" / "quickstart.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_envoy_infrastructure_per_gateway(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    for doc in yaml.safe_load_all(QUICKSTART.read_text()):
        if doc:
            if doc["kind"] == "Gateway":
                doc["spec"]["infrastructure"] = {"labels": {"team": "edge"}, "annotations": {"note": "hi"}}
                del doc["spec"]["addresses"]
            api.put(doc)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    name = object_name("quickstart")
    try:
        async with serving(api, kc, kube_dataplane=True, xds_bind="127.0.0.1", xds_port=free_port(),
                           xds_host="gateweave.gateweave-system.svc", service_type="LoadBalancer") as (
            runtime, source,
        ):
            await settle(api, runtime, source)
            gw = api.get("Gateway", "default", "quickstart")
            assert gw is not None
            objs: dict[str, Any] = {k: api.get(k, "default", name)
                                    for k in ("Deployment", "Service", "ServiceAccount", "ConfigMap")}
            for kind, obj in objs.items():
                assert obj is not None, kind
                assert obj["metadata"]["ownerReferences"][0]["uid"] == gw["metadata"]["uid"]
                assert obj["metadata"]["labels"]["team"] == "edge"
                assert obj["metadata"]["annotations"]["note"] == "hi"
            dep, svc = objs["Deployment"], objs["Service"]
            pod = dep["spec"]["template"]
            assert pod["metadata"]["labels"]["team"] == "edge" and pod["spec"]["serviceAccountName"] == name
            assert [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]] == [8080]
            assert svc["spec"]["type"] == "LoadBalancer" and svc["spec"]["ports"][0]["port"] == 8080
            boot = json.loads(objs["ConfigMap"]["data"]["bootstrap.json"])
            xds = boot["static_resources"]["clusters"][0]
            assert xds["type"] == "STRICT_DNS"
            assert boot["node"]["id"] == "default/quickstart"
            applies = [r for r in api.requests(verb="patch") if r.resource in ("deployments", "services")]
            assert applies and all(r.code == 200 for r in applies)

            # the cluster IP until the load balancer has an address, then that (a status-only change)
            assert api.get("Gateway", "default", "quickstart")["status"]["addresses"] == [  # type: ignore[index]
                {"type": "IPAddress", "value": svc["spec"]["clusterIP"]}]
            translations = runtime.translations
            api._update(api.rtype("Service"), "default", name,
                        {**svc, "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}, True, "cloud")
            await settle(api, runtime, source)
            assert api.get("Gateway", "default", "quickstart")["status"]["addresses"] == [  # type: ignore[index]
                {"type": "IPAddress", "value": "203.0.113.7"}]
            assert runtime.translations == translations

            # the Gateway goes: so does its infrastructure
            api.remove("Gateway", "default", "quickstart")
            await settle(api, runtime, source)
            await asyncio.sleep(0.05)
            assert all(api.get(k, "default", name) is None
                       for k in ("Deployment", "Service", "ServiceAccount", "ConfigMap"))
    finally:
        await api.stop()
