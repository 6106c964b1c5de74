"""A ClientTrafficPolicy's key exchange groups, signature algorithms, session resumption and
client certificate validation on the filter chains terminating TLS: in Envoy's configuration
(validated by Envoy), bad values and unreadable CA certificates refused with their place."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.extensions.transport_sockets.tls.v3 import common_pb2

from gateweave.translate.policies import clienttls
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from gateweave_conformance.tlsgen import TLSSpec, generate
from tests.support.clientcerts import certificate_hash, client_cert, revocation_list, spki_hash
from tests.translate.test_policies import base, only, policy, run
from tests.xds.test_policy_client_traffic import downstream_tls, stored, with_https

Validation = common_pb2.CertificateValidationContext


def chain(docs: list[dict[str, Any]], spec: dict[str, Any]) -> Any:
    """The HTTPS listener's DownstreamTlsContext with a ClientTrafficPolicy ``c`` of ``spec``
    (accepted) on the Gateway; Envoy validates the configuration."""
    result = run([*docs, policy("c", "ClientTrafficPolicy", spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    ok, message = validate_with_envoy(res)
    assert ok, message
    return downstream_tls(res.listeners["ns/gw/8443"])


def test_ecdh_curves_and_signature_algorithms_each_known_to_envoy() -> None:
    # every name gateweave takes is one Envoy takes (Envoy refuses a listener with another)
    spec = {
        "tls": {
            "ecdhCurves": list(clienttls.CURVES),
            "signatureAlgorithms": list(clienttls.SIGNATURE_ALGORITHMS),
        }
    }
    params = chain(with_https(), spec).common_tls_context.tls_params
    assert list(params.ecdh_curves) == list(clienttls.CURVES)
    assert list(params.signature_algorithms) == list(clienttls.SIGNATURE_ALGORITHMS)


@pytest.mark.parametrize(
    ("resumption", "stateless_off", "stateful_off"),
    [
        ({"stateless": {}}, False, True),
        ({"stateful": {}}, True, False),
        ({"stateless": {}, "stateful": {}}, False, False),
        ({}, True, True),
    ],
)
def test_session_resumption_as_envoy_gateway(
    resumption: dict[str, Any], stateless_off: bool, stateful_off: bool
) -> None:
    context = chain(with_https(), {"tls": {"session": {"resumption": resumption}}})
    assert context.disable_stateless_session_resumption == stateless_off
    assert context.disable_stateful_session_resumption == stateful_off


def test_without_session_envoys_resumption() -> None:
    context = chain(with_https(), {"tls": {"minVersion": "1.2"}})
    assert not context.disable_stateless_session_resumption
    assert not context.disable_stateful_session_resumption


def test_bad_tls_group_and_session_values_are_refused_with_their_place() -> None:
    result = stored(
        {
            "tls": {
                "ecdhCurves": ["X25519", "P-999"],
                "signatureAlgorithms": "ed25519",
                "session": {"resumption": {"stateless": True}},
            }
        }
    )
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.tls.ecdhCurves[1]: 'P-999' is not one of X25519, P-256, P-384, P-521, "
        "X25519MLKEM768; "
        "spec.tls.signatureAlgorithms: 'ed25519' is not a list of strings; "
        "spec.tls.session.resumption.stateless: True is not {}"
    )
    assert result.xds == run(base()).xds


CA = TLSSpec("ConfigMap", "ns", "client-ca")
OTHER_CA = TLSSpec("ConfigMap", "certs", "client-ca")


def ca_manifest(spec: TLSSpec, kind: str = "ConfigMap") -> dict[str, Any]:
    manifest = generate([spec]).get("ConfigMap", spec.ref).manifest()
    if kind == "Secret":
        pem = manifest["data"]["ca.crt"]
        manifest = {**manifest, "kind": "Secret", "data": {}, "stringData": {"ca.crt": pem}}
    return manifest


def validation_of(context: Any) -> tuple[str, int, bool]:
    """(trusted CA PEM, trust chain verification, client certificate required)."""
    validation = context.common_tls_context.validation_context
    return (
        validation.trusted_ca.inline_string,
        validation.trust_chain_verification,
        context.require_client_certificate.value,
    )


@pytest.mark.parametrize(
    ("settings", "verification", "required"),
    [
        ({}, Validation.VERIFY_TRUST_CHAIN, True),
        ({"mode": "RequireAndVerify"}, Validation.VERIFY_TRUST_CHAIN, True),
        ({"optional": True}, Validation.VERIFY_TRUST_CHAIN, False),
        ({"mode": "VerifyIfGiven"}, Validation.VERIFY_TRUST_CHAIN, False),
        ({"mode": "RequireAny"}, Validation.ACCEPT_UNTRUSTED, True),
        ({"mode": "Request"}, Validation.ACCEPT_UNTRUSTED, False),
    ],
)
def test_client_validation_modes(
    settings: dict[str, Any], verification: int, required: bool
) -> None:
    ca = ca_manifest(CA)
    refs = [{"kind": "ConfigMap", "name": "client-ca"}]
    spec = {"tls": {"clientValidation": {"caCertificateRefs": refs, **settings}}}
    context = chain([*with_https(), ca], spec)
    assert validation_of(context) == (ca["data"]["ca.crt"], verification, required)


def test_client_validation_from_a_secret_and_another_namespace_with_a_reference_grant() -> None:
    secret, other = ca_manifest(CA, "Secret"), ca_manifest(OTHER_CA)
    refs = [{"name": "client-ca"}, {"kind": "ConfigMap", "name": "client-ca", "namespace": "certs"}]
    spec = {"tls": {"clientValidation": {"caCertificateRefs": refs}}}
    docs = [*with_https(), secret, other]
    result = run([*docs, policy("c", "ClientTrafficPolicy", spec=spec)])
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.tls.clientValidation.caCertificateRefs[1]: ConfigMap certs/client-ca is in another "
        "namespace and no ReferenceGrant allows it"
    )
    grant = {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "ctp", "namespace": "certs"},
        "spec": {
            "from": [
                {
                    "group": "gateway.envoyproxy.io",
                    "kind": "ClientTrafficPolicy",
                    "namespace": "ns",
                }
            ],
            "to": [{"group": "", "kind": "ConfigMap"}],
        },
    }
    context = chain([*docs, grant], spec)
    both = secret["stringData"]["ca.crt"] + other["data"]["ca.crt"]
    assert validation_of(context) == (both, Validation.VERIFY_TRUST_CHAIN, True)


def test_bad_client_validation_is_refused_with_its_place() -> None:
    refs = [
        {"kind": "ConfigMap", "name": "missing"},
        {"kind": "Service", "name": "client-ca"},
        {"kind": "ConfigMap", "name": "empty"},
    ]
    empty = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "empty", "namespace": "ns"},
        "data": {"ca.crt": "not a certificate"},
    }
    spec = {"tls": {"clientValidation": {"caCertificateRefs": refs}}}
    result = run([*with_https(), empty, policy("c", "ClientTrafficPolicy", spec=spec)])
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    at = "spec.tls.clientValidation"
    assert acc["message"] == (
        f"{at}.caCertificateRefs[0]: ConfigMap ns/missing does not exist; "
        f"{at}.caCertificateRefs[1]: core/Service is not a ConfigMap or Secret; "
        f"{at}.caCertificateRefs[2]: ConfigMap ns/empty has no valid PEM certificates under "
        "ca.crt"
    )
    assert result.xds == run([*with_https(), empty]).xds
    # a stored object the CRD did not check
    acc = only(
        stored({"tls": {"clientValidation": {"mode": "Sometimes", "optional": "no"}}}),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert acc["message"] == (
        f"{at}.optional: 'no' is not true or false; "
        f"{at}.mode: 'Sometimes' is not one of RequireAndVerify, VerifyIfGiven, RequireAny, "
        f"Request; {at}.caCertificateRefs: gateweave needs the CA certificates"
    )
    acc = only(
        run(
            [
                *with_https(),
                policy("c", "ClientTrafficPolicy", spec={"tls": {"clientValidation": {}}}),
            ]
        ),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert acc["message"] == f"{at}.caCertificateRefs: gateweave needs the CA certificates"
    acc = only(
        run(
            [
                *with_https(),
                policy(
                    "c",
                    "ClientTrafficPolicy",
                    spec={"tls": {"clientValidation": {"crl": {"refs": [{"name": "x"}]}}}},
                ),
            ]
        ),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert acc["message"] == (
        f"{at}.caCertificateRefs: gateweave needs the CA certificates; "
        f"{at}.crl.refs[0]: Secret ns/x does not exist"
    )


def crl_manifest(pem: str, kind: str = "ConfigMap") -> dict[str, Any]:
    meta = {"name": "client-crl", "namespace": "ns"}
    if kind == "Secret":
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta,
            "stringData": {"ca.crl": pem},
        }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"ca.crl": pem}}


def test_client_certificate_hashes_names_revocation_and_expiry() -> None:
    material = generate([CA])
    ca_issued = material.get("ConfigMap", CA.ref)
    leaf = client_cert(ca_issued, "alice", ["alice.example"])
    crl = revocation_list(ca_issued, [leaf])
    refs = [{"kind": "ConfigMap", "name": "client-ca"}]
    ca = ca_issued.manifest()
    sans = {
        "dnsNames": [{"value": "alice.example"}, {"type": "Suffix", "value": ".example"}],
        "emailAddresses": [{"type": "Prefix", "value": "alice@"}],
        "ipAddresses": [{"type": "RegularExpression", "value": "10\\.0\\..*"}],
        "uris": [{"value": "spiffe://example/alice"}],
        "otherNames": [{"oid": "1.3.6.1.4.1.311.20.2.3", "value": "alice@corp"}],
    }
    upper = ":".join(
        certificate_hash(leaf)[i : i + 2] for i in range(0, 64, 2)
    ).upper()  # Envoy's colon-separated form too
    for kind in ("ConfigMap", "Secret"):
        spec = {
            "tls": {
                "clientValidation": {
                    "caCertificateRefs": refs,
                    "spkiHashes": [spki_hash(leaf)],
                    "certificateHashes": [certificate_hash(leaf), upper],
                    "subjectAltNames": sans,
                    "crl": {
                        "refs": [{"kind": kind, "name": "client-crl"}],
                        "onlyVerifyLeafCertificate": True,
                    },
                    "allowExpiredCertificate": True,
                }
            }
        }
        context = chain([*with_https(), ca, crl_manifest(crl, kind)], spec)
        checks = context.common_tls_context.validation_context
        assert list(checks.verify_certificate_spki) == [spki_hash(leaf)]
        assert list(checks.verify_certificate_hash) == [certificate_hash(leaf), upper]
        assert checks.crl.inline_string == crl and checks.only_verify_leaf_cert_crl
        assert checks.allow_expired_certificate
        got = [
            (
                common_pb2.SubjectAltNameMatcher.SanType.Name(m.san_type),
                m.matcher.WhichOneof("match_pattern"),
                m.oid,
            )
            for m in checks.match_typed_subject_alt_names
        ]
        assert got == [
            ("DNS", "exact", ""),
            ("DNS", "suffix", ""),
            ("EMAIL", "prefix", ""),
            ("IP_ADDRESS", "safe_regex", ""),
            ("URI", "exact", ""),
            ("OTHER_NAME", "exact", "1.3.6.1.4.1.311.20.2.3"),
        ]
    # without them: none of these checks
    plain = chain([*with_https(), ca], {"tls": {"clientValidation": {"caCertificateRefs": refs}}})
    checks = plain.common_tls_context.validation_context
    assert not checks.verify_certificate_spki and not checks.verify_certificate_hash
    assert not checks.match_typed_subject_alt_names and not checks.HasField("crl")
    assert not checks.allow_expired_certificate


def test_bad_client_certificate_checks_are_refused_with_their_place() -> None:
    ca = generate([CA]).get("ConfigMap", CA.ref).manifest()
    refs = [{"kind": "ConfigMap", "name": "client-ca"}]
    spec = {
        "tls": {
            "clientValidation": {
                "caCertificateRefs": refs,
                "mode": "RequireAny",
                "spkiHashes": ["abc"],
                "certificateHashes": ["zz"],
                "subjectAltNames": {
                    "dnsNames": [{"type": "RegularExpression", "value": "(a"}],
                    "otherNames": [{"oid": "upn", "value": "x"}],
                },
                "crl": {"refs": [{"kind": "ConfigMap", "name": "client-crl"}]},
            }
        }
    }
    docs = [*with_https(), ca, crl_manifest("not a revocation list")]
    result = run([*docs, policy("c", "ClientTrafficPolicy", spec=spec)])
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    at = "spec.tls.clientValidation"
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        f"{at}.spkiHashes[0]: 'abc' is not a base64 SHA-256 hash; "
        f"{at}.certificateHashes[0]: 'zz' is not a hex SHA-256 hash; "
        f"{at}.subjectAltNames.dnsNames[0].value '(a': missing ): (a; "
        f"{at}.subjectAltNames.otherNames[0].oid: 'upn' is not an object identifier; "
        f"{at}.crl.refs[0]: ConfigMap ns/client-crl has no valid PEM revocation list under "
        "ca.crl"
    )
    assert result.xds == run(docs).xds
    # as the CRD's rule, for a stored object it did not check
    expired = {"caCertificateRefs": refs, "mode": "Request", "allowExpiredCertificate": True}
    acc = only(stored({"tls": {"clientValidation": expired}}), "c", "ClientTrafficPolicy")[
        "Accepted"
    ]
    assert acc["message"].endswith(
        f"{at}.allowExpiredCertificate: only with mode VerifyIfGiven or RequireAndVerify"
    )
