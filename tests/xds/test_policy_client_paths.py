"""A ClientTrafficPolicy's request path normalisation and client address detection in Envoy's
configuration: the connection managers of the governed listeners take them (validated by
Envoy), bad values are refused with their place and the policy unapplied."""

from __future__ import annotations

from typing import Any

from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.original_ip_detection.xff.v3 import xff_pb2

from gateweave.xds import build
from gateweave.xds.listeners import XFF_IP
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import base, only, policy, run
from tests.xds.test_policy_client_traffic import hcm_of, stored

HCM = hcm_pb2.HttpConnectionManager


def managers(spec: dict[str, Any], section: str | None = None) -> dict[str, Any]:
    """The connection managers by listener, with a ClientTrafficPolicy ``c`` of ``spec``
    (accepted) on the Gateway (or its listener ``section``); Envoy validates them."""
    result = run([*base(), policy("c", "ClientTrafficPolicy", section=section, spec=spec)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    ok, message = validate_with_envoy(res)
    assert ok, message
    return {name: hcm_of(listener) for name, listener in sorted(res.listeners.items())}


def paths(hcm: Any) -> tuple[bool, bool, int]:
    return hcm.normalize_path.value, hcm.merge_slashes, hcm.path_with_escaped_slashes_action


def test_path_settings_with_envoy_gateways_defaults() -> None:
    plain = hcm_of(build(run(base()).xds["ns/gw"]).listeners["ns/gw/8080"])
    # without a policy: paths as sent
    assert paths(plain) == (False, False, HCM.KEEP_UNCHANGED)
    # an empty path object: Envoy Gateway's defaults
    got = managers({"path": {}})
    assert {name: paths(hcm) for name, hcm in got.items()} == {
        "ns/gw/8080": (True, True, HCM.UNESCAPE_AND_REDIRECT),
        "ns/gw/8081": (True, True, HCM.UNESCAPE_AND_REDIRECT),
    }
    for action, expected in (
        ("KeepUnchanged", HCM.KEEP_UNCHANGED),
        ("RejectRequest", HCM.REJECT_REQUEST),
        ("UnescapeAndForward", HCM.UNESCAPE_AND_FORWARD),
        ("UnescapeAndRedirect", HCM.UNESCAPE_AND_REDIRECT),
    ):
        spec = {"path": {"escapedSlashesAction": action, "disableMergeSlashes": True}}
        got = managers(spec, section="other")
        assert paths(got["ns/gw/8081"]) == (True, False, expected)
        assert paths(got["ns/gw/8080"]) == paths(plain)  # another listener: untouched


def test_bad_path_values_are_refused_with_their_place() -> None:
    result = stored({"path": {"escapedSlashesAction": "Drop", "disableMergeSlashes": "yes"}})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.path.escapedSlashesAction: 'Drop' is not one of KeepUnchanged, RejectRequest, "
        "UnescapeAndForward, UnescapeAndRedirect; "
        "spec.path.disableMergeSlashes: 'yes' is not true or false"
    )
    assert result.xds == run(base()).xds
    acc = only(stored({"path": "/"}), "c", "ClientTrafficPolicy")["Accepted"]
    assert acc["message"] == "spec.path: '/' is not an object"


def xff_config(hcm: Any) -> xff_pb2.XffConfig:
    (extension,) = hcm.original_ip_detection_extensions
    assert extension.name == XFF_IP
    config = xff_pb2.XffConfig()
    extension.typed_config.Unpack(config)
    return config


def test_trusted_cidrs_detect_the_client_address() -> None:
    cidrs = ["10.1.2.3/8", "2001:db8::/32", "192.168.0.7/32"]
    spec = {"clientIPDetection": {"xForwardedFor": {"trustedCIDRs": cidrs}}}
    for hcm in managers(spec).values():
        # Envoy takes the extension's address only without use_remote_address
        assert not hcm.use_remote_address.value
        assert hcm.xff_num_trusted_hops == 0
        config = xff_config(hcm)
        assert [(c.address_prefix, c.prefix_len.value) for c in config.xff_trusted_cidrs.cidrs] == [
            ("10.0.0.0", 8),
            ("2001:db8::", 32),
            ("192.168.0.7", 32),
        ]
        # the client's address is still appended, as with use_remote_address
        assert config.HasField("skip_xff_append") and not config.skip_xff_append.value


def test_the_peer_appended_to_x_forwarded_for_unless_disabled() -> None:
    for xff in ({"numTrustedHops": 1}, {"trustedCIDRs": ["10.0.0.0/8"]}):
        appended = managers({"clientIPDetection": {"xForwardedFor": xff}})
        kept = managers(
            {"clientIPDetection": {"xForwardedFor": {**xff, "disableXForwardedForAppend": True}}}
        )
        for name, hcm in kept.items():
            assert hcm.skip_xff_append and not appended[name].skip_xff_append
            if "trustedCIDRs" in xff:
                assert xff_config(hcm).skip_xff_append.value
                assert not xff_config(appended[name]).skip_xff_append.value
    acc = only(
        stored({"clientIPDetection": {"xForwardedFor": {"disableXForwardedForAppend": "yes"}}}),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert acc["message"] == (
        "spec.clientIPDetection.xForwardedFor.disableXForwardedForAppend: 'yes' is not true or "
        "false"
    )


def test_direct_source_ip_keeps_the_peers_address() -> None:
    spec: dict[str, Any] = {"clientIPDetection": {"directSourceIP": {}}}
    plain = build(run(base()).xds["ns/gw"]).listeners
    for name, hcm in managers(spec).items():
        assert hcm.use_remote_address.value and not hcm.original_ip_detection_extensions
        assert hcm.xff_num_trusted_hops == 0
        assert hcm == hcm_of(plain[name])


def test_bad_client_ip_detection_values_are_refused_with_their_place() -> None:
    detection: dict[str, Any] = {
        "xForwardedFor": {
            "trustedCIDRs": ["10.0.0.0/8", "10.0.0.1", "nope/8"],
            "numTrustedHops": 1,
        },
        "directSourceIP": {},
    }
    result = stored({"clientIPDetection": detection})
    acc = only(result, "c", "ClientTrafficPolicy")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert acc["message"] == (
        "spec.clientIPDetection.xForwardedFor.trustedCIDRs[1]: '10.0.0.1' is not an address "
        "range (CIDR); "
        "spec.clientIPDetection.xForwardedFor.trustedCIDRs[2]: 'nope/8' is not an address "
        "range (CIDR); "
        "spec.clientIPDetection.xForwardedFor: numTrustedHops and trustedCIDRs are both set "
        "(one only); "
        "spec.clientIPDetection.directSourceIP: set with spec.clientIPDetection.xForwardedFor "
        "(one only)"
    )
    assert result.xds == run(base()).xds
    acc = only(
        stored({"clientIPDetection": {"xForwardedFor": {"trustedCIDRs": []}}}),
        "c",
        "ClientTrafficPolicy",
    )["Accepted"]
    assert acc["message"] == (
        "spec.clientIPDetection.xForwardedFor.trustedCIDRs: [] is not a list of address ranges"
    )
