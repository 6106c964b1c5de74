"""Envoy Gateway policy attachment in translate: targets (targetRefs, sectionName,
targetSelectors), precedence (the more specific scope, then the oldest), status.ancestors with
Envoy Gateway's reasons and messages, refusal of unimplemented fields by name, and order
independence (a policy before or after its target; incremental = full).
"""

from __future__ import annotations

import random
from typing import Any

from gateweave.api import models as m
from gateweave.api.decode import decode
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, core, translate
from gateweave.translate.incremental import IncrementalTranslator

GW = "gateway.networking.k8s.io"
EG = "gateway.envoyproxy.io"
CONTROLLER = TranslateOptions().controller_name


def base() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GW}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "gc"},
            "spec": {"controllerName": CONTROLLER},
        },
        {
            "apiVersion": f"{GW}/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns", "labels": {"tier": "edge"}},
            "spec": {
                "gatewayClassName": "gc",
                "listeners": [
                    {"name": "http", "port": 8080, "protocol": "HTTP"},
                    {"name": "other", "port": 8081, "protocol": "HTTP"},
                ],
            },
        },
        route("r1"),
        route("r2", section="http"),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": "ns"},
            "spec": {"ports": [{"port": 80}]},
        },
    ]


def route(
    name: str, section: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": "gw"}
    if section:
        parent["sectionName"] = section
    return {
        "apiVersion": f"{GW}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
        "spec": {
            "parentRefs": [parent],
            "rules": [{"name": "main", "backendRefs": [{"name": "svc", "port": 80}]}],
        },
    }


def policy(
    name: str,
    kind: str = "BackendTrafficPolicy",
    *,
    target: tuple[str, str] | None = ("Gateway", "gw"),
    section: str | None = None,
    created: str = "",
    spec: dict[str, Any] | None = None,
    selectors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec or {})
    if target is not None:
        ref: dict[str, Any] = {"group": GW, "kind": target[0], "name": target[1]}
        if section:
            ref["sectionName"] = section
        body["targetRefs"] = [ref]
    if selectors is not None:
        body["targetSelectors"] = selectors
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": f"{EG}/v1alpha1", "kind": kind, "metadata": meta, "spec": body}


def models(docs: list[dict[str, Any]]) -> list[Any]:
    out = []
    for raw in docs:
        dec, errors = decode(raw)
        assert dec is not None, errors
        out.append(dec.model)
    return out


def run(docs: list[dict[str, Any]]) -> Result:
    return translate(Snapshot.from_objects(models(docs)), TranslateOptions())


def ancestors(
    result: Result, name: str, kind: str = "BackendTrafficPolicy"
) -> list[dict[str, Any]]:
    status: dict[str, Any] = result.statuses[(kind, "ns", name)]
    entries: list[dict[str, Any]] = status["ancestors"]
    return entries


def conditions(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {cond["type"]: cond for cond in entry["conditions"]}


def only(
    result: Result, name: str, kind: str = "BackendTrafficPolicy"
) -> dict[str, dict[str, Any]]:
    entries = ancestors(result, name, kind)
    assert len(entries) == 1, entries
    assert entries[0]["controllerName"] == CONTROLLER
    return conditions(entries[0])


def test_gateway_target_accepted_with_envoy_gateways_words() -> None:
    result = run([*base(), policy("p")])
    entry = ancestors(result, "p")[0]
    assert entry["ancestorRef"] == {"group": GW, "kind": "Gateway", "namespace": "ns", "name": "gw"}
    acc = conditions(entry)["Accepted"]
    assert (acc["status"], acc["reason"], acc["message"]) == (
        "True",
        "Accepted",
        "Policy has been accepted.",
    )


def test_listener_target_ancestor_names_the_section() -> None:
    result = run([*base(), policy("p", section="http")])
    assert ancestors(result, "p")[0]["ancestorRef"]["sectionName"] == "http"
    missing = run([*base(), policy("p", section="nope")])
    acc = only(missing, "p")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "TargetNotFound")
    assert acc["message"] == "No section name nope found for Gateway ns/gw"


def test_route_target_ancestors_are_the_routes_gateways() -> None:
    result = run([*base(), policy("p", target=("HTTPRoute", "r2"))])
    entry = ancestors(result, "p")[0]
    assert entry["ancestorRef"] == {
        "group": GW,
        "kind": "Gateway",
        "namespace": "ns",
        "name": "gw",
        "sectionName": "http",
    }
    assert conditions(entry)["Accepted"]["status"] == "True"


def test_route_rule_section() -> None:
    assert (
        only(run([*base(), policy("p", target=("HTTPRoute", "r1"), section="main")]), "p")[
            "Accepted"
        ]["status"]
        == "True"
    )
    acc = only(run([*base(), policy("p", target=("HTTPRoute", "r1"), section="x")]), "p")[
        "Accepted"
    ]
    assert (acc["reason"], acc["message"]) == (
        "TargetNotFound",
        "No section name x found for HTTPRoute ns/r1",
    )


def test_missing_target_is_not_applied_and_has_no_ancestor() -> None:
    result = run([*base(), policy("p", target=("Gateway", "absent"))])
    assert ancestors(result, "p") == []


def test_route_level_overrides_gateway_level() -> None:
    result = run([*base(), policy("gwp"), policy("rp", target=("HTTPRoute", "r1"))])
    over = only(result, "gwp")["Overridden"]
    assert (over["status"], over["reason"]) == ("True", "Overridden")
    assert over["message"] == (
        "This policy is being overridden by other backendTrafficPolicies for these routes: [ns/r1]"
    )
    assert "Overridden" not in only(result, "rp")


def test_override_message_groups_listeners_and_routes() -> None:
    docs = [
        *base(),
        policy("gwp"),
        policy("lp", section="http"),
        policy("rp1", target=("HTTPRoute", "r1")),
        policy("rp2", target=("HTTPRoute", "r2")),
    ]
    msg = only(run(docs), "gwp")["Overridden"]["message"]
    assert msg == (
        "This policy is being overridden by other backendTrafficPolicies for "
        "these gateway listeners: [ns/gw/http] and these routes: [ns/r1 ns/r2]"
    )
    # The listener policy: r2 attaches through it, r1 through the whole Gateway (so through it too).
    assert only(run(docs), "lp")["Overridden"]["message"].endswith("these routes: [ns/r1 ns/r2]")


def test_conflict_oldest_wins_then_name() -> None:
    docs = [
        *base(),
        policy("b", created="2026-01-01T00:00:00Z"),
        policy("a", created="2026-02-01T00:00:00Z"),
    ]
    result = run(docs)
    assert only(result, "b")["Accepted"]["status"] == "True"
    acc = only(result, "a")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Conflicted")
    assert (
        acc["message"]
        == "Unable to target Gateway gw, another BackendTrafficPolicy has already attached to it"
    )
    same_age = run([*base(), policy("b"), policy("a")])
    assert only(same_age, "a")["Accepted"]["status"] == "True"
    assert only(same_age, "b")["Accepted"]["reason"] == "Conflicted"


def test_conflict_messages_per_scope() -> None:
    lst = run([*base(), policy("a", section="http"), policy("b", section="http")])
    assert only(lst, "b")["Accepted"]["message"] == (
        "Unable to target Listener ns/gw/http, another BackendTrafficPolicy has already attached "
        "to it"
    )
    rt = run(
        [*base(), policy("a", target=("HTTPRoute", "r1")), policy("b", target=("HTTPRoute", "r1"))]
    )
    assert only(rt, "b")["Accepted"]["message"] == (
        "Unable to target HTTPRoute r1, another BackendTrafficPolicy has already attached to it"
    )
    ctp = run(
        [
            *base(),
            policy("a", "ClientTrafficPolicy", section="http"),
            policy("b", "ClientTrafficPolicy", section="http"),
        ]
    )
    assert only(ctp, "b", "ClientTrafficPolicy")["Accepted"]["message"] == (
        "Unable to target section of gw, another ClientTrafficPolicy has already attached to it"
    )


def test_client_traffic_policy_overridden_by_sections() -> None:
    result = run(
        [
            *base(),
            policy("g", "ClientTrafficPolicy"),
            policy("l", "ClientTrafficPolicy", section="other"),
        ]
    )
    over = only(result, "g", "ClientTrafficPolicy")["Overridden"]
    assert (
        over["message"]
        == "There are existing ClientTrafficPolicies that are overriding these sections [other]"
    )


def test_target_selectors_pick_by_labels() -> None:
    docs = [
        *base(),
        route("r3", labels={"team": "a"}),
        policy(
            "p",
            target=None,
            selectors=[{"group": GW, "kind": "HTTPRoute", "matchLabels": {"team": "a"}}],
        ),
        policy("q", target=None, selectors=[{"kind": "Gateway", "matchLabels": {"tier": "edge"}}]),
        policy(
            "none", target=None, selectors=[{"kind": "Gateway", "matchLabels": {"tier": "core"}}]
        ),
    ]
    result = run(docs)
    assert only(result, "p")["Accepted"]["status"] == "True"
    assert only(result, "q")["Overridden"]["message"].endswith("these routes: [ns/r3]")
    assert ancestors(result, "none") == []


def test_unimplemented_fields_refused_by_name() -> None:
    spec = {"useClientProtocol": True, "faultInjection": {"abort": {"httpStatus": 503}}}
    acc = only(run([*base(), policy("p", spec=spec)]), "p")["Accepted"]
    assert (acc["status"], acc["reason"]) == ("False", "Invalid")
    assert (
        acc["message"]
        == "spec.useClientProtocol, spec.faultInjection are not supported by gateweave"
    )
    sec = only(
        run(
            [
                *base(),
                policy(
                    "s",
                    "SecurityPolicy",
                    spec={
                        "oidc": {
                            "clientID": "c",
                            "clientSecret": {"name": "s"},
                            "provider": {"issuer": "https://id.example"},
                        }
                    },
                ),
            ]
        ),
        "s",
        "SecurityPolicy",
    )["Accepted"]
    assert sec["message"] == "spec.oidc is not supported by gateweave"


def test_refused_policy_still_holds_its_scope() -> None:
    result = run([*base(), policy("a", spec={"useClientProtocol": True}), policy("b")])
    assert only(result, "a")["Accepted"]["reason"] == "Invalid"
    assert only(result, "b")["Accepted"]["reason"] == "Conflicted"


def test_no_policies_no_change() -> None:
    plain = run(base())
    assert not any(
        key[0].endswith("Policy") and key[0] != "BackendTLSPolicy" for key in plain.statuses
    )


def _system() -> list[dict[str, Any]]:
    return [
        *base(),
        route("r3", section="other", labels={"team": "a"}),
        policy("gwp", created="2026-01-01T00:00:00Z"),
        policy("late", created="2026-03-01T00:00:00Z"),
        policy("lp", section="http"),
        policy("rp", target=("HTTPRoute", "r1")),
        policy("rule", target=("HTTPRoute", "r2"), section="main"),
        policy("sel", target=None, selectors=[{"kind": "HTTPRoute", "matchLabels": {"team": "a"}}]),
        policy("refused", target=("HTTPRoute", "r2"), spec={"useClientProtocol": True}),
        policy(
            "c1",
            "ClientTrafficPolicy",
            spec={"clientIPDetection": {"xForwardedFor": {"numTrustedHops": 1}}},
        ),
        policy("c2", "ClientTrafficPolicy", section="other"),
        policy("s1", "SecurityPolicy", target=("HTTPRoute", "r3")),
    ]


def test_order_independence_and_incremental_equals_full() -> None:
    """Any order of arrival (a policy before its target, targets appearing later) ends in the
    same result, and the incremental translator matches a full translation at every step."""
    objs = models(_system())
    want = translate(Snapshot.from_objects(objs), TranslateOptions())
    rng = random.Random(15)
    for _ in range(8):
        order = list(objs)
        rng.shuffle(order)
        inc = IncrementalTranslator(check=True)
        for i in range(1, len(order) + 1):
            got = inc(Snapshot.from_objects(order[:i]))
        assert got == want
        # and the policies taken away again (one by one) leave what a system without them gives
        rest = list(order)
        for obj in order:
            if obj.kind.endswith("Policy"):
                rest.remove(obj)
                got = inc(Snapshot.from_objects(rest))
        assert got == translate(
            Snapshot.from_objects([o for o in objs if not o.kind.endswith("Policy")]),
            TranslateOptions(),
        )


def test_the_governing_policy_per_route_and_listener() -> None:
    """The hook the features read: the most specific scope held, a refused holder governs with
    nothing.
    """
    _, ctx, gateways = core.run_pipeline(
        Snapshot.from_objects(models(_system())), TranslateOptions()
    )
    index = ctx.policies
    lcs = {lc.name: lc for lc in gateways[0].all_listeners()}
    routes = {r.metadata.name: r for r in ctx.snapshot.http_routes.values()}

    def governing(name: str, rule: str | None, listener: str) -> str | None:
        hit = index.for_route(
            "BackendTrafficPolicy", "HTTPRoute", routes[name], rule, lcs[listener]
        )
        return None if hit is None else hit[1].policy.metadata.name

    assert governing("r1", "main", "http") == "rp"  # the route's own policy
    assert governing("r2", "main", "http") == "rule"  # the rule's, over the route's (refused) one
    assert governing("r2", None, "http") is None  # the route scope is held by a refused policy
    assert governing("r3", "main", "other") == "sel"  # chosen by its labels
    hit = index.for_listener("ClientTrafficPolicy", lcs["other"])
    assert hit is not None and hit[1].policy.metadata.name == "c2"
    hit = index.for_listener("ClientTrafficPolicy", lcs["http"])
    assert hit is not None and hit[1].policy.metadata.name == "c1"
    assert index.for_listener("SecurityPolicy", lcs["http"]) is None


def test_rate_limit_values_envoy_cannot_take_are_refused() -> None:
    """The CRD bounds them, but a stored object is not validated again: translate refuses them
    itself.
    """
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "rateLimit": {
            "type": "Local",
            "local": {
                "rules": [
                    {"limit": {"requests": 0, "unit": "Minute"}},
                    {"limit": {"requests": 1, "unit": "Fortnight"}},
                ]
            },
        },
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    acc = only(result, "p")["Accepted"]
    assert acc["reason"] == "Invalid"
    assert (
        "spec.rateLimit.local.rules: at most one rule may be without clientSelectors"
        in acc["message"]
    )
    assert "rules[0].limit.requests 0 is out of range" in acc["message"]
    assert "rules[1].limit.unit Fortnight is not a unit" in acc["message"]
    assert result.xds == run(base()).xds


def _secret(name: str, namespace: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {".htpasswd": text},
    }


def test_security_policy_secrets_and_values_are_checked_with_their_place() -> None:
    """What Envoy could not take, or Envoy Gateway would not read, makes the policy Invalid,
    located.
    """
    good = "alice:{SHA}" + "A" * 27 + "=\n"

    def message(spec: dict[str, Any], *extra: dict[str, Any]) -> str:
        acc = only(
            run([*base(), *extra, policy("s", "SecurityPolicy", spec=spec)]), "s", "SecurityPolicy"
        )["Accepted"]
        return str(acc["message"]) if acc["status"] == "False" else ""

    basic = {"basicAuth": {"users": {"name": "u"}}}
    assert message(basic, _secret("u", "ns", good)) == ""
    assert message(basic) == "spec.basicAuth.users: Secret ns/u does not exist"
    assert message(basic, _secret("u", "ns", "alice:$apr1$x$y\n")) == (
        "spec.basicAuth.users: Secret ns/u key .htpasswd: line 1 (user alice): only {SHA} hashes "
        "are supported"
    )
    assert message(basic, _secret("u", "ns", good + "\n" + good)).endswith(
        "line 3: user alice appears twice"
    )
    other = {"basicAuth": {"users": {"name": "u", "namespace": "sec"}}}
    assert message(other, _secret("u", "sec", good)) == (
        "spec.basicAuth.users: Secret sec/u is in another namespace and no ReferenceGrant allows it"
    )
    grant = {
        "apiVersion": f"{GW}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": "sec"},
        "spec": {
            "from": [{"group": EG, "kind": "SecurityPolicy", "namespace": "ns"}],
            "to": [{"group": "", "kind": "Secret"}],
        },
    }
    assert message(other, _secret("u", "sec", good), grant) == ""
    authz = {
        "authorization": {
            "rules": [{"action": "Deny", "principal": {"clientCIDRs": ["10.0.0.0/33"]}}]
        }
    }
    assert (
        message(authz)
        == "spec.authorization.rules[0].principal.clientCIDRs[0] 10.0.0.0/33 is not a CIDR"
    )
    assert message({"cors": {"allowOrigins": ["https://*.a.example"], "maxAge": "1h"}}) == ""
    keys = {
        "apiKeyAuth": {
            "credentialRefs": [{"name": "k"}, {"name": "k2"}],
            "extractFrom": [{"headers": ["x-key"]}],
        }
    }
    key_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "k", "namespace": "ns"},
        "stringData": {"c1": "one"},
    }
    same_key = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "k2", "namespace": "ns"},
        "stringData": {"c2": "one"},
    }
    assert (
        message(keys, key_secret)
        == "spec.apiKeyAuth.credentialRefs[1]: Secret ns/k2 does not exist"
    )
    assert message(keys, key_secret, same_key) == (
        "spec.apiKeyAuth.credentialRefs[1]: Secret ns/k2 key c2: the same API key as client c1"
    )
    # A client ID an earlier Secret gave is ignored there, with its key (Envoy Gateway's rule).
    same_client = {**same_key, "stringData": {"c1": "one", "c2": "two"}}
    assert message(keys, key_secret, same_client) == ""
    by_ref = {"type": "ValueRef", "valueRef": {"group": "", "kind": "ConfigMap", "name": "j"}}
    jwt = {
        "jwt": {
            "providers": [
                {"name": "a", "localJWKS": by_ref},
                {"name": "b", "localJWKS": {"inline": "{}"}},
            ]
        }
    }
    ext = {"extAuth": {"http": {"backendRef": {"name": "nowhere", "port": 80}}}}
    assert message(ext) == "spec.extAuth.http.backendRef: Service ns/nowhere not found"
    assert message(jwt) == (
        "spec.jwt.providers[0].localJWKS.valueRef: ConfigMap ns/j does not exist; "
        "spec.jwt.providers[1].localJWKS: not a JSON Web Key Set (Object missing required field "
        "`keys`)"
    )


