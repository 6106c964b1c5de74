"""A ClientTrafficPolicy's further checks of client certificates live: ``serve`` with a real Envoy
terminating HTTPS, two clients with certificates the policy's CA signed (alice's naming
``alice.example``, bob's ``bob.example``; tests/support/clientcerts.py).

Each policy in turn serves one of them and refuses the other: ``subjectAltNames`` (a DNS name
alice's certificate has), ``crl`` (a ConfigMap's revocation list revoking alice's),
``spkiHashes`` (the hash of alice's public key), ``certificateHashes`` (the hash of bob's
certificate).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateweave.infra.host import free_port
from gateweave_bench import harness as h
from gateweave_conformance.tlsgen import TLSSpec, generate
from tests.serve.test_client_traffic_tls_more_e2e import (
    IP,
    client,
    served,
    write_base,
    write_policy,
)
from tests.support.clientcerts import certificate_hash, client_cert, revocation_list, spki_hash
from tests.support.incremental_check import CHECK_INCREMENTAL
from tests.support.live import until

pytestmark = pytest.mark.timeout(90)


async def test_client_certificates_held_to_names_revocation_and_hashes(
    tmp_path: Path, backends: dict[str, Any]
) -> None:
    port = free_port(IP)
    write_base(tmp_path, port, backends)
    ca = generate([TLSSpec("ConfigMap", "default", "client-ca")]).get(
        "ConfigMap", "default/client-ca"
    )
    alice = client_cert(ca, "alice", ["alice.example"])
    bob = client_cert(ca, "bob", ["bob.example"])
    crl = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": h.meta("client-crl"),
        "data": {"ca.crl": revocation_list(ca, [alice])},
    }
    h.write_manifests(tmp_path / "ca.yaml", [ca.manifest(), crl])
    for name in ("alice", "bob"):
        (tmp_path / name).mkdir()
    alice_client, bob_client = client(tmp_path / "alice", alice), client(tmp_path / "bob", bob)
    refs = [{"kind": "ConfigMap", "name": "client-ca"}]

    async def only(policy: dict[str, Any], allowed: Any, refused: Any, what: str) -> None:
        """Once ``policy`` applies, ``allowed`` is served and ``refused`` is not."""
        write_policy(tmp_path, {"clientValidation": {"caCertificateRefs": refs, **policy}})

        async def refused_now() -> bool:
            return not await served(port, refused)

        await until(refused_now, 20, what)
        assert await served(port, allowed), what

    async with h.running_serve(tmp_path, check_incremental=CHECK_INCREMENTAL):
        write_policy(tmp_path, {"clientValidation": {"caCertificateRefs": refs}})
        await until(lambda: served(port, alice_client), 20, "Envoy serving HTTPS to alice")
        assert await served(port, bob_client)  # both signed by the CA

        sans = {"subjectAltNames": {"dnsNames": [{"value": "alice.example"}]}}
        await only(sans, alice_client, bob_client, "bob refused: not alice.example")
        revoked = {"crl": {"refs": [{"kind": "ConfigMap", "name": "client-crl"}]}}
        await only(revoked, bob_client, alice_client, "alice refused: revoked")
        spki = {"spkiHashes": [spki_hash(alice)]}
        await only(spki, alice_client, bob_client, "bob refused: not alice's key")
        hashes = {"certificateHashes": [certificate_hash(bob)]}
        await only(hashes, bob_client, alice_client, "alice refused: not bob's certificate")
