"""The install documentation's kubectl commands (docs/kubernetes.md's ``sh`` blocks, read
from the page so it cannot drift) run, as written, with the real kubectl against the API
stand-in: the Gateway API CRDs, ``deploy/`` (kustomize) and the quickstart are applied, and
the objects read back. Other commands of those blocks (kind, docker, kustomize edit) need a
cluster or an image build and are not run."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import yaml

from tests.support.data import ROOT
from tests.support.kubeapi import KubeAPI, write_kubeconfig

DOC = ROOT / "docs" / "kubernetes.md"


def kubectl_commands(text: str) -> list[str]:
    """The ``kubectl`` lines of the page's ``sh`` blocks, without their comments."""
    out = []
    for block in re.findall(r"^ *```sh\n(.*?)^ *```", text, re.S | re.M):
        for line in block.splitlines():
            command = line.split(" #", 1)[0].strip()
            if command.startswith("kubectl "):
                out.append(command)
    return out


async def run(command: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *command.split(),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(120):
        out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_install_commands_run_against_the_stand_in(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is needed (.ci/run installs Debian's kubernetes-client)"
    commands = kubectl_commands(DOC.read_text())
    assert "kubectl apply -k deploy/" in commands and "kubectl get gatewayparameters -A" in commands
    # kubectl sends no bearer token over plain HTTP: this stand-in asks for none
    api = KubeAPI(token=None)
    await api.start()
    env = {
        **os.environ,
        "KUBECONFIG": write_kubeconfig(api, str(tmp_path / "kc")),
        "HOME": str(tmp_path),
    }
    outputs = {}
    try:
        for command in commands:
            code, outputs[command] = await run(command, env)
            assert code == 0, (command, outputs[command])
    finally:
        await api.stop()

    crds = {o["metadata"]["name"] for o in api.objects("CustomResourceDefinition")}
    vendored = [
        d
        for f in sorted((ROOT / "third_party/gateway-api/crds/standard").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d and d["kind"] == "CustomResourceDefinition"
    ]
    assert {d["metadata"]["name"] for d in vendored} | {"gatewayparameters.gateweave.io"} <= crds
    deployment = api.get("Deployment", "gateweave-system", "gateweave")
    assert deployment is not None and api.get("ClusterRole", "", "gateweave") is not None
    assert api.get("Gateway", "default", "quickstart") is not None
    assert "name: quickstart" in outputs["kubectl get gateway quickstart -o yaml"]
    assert "quickstart" in outputs["kubectl get gateways -A"]
    assert "No resources found" in outputs["kubectl get gatewayparameters -A"]
