"""``tcpKeepalive`` in Envoy's configuration, as Envoy Gateway writes it: a BackendTrafficPolicy's
(and an auth service's ``backendSettings``) on the copy of the governed routes' clusters
(``upstream_connection_options.tcp_keepalive``), a ClientTrafficPolicy's as socket options of
the governed listeners (SO_KEEPALIVE, then TCP_KEEPCNT / TCP_KEEPIDLE / TCP_KEEPINTVL before
bind); Envoy itself accepts both. Values the kernel would refuse are problems with their place,
the policy unapplied."""

from __future__ import annotations

from typing import Any

import pytest

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run
from tests.xds.test_policy_clusters import PLAIN, targets
from tests.xds.test_policy_security_backend_settings import AUTH_SVC

KEEPALIVE = {"tcpKeepalive": {"probes": 3, "idleTime": "20m", "interval": "60s"}}


def test_backend_keepalive_on_the_governed_routes_cluster_copy_validated_by_envoy() -> None:
    res = build(run([*base(), policy("p", section="http", spec=KEEPALIVE)]).xds["ns/gw"])
    (copy,) = set(targets(res, 8080).values())
    assert copy.startswith(PLAIN + "/policy-")
    keepalive = res.clusters[copy].upstream_connection_options.tcp_keepalive
    assert (
        keepalive.keepalive_probes.value,
        keepalive.keepalive_time.value,
        keepalive.keepalive_interval.value,
    ) == (3, 1200, 60)
    assert not res.clusters[PLAIN].HasField("upstream_connection_options")
    ok, message = validate_with_envoy(res)
    assert ok, message


def test_backend_keepalive_unset_values_left_to_the_system() -> None:
    res = build(
        run([*base(), policy("p", spec={"tcpKeepalive": {"idleTime": "90s"}})]).xds["ns/gw"]
    )
    (copy,) = set(targets(res, 8080).values())
    keepalive = res.clusters[copy].upstream_connection_options.tcp_keepalive
    assert keepalive.keepalive_time.value == 90
    assert not keepalive.HasField("keepalive_probes")
    assert not keepalive.HasField("keepalive_interval")


def test_auth_service_backend_settings_keepalive() -> None:
    spec = {
        "extAuth": {
            "http": {"backendRefs": [{"name": "auth", "port": 9001}], "backendSettings": KEEPALIVE}
        }
    }
    result = run([*base(), AUTH_SVC, policy("p", "SecurityPolicy", spec=spec)])
    assert only(result, "p", "SecurityPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    [auth] = [c for name, c in res.clusters.items() if name.startswith("ns/auth/9001")]
    assert auth.upstream_connection_options.tcp_keepalive.keepalive_probes.value == 3
    ok, message = validate_with_envoy(res)
    assert ok, message


def socket_options(listener: Any) -> list[tuple[int, int, int, int]]:
    return [(o.level, o.name, o.int_value, o.state) for o in listener.socket_options]


def test_client_keepalive_socket_options_on_the_governed_listeners_validated_by_envoy() -> None:
    result = run([*base(), policy("c", "ClientTrafficPolicy", section="http", spec=KEEPALIVE)])
    assert only(result, "c", "ClientTrafficPolicy")["Accepted"]["reason"] == "Accepted"
    res = build(result.xds["ns/gw"])
    # SOL_SOCKET/SO_KEEPALIVE on; SOL_TCP TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL before bind
    assert socket_options(res.listeners["ns/gw/8080"]) == [
        (1, 9, 1, 0),
        (6, 6, 3, 0),
        (6, 4, 1200, 0),
        (6, 5, 60, 0),
    ]
    assert socket_options(res.listeners["ns/gw/8081"]) == []  # not governed
    ok, message = validate_with_envoy(res)
    assert ok, message
    empty = run([*base(), policy("c", "ClientTrafficPolicy", spec={"tcpKeepalive": {}})])
    listener = build(empty.xds["ns/gw"]).listeners["ns/gw/8080"]
    assert socket_options(listener) == [(1, 9, 1, 0)]  # the system's values


def stored(kind: str, spec: dict[str, Any]) -> Any:
    """The translation with a policy ``p`` of ``kind`` and ``spec`` on the Gateway as stored
    (not validated against the CRD again)."""
    model = getattr(m, kind)
    bad = model(
        metadata=m.ObjectMeta(name="p", namespace="ns"),
        spec={"targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}], **spec},
    )
    return translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())


@pytest.mark.parametrize("kind", ["BackendTrafficPolicy", "ClientTrafficPolicy"])
def test_bad_values_located_and_the_policy_unapplied(kind: str) -> None:
    bad = {"probes": 0, "idleTime": "500ms", "interval": "10h"}
    result = stored(kind, {"tcpKeepalive": bad})
    message = only(result, "p", kind)["Accepted"]["message"]
    for part in (
        "spec.tcpKeepalive.probes: 0 is not a number of probes (1 to 127)",
        "spec.tcpKeepalive.idleTime '500ms' must be from 1s to 32767s",
        "spec.tcpKeepalive.interval '10h' must be from 1s to 32767s",
    ):
        assert part in message, message
    assert result.xds == run(base()).xds
    for spec, part in (
        ({"tcpKeepalive": "on"}, "spec.tcpKeepalive: 'on' is not an object"),
        ({"tcpKeepalive": {"idleTime": 5}}, "spec.tcpKeepalive.idleTime 5 is not a duration"),
        ({"tcpKeepalive": {"probes": 200}}, "spec.tcpKeepalive.probes: 200 is not a number"),
    ):
        message = only(stored(kind, spec), "p", kind)["Accepted"]["message"]
        assert part in message, message
