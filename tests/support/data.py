"""Where the tests' data is: all of it inside the repository (the upstream Gateway API data is
vendored in third_party/gateway-api). Data that is missing is an error, never a reason to skip."""

from __future__ import annotations

from pathlib import Path

from gateweave_conformance import cases

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_API = ROOT / "third_party" / "gateway-api"
CRDS = GATEWAY_API / "crds" / "experimental"  # what gateweave/api/schemas is generated from
EG_CRDS = ROOT / "third_party" / "envoy-gateway" / "crds"  # Envoy Gateway's, generated from too
OWN_CRDS = ROOT / "deploy" / "crds"  # gateweave's own (GatewayParameters), generated from too
CASES = GATEWAY_API / "conformance" / "cases"  # the upstream conformance tests, as case files
MANIFESTS = GATEWAY_API / "conformance" / "manifests"  # the upstream conformance manifests
EXTRA_CASES = (
    ROOT / "tests" / "conformance_extra" / "cases"
)  # transcribed here (upstream tests CASES lacks)
QUICKSTART = ROOT / "examples" / "quickstart" / "quickstart.yaml"
BACKENDS_SYSTEM = (
    ROOT / "tests" / "data" / "backends" / "system.yaml"
)  # backends by name, of every kind
EG_QUICKSTART = ROOT / "third_party" / "envoy-gateway" / "examples" / "standalone-quickstart.yaml"
EG_KUBE_QUICKSTART = EG_QUICKSTART.with_name("kubernetes-quickstart.yaml")
EG_EXAMPLES = ROOT / "tests" / "data" / "eg-examples"  # Envoy Gateway's tasks' YAML
DATA_DIRS = (
    CRDS,
    GATEWAY_API / "crds" / "standard",
    EG_CRDS,
    OWN_CRDS,
    EG_QUICKSTART.parent,
    EG_EXAMPLES,
    CASES,
    MANIFESTS,
    EXTRA_CASES,
    BACKENDS_SYSTEM.parent,
)


def missing() -> list[Path]:
    """The data directories that hold no YAML file (none, in a complete checkout)."""
    return [d for d in DATA_DIRS if next(d.rglob("*.yaml"), None) is None]


def yaml_files(directory: Path, pattern: str = "*.yaml") -> list[Path]:
    """The YAML files below ``directory`` (``pattern`` as for Path.glob), sorted; an error if
    there are none, so that a test over a directory cannot pass vacuously."""
    files = sorted(directory.glob(pattern))
    if not files:
        raise FileNotFoundError(
            f"no {pattern} in {directory}: the repository's test data is missing"
        )
    return files


def case_files(directory: Path = CASES) -> list[Path]:
    """The conformance case files of a directory (FORMAT.md), as the runner finds them; an
    error if there are none."""
    files = cases.case_files(directory)
    if not files:
        raise FileNotFoundError(
            f"no conformance case files in {directory}: the repository's test data is missing"
        )
    return files
