"""An upstream-format ConformanceReport (gateway.networking.k8s.io/v1) from case results.

As upstream (conformance/utils/suite reports.go, profiles.go): a case counts under a
profile when every one of its features is a core or extended feature of that profile;
under the profile it is *extended* when any of its features is not core there. A
profile's result is ``failure`` with a failed test, else ``partial`` with a skipped one,
else ``success``. Extended ``supportedFeatures`` / ``unsupportedFeatures`` list the
profile's extended features that are claimed / not claimed.

The feature sets are upstream's for release line v1.6 (pkg/features), written down here.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

GATEWAY_API_VERSION = "v1.6.0"

GATEWAY_EXTENDED = frozenset(
    {
        "GatewayPort8080",
        "GatewayStaticAddresses",
        "GatewayHTTPListenerIsolation",
        "GatewayHTTPSListenerDetectMisdirectedRequests",
        "GatewayInfrastructurePropagation",
        "GatewayAddressEmpty",
        "GatewayListenerSet",
        "ListenerSet",
        "GatewayBackendClientCertificate",
        "GatewayFrontendClientCertificateValidation",
        "GatewayFrontendClientCertificateValidationInsecureFallback",
    }
)
HTTPROUTE_EXTENDED = frozenset(
    {
        "HTTPRouteBackendRequestHeaderModification",
        "HTTPRouteQueryParamMatching",
        "HTTPRouteMethodMatching",
        "HTTPRouteResponseHeaderModification",
        "HTTPRoutePortRedirect",
        "HTTPRouteSchemeRedirect",
        "HTTPRoutePathRedirect",
        "HTTPRouteHostRewrite",
        "HTTPRoutePathRewrite",
        "HTTPRouteRequestMirror",
        "HTTPRouteRequestMultipleMirrors",
        "HTTPRouteRequestPercentageMirror",
        "HTTPRouteRequestTimeout",
        "HTTPRouteBackendTimeout",
        "HTTPRouteParentRefPort",
        "HTTPRouteBackendProtocolH2C",
        "HTTPRouteBackendProtocolWebSocket",
        "HTTPRouteDestinationPortMatching",
        "HTTPRouteNamedRouteRule",
        "HTTPRoute303RedirectStatusCode",
        "HTTPRoute307RedirectStatusCode",
        "HTTPRoute308RedirectStatusCode",
        "HTTPRouteCORS",
        "HTTPRouteRetry",
        "HTTPRouteRetryBackendTimeout",
        "HTTPRouteRetryConnectionError",
        "HTTPRouteBackendRequestRedirect",
        "HTTPRouteBackendURLRewrite",
    }
)
BACKEND_TLS = frozenset({"BackendTLSPolicy", "BackendTLSPolicySANValidation"})
GRPCROUTE_EXTENDED = frozenset({"GRPCRouteNamedRouteRule", "GRPCRouteRequestHeaderModifier"})
TLSROUTE_EXTENDED = frozenset({"TLSRouteModeTerminate", "TLSRouteModeMixed"})


@dataclass(frozen=True)
class Profile:
    name: str
    core: frozenset[str]
    extended: frozenset[str]

    def covers(self, features: Iterable[str]) -> bool:
        return all(f in self.core or f in self.extended for f in features)

    def is_extended(self, features: Iterable[str]) -> bool:
        return any(f not in self.core for f in features)


PROFILES: tuple[Profile, ...] = (
    Profile(
        "GATEWAY-HTTP",
        frozenset({"Gateway", "ReferenceGrant", "HTTPRoute"}),
        GATEWAY_EXTENDED | HTTPROUTE_EXTENDED | BACKEND_TLS,
    ),
    Profile(
        "GATEWAY-GRPC",
        frozenset({"Gateway", "ReferenceGrant", "GRPCRoute"}),
        GATEWAY_EXTENDED | GRPCROUTE_EXTENDED | BACKEND_TLS,
    ),
    Profile(
        "GATEWAY-TLS",
        frozenset({"Gateway", "ReferenceGrant", "TLSRoute"}),
        GATEWAY_EXTENDED | TLSROUTE_EXTENDED,
    ),
    Profile("GATEWAY-TCP", frozenset({"Gateway", "ReferenceGrant", "TCPRoute"}), GATEWAY_EXTENDED),
    Profile("GATEWAY-UDP", frozenset({"Gateway", "ReferenceGrant", "UDPRoute"}), GATEWAY_EXTENDED),
)


@dataclass(frozen=True)
class Outcome:
    name: str
    features: tuple[str, ...]
    outcome: str  # PASS | FAIL | SKIP


def _result(stats: dict[str, int]) -> str:
    if stats["Failed"]:
        return "failure"
    if stats["Skipped"]:
        return "partial"
    return "success"


def _status(stats: dict[str, int], failed: list[str], skipped: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"result": _result(stats), "statistics": dict(stats)}
    if failed:
        out["failedTests"] = sorted(failed)
    if skipped:
        out["skippedTests"] = sorted(skipped)
    return out


def profile_report(
    profile: Profile, outcomes: Sequence[Outcome], claimed: frozenset[str]
) -> dict[str, Any]:
    stats = {
        "core": {"Passed": 0, "Failed": 0, "Skipped": 0},
        "extended": {"Passed": 0, "Failed": 0, "Skipped": 0},
    }
    failed: dict[str, list[str]] = {"core": [], "extended": []}
    skipped: dict[str, list[str]] = {"core": [], "extended": []}
    key = {"PASS": "Passed", "FAIL": "Failed", "SKIP": "Skipped"}
    for o in outcomes:
        if not profile.covers(o.features):
            continue
        level = "extended" if profile.is_extended(o.features) else "core"
        stats[level][key[o.outcome]] += 1
        if o.outcome == "FAIL":
            failed[level].append(o.name)
        elif o.outcome == "SKIP":
            skipped[level].append(o.name)
    extended = _status(stats["extended"], failed["extended"], skipped["extended"])
    extended["supportedFeatures"] = sorted(profile.extended & claimed)
    extended["unsupportedFeatures"] = sorted(profile.extended - claimed)
    core = _status(stats["core"], failed["core"], skipped["core"])
    summary = f"Core tests {_summary(core)}. Extended tests {_summary(extended)}."
    return {"name": profile.name, "core": core, "extended": extended, "summary": summary}


def _summary(status: dict[str, Any]) -> str:
    stats = status["statistics"]
    if status["result"] == "failure":
        return f"failed with {stats['Failed']} test failures"
    if status["result"] == "partial":
        return f"partially succeeded with {stats['Skipped']} test skips"
    return "succeeded"


def build_report(
    outcomes: Sequence[Outcome],
    claimed: Iterable[str],
    *,
    version: str,
    channel: str = "experimental",
    date: datetime.datetime | None = None,
    provisional: Iterable[str] = (),
) -> dict[str, Any]:
    provisional_set = set(provisional)
    claimed_set = frozenset(claimed)
    when = (date or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "ConformanceReport",
        "date": when,
        "gatewayAPIChannel": channel,
        "gatewayAPIVersion": GATEWAY_API_VERSION,
        "implementation": {
            "organization": "gateweave",
            "project": "gateweave",
            "url": "https://github.com/gateweave/gateweave",
            "version": version,
            "contact": ["@gateweave/maintainers"],
        },
        "mode": "default",
        "profiles": [profile_report(p, outcomes, claimed_set) for p in PROFILES],
        "succeededProvisionalTests": sorted(
            o.name for o in outcomes if o.outcome == "PASS" and o.name in provisional_set
        ),
    }


def dump(report: dict[str, Any]) -> str:
    return yaml.safe_dump(report, sort_keys=False)
