"""A BackendTrafficPolicy's compression in Envoy's configuration: a compressor filter per
algorithm and minimum length (in the policy's order, disabled, last before the router) in the HCM
of a listener only while one of its routes compresses, turned on by each governed route (which
removes Accept-Encoding before the backend); bad values are refused by name with the policy
unapplied."""

from __future__ import annotations

from typing import Any

from envoy.extensions.compression.brotli.compressor.v3 import brotli_pb2
from envoy.extensions.compression.gzip.compressor.v3 import gzip_pb2
from envoy.extensions.compression.zstd.compressor.v3 import zstd_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from gateweave.api import models as m
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds import build
from gateweave.xds.validate import validate_with_envoy
from tests.translate.test_policies import GW, base, models, only, policy, run

GZIP, BROTLI, ZSTD = ("envoy.filters.http.compressor/" + k for k in ("gzip", "brotli", "zstd"))


def hcm(listener: Any) -> hcm_pb2.HttpConnectionManager:
    out = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(out)
    return out


def test_compressors_on_governed_routes_only() -> None:
    spec = {"compressor": [{"type": "Brotli"}, {"type": "Gzip", "gzip": {}}, {"type": "Zstd"}]}
    res = build(run([*base(), policy("p", target=("HTTPRoute", "r1"), spec=spec)]).xds["ns/gw"])
    filters = hcm(res.listeners["ns/gw/8080"]).http_filters
    names = [f.name for f in filters]
    assert names[-4:] == [BROTLI, GZIP, ZSTD, "envoy.filters.http.router"]
    libraries = {"gzip": gzip_pb2.Gzip, "brotli": brotli_pb2.Brotli, "zstd": zstd_pb2.Zstd}
    for f in filters[-4:-1]:
        assert f.disabled
        config = compressor_pb2.Compressor()
        f.typed_config.Unpack(config)
        kind = f.name.rsplit("/", 1)[1]
        assert config.compressor_library.name == f"envoy.compression.{kind}.compressor"
        assert config.compressor_library.typed_config.Is(libraries[kind].DESCRIPTOR)
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    assert set(routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config) == {
        GZIP,
        BROTLI,
        ZSTD,
    }
    assert not set(routes["httproute/ns/r2/rule/0/match/0"].typed_per_filter_config) & {
        GZIP,
        BROTLI,
        ZSTD,
    }
    per_route = compressor_pb2.CompressorPerRoute()
    routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config[GZIP].Unpack(per_route)
    assert per_route.HasField("overrides") and not per_route.disabled
    # The backend of a compressing route does not see the client's Accept-Encoding.
    assert list(routes["httproute/ns/r1/rule/0/match/0"].request_headers_to_remove) == [
        "accept-encoding"
    ]
    assert not routes["httproute/ns/r2/rule/0/match/0"].request_headers_to_remove


def _least(f: hcm_pb2.HttpFilter) -> int | None:
    """A compressor filter's min_content_length (None: unset, Envoy's default)."""
    config = compressor_pb2.Compressor()
    f.typed_config.Unpack(config)
    common = config.response_direction_config.common_config
    return common.min_content_length.value if common.HasField("min_content_length") else None


def test_min_content_length_per_route() -> None:
    """Two routes of one listener with different minimum lengths for one algorithm keep their
    own: one filter per (algorithm, length), each route turning on its own; Envoy accepts it."""
    first = {"compressor": [{"type": "Brotli", "minContentLength": 100}, {"type": "Gzip"}]}
    second = {"compression": [{"type": "Brotli", "minContentLength": "1Ki"}, {"type": "Zstd"}]}
    result = run(
        [
            *base(),
            policy("p1", target=("HTTPRoute", "r1"), spec=first),
            policy("p2", target=("HTTPRoute", "r2"), spec=second),
        ]
    )
    for name in ("p1", "p2"):
        assert only(result, name)["Accepted"]["status"] == "True"
    res = build(result.xds["ns/gw"])
    ok, message = validate_with_envoy(res)
    assert ok, message
    filters = {f.name: f for f in hcm(res.listeners["ns/gw/8080"]).http_filters}
    assert {name: _least(f) for name, f in filters.items() if "compressor" in name} == {
        BROTLI + "/100": 100,
        GZIP: None,
        BROTLI + "/1024": 1024,
        ZSTD: None,
    }
    routes = {r.name: r for vh in res.routes["ns/gw/8080"].virtual_hosts for r in vh.routes}
    assert set(routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config) >= {
        BROTLI + "/100",
        GZIP,
    }
    assert not set(routes["httproute/ns/r1/rule/0/match/0"].typed_per_filter_config) & {
        BROTLI + "/1024",
        ZSTD,
    }
    assert set(routes["httproute/ns/r2/rule/0/match/0"].typed_per_filter_config) >= {
        BROTLI + "/1024",
        ZSTD,
    }
    # The other listener has r1 only: its filters alone.
    other = [
        f.name for f in hcm(res.listeners["ns/gw/8081"]).http_filters if "compressor" in f.name
    ]
    assert other == [BROTLI + "/100", GZIP]


def test_deprecated_compression_field_and_no_policy() -> None:
    res = build(
        run([*base(), policy("p", section="http", spec={"compression": [{"type": "Gzip"}]})]).xds[
            "ns/gw"
        ]
    )
    assert GZIP in [f.name for f in hcm(res.listeners["ns/gw/8080"]).http_filters]
    assert not any("compressor" in f.name for f in hcm(res.listeners["ns/gw/8081"]).http_filters)
    res = build(run(base()).xds["ns/gw"])
    assert not any("compressor" in f.name for f in hcm(res.listeners["ns/gw/8080"]).http_filters)


def test_bad_values_refused_by_name() -> None:
    """A stored object is not validated again: translate refuses what the CRD would, and what
    it cannot apply."""
    spec = {
        "targetRefs": [{"group": GW, "kind": "Gateway", "name": "gw"}],
        "compressor": [
            {"type": "Lzma"},
            {"type": "Gzip", "brotli": {}},
            {"type": "Gzip"},
            {"type": "Brotli", "minContentLength": "12Q"},
            {"type": "Zstd", "minContentLength": "4Gi"},
        ],
        "compression": [{"type": "Gzip"}],
    }
    bad = m.BackendTrafficPolicy(metadata=m.ObjectMeta(name="p", namespace="ns"), spec=spec)
    result = translate(Snapshot.from_objects([*models(base()), bad]), TranslateOptions())
    accepted = only(result, "p")["Accepted"]
    assert accepted["status"] == "False"
    message = accepted["message"]
    for part in (
        "spec.compressor[3].minContentLength '12Q' is not a number of bytes",
        "spec.compressor[4].minContentLength '4Gi' is more than 4294967295 bytes",
        "spec.compressor, spec.compression: set one of them",
        "spec.compressor[0].type: 'Lzma' is not one of Gzip, Brotli, Zstd",
        "spec.compressor[1].brotli is for type Brotli, not Gzip",
        "spec.compressor[2].type: Gzip is listed twice",
    ):
        assert part in message, message
    assert not any(
        "compressor" in f.name
        for f in hcm(build(result.xds["ns/gw"]).listeners["ns/gw/8080"]).http_filters
    )
