"""``gateweave translate``, ``explain`` and ``status`` show Envoy Gateway Backends with their
status, as a user runs them on files (the real CLI)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.cli import invoke
from tests.support.data import BACKENDS_SYSTEM, EG_QUICKSTART

EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"


def test_translate_prints_envoy_gateways_quickstart_with_its_status() -> None:
    code, out, err = invoke(
        "translate", "-f", str(EG_QUICKSTART), "--controller-name", EG_CONTROLLER
    )
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["GatewayClass", "Gateway", "HTTPRoute", "Backend"]
    route, backend = docs[2], docs[3]
    assert {c["type"]: c["status"] for c in route["status"]["parents"][0]["conditions"]} == {
        "Accepted": "True",
        "ResolvedRefs": "True",
    }
    assert backend["status"] == {
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "The Backend was accepted",
                "observedGeneration": 1,
            }
        ]
    }
    assert err == ""


def test_translate_warns_of_a_refused_backend_at_its_line() -> None:
    code, _, err = invoke("translate", "-f", str(BACKENDS_SYSTEM))
    assert code == 0
    line = (
        next(
            i
            for i, text in enumerate(BACKENDS_SYSTEM.read_text().splitlines(), 1)
            if text == "  name: fallback"
        )
        - 3
    )
    assert (
        f"warning: {BACKENDS_SYSTEM}:{line}: Backend apps/fallback: Accepted=False Invalid: The "
        "Backend was not accepted: "
        "spec.fallback is not supported by gateweave"
    ) in err


def test_translate_rejects_a_backend_the_schema_refuses(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        EG_QUICKSTART.read_text().replace(
            "port: 3000",
            "port: 3000\n    - unix: {path: /run/x.sock}\n      ip: {address: 10.0.0.1, port: 1}",
        )
    )
    code, _, err = invoke("translate", "-f", str(bad), "--controller-name", EG_CONTROLLER)
    assert code == 1
    at = (
        bad.read_text().splitlines().index("    - unix: {path: /run/x.sock}") + 1
    )  # the offending field's line
    assert (
        f'error: {bad}:{at}: Backend default/backend: spec.endpoints[1]: Invalid value: "object": '
        "only one of fqdn, ip or unix can be specified"
    ) in err
    # the route that uses it now names a Backend that is not there
    assert "ResolvedRefs=False BackendNotFound: Backend default/backend not found" in err


def test_explain_a_backend() -> None:
    code, out, _ = invoke("explain", "backend", "apps/fqdn", "-f", str(BACKENDS_SYSTEM))
    assert code == 0
    assert out.splitlines() == [
        "Backend apps/fqdn (generation 1)",
        "  endpoints (Envoy resolves its host names (getaddrinfo, as its TTL says)):",
        "    FQDN app.example.internal:8443",
        "  referred to by HTTPRoute apps/cross",
        "  referred to by HTTPRoute apps/eg-backends",
        "  referred to by UDPRoute apps/udp",
        "Accepted=True (Accepted): The Backend was accepted".join(("  ", "")),
    ]
    code, out, _ = invoke("explain", "Backend", "apps/unused", "-f", str(BACKENDS_SYSTEM))
    assert code == 0 and "gateweave reports nothing on it" in out
    code, out, _ = invoke("explain", "Backend", "apps/nope", "-f", str(BACKENDS_SYSTEM))
    assert code == 1 and out.strip() == "Backend apps/nope not found"


def test_status_has_a_backends_table() -> None:
    code, out, _ = invoke("status", "-f", str(BACKENDS_SYSTEM))
    assert code == 0
    rows = [line for line in out.splitlines() if "Backend " in line and "apps/" in line]
    assert any(
        "apps/fallback" in r and "False" in r and "spec.fallback is not supported" in r
        for r in rows
    ), rows
    assert any("backends/shared" in r and "True" in r for r in out.splitlines())
