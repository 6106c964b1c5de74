"""deploy/ rendered by the real `kubectl kustomize` (Debian's kubernetes-client in CI, installed
by .ci/run): every object of the files listed is rendered, in gateweave's namespace, and the
rendered RBAC is exactly what tests/kube/test_rbac.py checks against the requests gateweave
makes, bound to the ServiceAccount the controller's pods run as, in the namespace of its Lease."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import yaml

from tests.kube.test_rbac import LEASE_NS, rules
from tests.support.data import ROOT

DEPLOY = ROOT / "deploy"


def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is needed (.ci/run installs Debian's kubernetes-client)"
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=120, check=True
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def ident(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def test_kustomize_renders_every_object_with_the_tested_rbac() -> None:
    docs = rendered()
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = [
        d
        for f in kustomization["resources"]
        for d in yaml.safe_load_all((DEPLOY / f).read_text())
        if d
    ]
    assert sorted(kustomization["resources"]) == sorted(
        p.relative_to(DEPLOY).as_posix()
        for p in DEPLOY.rglob("*.yaml")
        if p.name != "kustomization.yaml"
    )  # none left out
    namespace = kustomization["namespace"]
    assert namespace == LEASE_NS
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    assert sorted(map(ident, docs)) == sorted(
        (d["kind"], "" if d["kind"] in cluster_scoped else namespace, d["metadata"]["name"])
        for d in listed
    )

    assert sorted(map(repr, rules(docs))) == sorted(
        map(repr, rules())
    )  # the rules the request-log test holds gateweave to
    by_kind = {d["kind"]: d for d in docs}
    account = by_kind["ServiceAccount"]["metadata"]
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]
    assert (
        "--leader-elect" in pod["containers"][0]["args"]
    )  # its Lease (and ack reports): the pod's namespace
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]
        role = next(
            d
            for d in docs
            if d["kind"] == binding["roleRef"]["kind"]
            and d["metadata"]["name"] == binding["roleRef"]["name"]
        )
        assert role["metadata"].get("namespace", "") == binding["metadata"].get("namespace", "")
