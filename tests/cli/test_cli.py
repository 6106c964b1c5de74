"""`gateweave translate` / `explain` / `status -f` as a user runs them: real files, the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from gateweave.cli import app
from tests.support.cli import invoke, runner
from tests.support.data import ROOT

QUICKSTART = ROOT / "examples" / "quickstart"

GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gw}
spec: {controllerName: gateweave.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: gw
  listeners:
  - {name: http, port: 80, protocol: HTTP, hostname: "*.example.com"}
"""


def test_translate_quickstart_yaml_has_status() -> None:
    code, out, err = invoke("translate", "-f", str(QUICKSTART))
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
    ]  # only Gateway API kinds, in kind order
    route = docs[2]
    entry = route["status"]["parents"][0]
    assert entry["controllerName"] == "gateweave.io/gateway-controller"
    assert {c["type"]: c["status"] for c in entry["conditions"]} == {
        "Accepted": "True",
        "ResolvedRefs": "True",
    }
    assert docs[1]["status"]["addresses"] == [{"type": "IPAddress", "value": "127.10.0.1"}]
    # no clock offline: no lastTransitionTime anywhere
    assert "lastTransitionTime" not in out


def test_translate_json_items_and_ir() -> None:
    code, out, _ = invoke("translate", "-f", str(QUICKSTART), "-o", "json")
    assert code == 0
    assert [i["kind"] for i in json.loads(out)["items"]] == ["GatewayClass", "Gateway", "HTTPRoute"]
    code, out, _ = invoke("translate", "-f", str(QUICKSTART), "-o", "json", "--show", "ir")
    ir = json.loads(out)
    assert ir["infra"]["default/quickstart"]["address"] == "127.10.0.1"
    assert ir["xds"]["default/quickstart"]["ports"][0]["port"] == 8080


def test_translate_stdin_and_rejected_object(tmp_path: Path) -> None:
    bad = (
        GATEWAY
        + """
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: "no-leading-slash"}}]
---
apiVersion: v1
kind: Pod
metadata: {name: ignored}
"""
    )
    result = runner.invoke(app, ["translate", "-f", "-"], input=bad)
    assert result.exit_code == 1
    # the rejected route is named with where it came from, and left out; the rest is printed
    assert "<stdin>:" in result.stderr and "HTTPRoute default/bad" in result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["GatewayClass", "Gateway"]


def test_translate_malformed_file_exit_2(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(GATEWAY)
    (tmp_path / "broken.yaml").write_text("kind: Gateway\nmetadata:\n  name: [unclosed\n")
    code, _, err = invoke("translate", "-f", str(tmp_path))
    assert code == 2
    assert "broken.yaml:" in err


def test_translate_dangling_reference_is_located(tmp_path: Path) -> None:
    (tmp_path / "gw.yaml").write_text(GATEWAY)
    (tmp_path / "route.yaml").write_text(
        """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.example.com]
  rules: [{backendRefs: [{name: missing, port: 80}]}]
"""
    )
    code, out, err = invoke("translate", "-f", str(tmp_path))
    assert code == 0
    assert f"{tmp_path / 'route.yaml'}:1: HTTPRoute default/r" in err
    assert "ResolvedRefs=False BackendNotFound" in err
    assert "Accepted" in out


def test_duplicate_definition_rejected(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GATEWAY)
    (tmp_path / "b.yaml").write_text(GATEWAY.split("---")[1])
    code, _, err = invoke("translate", "-f", str(tmp_path))
    assert code == 1
    assert "defined again" in err and "a.yaml" in err


def test_explain_route_rules(tmp_path: Path) -> None:
    (tmp_path / "gw.yaml").write_text(GATEWAY)
    (tmp_path / "route.yaml").write_text(
        """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: other}
spec:
  parentRefs: [{name: gw, namespace: default, sectionName: http}, {name: gw, namespace: default,
  sectionName: nope}]
  hostnames: [a.example.com]
"""
    )
    code, out, _ = invoke("explain", "httproute", "other/r", "-f", str(tmp_path))
    assert code == 0
    assert (
        "rejected by namespace: allowedRoutes.namespaces.from=Same does not admit namespace other"
        in out
    )
    assert "rejected by sectionName" in out
    assert "Accepted=False (NotAllowedByListeners)" in out
    assert "Accepted=False (NoMatchingParent)" in out


def test_explain_hostname_and_gateway(tmp_path: Path) -> None:
    (tmp_path / "gw.yaml").write_text(GATEWAY)
    (tmp_path / "route.yaml").write_text(
        """apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.other.org]
"""
    )
    code, out, _ = invoke("explain", "HTTPRoute", "default/r", "-f", str(tmp_path))
    assert "rejected by hostname" in out and "NoMatchingListenerHostname" in out
    code, out, _ = invoke("explain", "gateway", "gw", "-f", str(tmp_path))
    assert "listener http (HTTP :80 *.example.com): programmed" in out
    code, out, _ = invoke("explain", "gateway", "nope", "-f", str(tmp_path))
    assert code == 1


def test_status_table_from_files() -> None:
    code, out, _ = invoke("status", "-f", str(QUICKSTART))
    assert code == 0
    assert "default/quickstart" in out and "127.10.0.1" in out and "HTTPRoute" in out


def test_console_script_runs() -> None:
    exe = Path(sys.executable).parent / "gateweave"
    proc = subprocess.run(
        [str(exe), "translate", "-f", str(QUICKSTART), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["items"]


# gateweave installed without its development harnesses (as `pip install .` installs it): the
# harness packages cannot be imported, as for a package that is not there.
WITHOUT_HARNESS = """
import sys

class WithoutHarness:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("gateweave_conformance", "gateweave_bench"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, WithoutHarness())
from gateweave.cli import main
main()
"""


def test_harness_commands_without_the_harness_say_how_to_get_it() -> None:
    for args in (["conformance", "--cases", "c", "--manifests", "m"], ["bench", "--json"]):
        proc = subprocess.run(
            [sys.executable, "-c", WITHOUT_HARNESS, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        (line,) = proc.stderr.splitlines()  # one line, no traceback
        assert f"`gateweave {args[0]}` is part of gateweave's development harness" in line
        assert "pip install -e harness" in line
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_HARNESS, "translate", "-f", str(QUICKSTART)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr  # the product's own commands are all there


def test_harness_commands_where_the_harness_is_installed() -> None:
    code, out, _ = invoke("conformance", "--help")
    assert code == 0 and "--manifests" in out
    code, out, err = invoke("bench", "--routes", "ten")
    assert code == 2 and "expected positive integers" in err