def test_client_selector_values_envoy_cannot_take_are_refused() -> None:
    """Bad selectors in a stored object (not validated again): a bad regex, a range that is not
    one, an inverted range, a Distinct header with a value, two ranges in a rule, none at all."""
    selectors = [
        {"headers": [{"name": "x", "type": "RegularExpression", "value": "(a"}]},
        {"sourceCIDR": {"value": "10.0.0.0/33", "type": "Exact"}},
        {"sourceCIDR": {"value": "10.0.0.0/8", "invert": True}},
        {"headers": [{"name": "y", "type": "Distinct", "value": "v"}]},
        {},
    ]
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "rateLimit": {
            "type": "Local",
            "local": {
                "rules": [{"clientSelectors": selectors, "limit": {"requests": 1, "unit": "Week"}}]
            },
        },
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    acc = only(result, "p")["Accepted"]
    assert acc["reason"] == "Invalid"
    at = "spec.rateLimit.local.rules[0].clientSelectors"
    for part in (
        f"{at}[0].headers[0].value '(a' is not a valid regular expression",
        f"{at}[1].sourceCIDR.value '10.0.0.0/33' is not an IP range (CIDR)",
        f"{at}[2].sourceCIDR.invert true is not supported by gateweave",
        f"{at}[3].headers[0]: a Distinct match takes neither value nor invert",
        f"{at}[4]: a selector needs headers, methods, path, sourceCIDR or queryParams",
        f"{at}: gateweave supports one sourceCIDR per rule",
    ):
        assert part in acc["message"]
    assert "Week" not in acc["message"]  # a unit of the CRD
    assert result.xds == run(base()).xds


