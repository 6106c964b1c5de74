"""Many Gateways in Kubernetes mode (issue 18, target 5): how many objects the Kubernetes data
plane creates for N Gateways, with one Envoy per Gateway and with the class's
GatewayParameters setting ``mergeGateways``. Object counts only: the API-server stand-in
(:mod:`gateweave_bench.kubeapi`) runs no Deployment controller, so no pod exists here.

The Gateways are :func:`gateweave_bench.gateways.objects`'s, each on its own port (8080 + i:
in one Envoy pod every listener binds 0.0.0.0, and Gateways of a merged class on the same port
would collide); they are translated in Kubernetes addressing mode and the infrastructure IR
is handed to the real infra sink (:class:`gateweave.sinks.kubeinfra.KubernetesInfra`, with
xDS mutual TLS, so each Envoy has its client certificate's Secret) talking to the stand-in.
Reported per mode: ``objects`` (by kind, in the stand-in afterwards), ``writes`` (the apply
and delete requests the sink made) and ``envoy_deployments``.

    python -m gateweave_bench.kubeobjects --gateways 100 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from gateweave.api.decode import decode
from gateweave.kube.client import KubeClient
from gateweave.kube.xdsca import XdsCertificates
from gateweave.sinks.kubeinfra import KubernetesInfra
from gateweave.snapshot import Snapshot
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from gateweave_bench.gateways import objects
from gateweave_bench.kubeapi import KubeAPI, write_kubeconfig

KINDS = (
    "Deployment",
    "Service",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
)
NAMESPACE = "gateweave-system"  # the controller's: the xDS CA and a merged class's objects


def gateway_objects(gateways: int, merged: bool) -> list[dict[str, Any]]:
    """:func:`gateweave_bench.gateways.objects` (one route each), each Gateway on its own port."""
    out = objects(gateways, 1, merged)
    port = 8080
    for obj in out:
        if obj["kind"] == "Gateway":
            obj["spec"]["listeners"][0]["port"] = port
            port += 1
    return out


async def measure_mode(gateways: int, merged: bool) -> dict[str, Any]:
    raws = gateway_objects(gateways, merged)
    decoded = [decode(raw)[0] for raw in raws]
    snap = Snapshot.from_objects(d.model for d in decoded if d is not None)
    result = translate(snap, TranslateOptions(address_mode="kubernetes"))
    api = KubeAPI()
    await api.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            client = await KubeClient.load(write_kubeconfig(api, str(Path(tmp) / "kc")))
        try:
            certs = XdsCertificates(client, NAMESPACE, ["gateweave.gateweave-system.svc"])
            await certs.start()
            infra = KubernetesInfra(
                client,
                xds_host="gateweave.gateweave-system.svc",
                xds_port=18000,
                certs=certs,
                namespace=NAMESPACE,
            )
            before = len(api.requests(verb="patch")) + len(api.requests(verb="delete"))
            await infra.update(result.infra, ())
            writes = len(api.requests(verb="patch")) + len(api.requests(verb="delete")) - before
        finally:
            await client.close()
        counts = {kind: len(api.objects(kind)) for kind in KINDS}
        counts["Secret"] -= 1  # the xDS CA's own Secret is no Envoy's
        return {
            "gateways": gateways,
            "envoy_deployments": counts["Deployment"],
            "objects": {k: v for k, v in counts.items() if v},
            "objects_total": sum(counts.values()),
            "writes": writes,
        }
    finally:
        await api.stop()


def measure(gateways: int) -> dict[str, Any]:
    per = asyncio.run(measure_mode(gateways, merged=False))
    merged = asyncio.run(measure_mode(gateways, merged=True))
    return {
        "per_gateway": per,
        "merged": merged,
        "objects_ratio": round(merged["objects_total"] / per["objects_total"], 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateways", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = measure(args.gateways)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    for mode in ("per_gateway", "merged"):
        r = report[mode]
        print(
            f"{mode}: {r['gateways']} Gateways -> {r['envoy_deployments']} Envoy Deployments, "
            f"{r['objects_total']} objects {r['objects']}, {r['writes']} writes"
        )
    print(f"objects merged / per Gateway: {report['objects_ratio']}")


if __name__ == "__main__":
    main()