def test_client_selectors_are_implemented_and_other_selectors_refused_by_name() -> None:
    selector: dict[str, Any] = {
        "headers": [{"name": "x", "type": "Distinct"}],
        "sourceCIDR": {"value": "10.0.0.0/8", "type": "Distinct"},
    }
    rules: list[dict[str, Any]] = [
        {"clientSelectors": [selector], "limit": {"requests": 1, "unit": "Second"}}
    ]
    ok = run(
        [*base(), policy("p", spec={"rateLimit": {"type": "Local", "local": {"rules": rules}}})]
    )
    assert only(ok, "p")["Accepted"]["reason"] == "Accepted"
    rules[0]["shared"] = True
    refused = run(
        [*base(), policy("p", spec={"rateLimit": {"type": "Local", "local": {"rules": rules}}})]
    )
    acc = only(refused, "p")["Accepted"]
    assert acc["message"] == "spec.rateLimit.local.rules[0].shared is not supported by gateweave"


def test_rate_limit_type_may_be_left_out() -> None:
    """Envoy Gateway v1.9 deprecates ``rateLimit.type`` (its published examples leave it out):
    ``local`` alone is a Local rate limit; without ``local``, or with ``type: Global``, it is
    refused."""
    local = {"rules": [{"limit": {"requests": 3, "unit": "Hour"}}]}
    ok = run([*base(), policy("p", spec={"rateLimit": {"local": local}})])
    assert only(ok, "p")["Accepted"]["reason"] == "Accepted"
    assert (
        ok.xds
        == run([*base(), policy("p", spec={"rateLimit": {"type": "Local", "local": local}})]).xds
    )
    for rate_limit, shown in (({"type": "Global", "local": local}, "Global"), ({}, "(unset)")):
        acc = only(run([*base(), policy("p", spec={"rateLimit": rate_limit})]), "p")["Accepted"]
        assert acc["message"] == (
            f"spec.rateLimit.type {shown}: only Local rate limits are supported by gateweave"
        )


def test_selector_rule_unit_must_be_a_multiple_of_the_route_rules() -> None:
    """Envoy refuses a descriptor refilled more often than the route's own bucket (a NACK)."""
    rules = [
        {"limit": {"requests": 5, "unit": "Minute"}},
        {
            "clientSelectors": [{"sourceCIDR": {"value": "10.0.0.0/8"}}],
            "limit": {"requests": 1, "unit": "Second"},
        },
        {
            "clientSelectors": [{"sourceCIDR": {"value": "10.0.0.0/8"}}],
            "limit": {"requests": 1, "unit": "Hour"},
        },
    ]
    result = run(
        [*base(), policy("p", spec={"rateLimit": {"type": "Local", "local": {"rules": rules}}})]
    )
    acc = only(result, "p")["Accepted"]
    assert acc["message"] == (
        "spec.rateLimit.local.rules[1].limit.unit Second must be a multiple of the unit of the"
        " rule without clientSelectors"
    )
