"""BackendTrafficPolicy compression in Envoy: one compressor filter per algorithm and minimum
length in a listener's HTTP connection manager while one of its routes compresses with it, disabled
there; a route governed by the policy turns on its own, so other routes' answers pass as they are,
and each route keeps its own minimum length (Envoy sets it per filter, not per route). Of several,
Envoy picks the encoding the client's ``Accept-Encoding`` weighs most. Such a route removes
``Accept-Encoding`` before the backend (as Envoy Gateway; the compressors, before the router, read
it first): the backend answers as it is and the gateway alone compresses.
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.compression.brotli.compressor.v3 import brotli_pb2
from envoy.extensions.compression.gzip.compressor.v3 import gzip_pb2
from envoy.extensions.compression.zstd.compressor.v3 import zstd_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import any_pb2
from google.protobuf.message import Message

from gateweave import ir
from gateweave.xds.resources import pack

COMPRESSOR_FILTER = "envoy.filters.http.compressor"
ACCEPT_ENCODING = "accept-encoding"

# Each type's compression library (Envoy's extension name and its default settings).
_LIBRARIES: dict[str, tuple[str, type[Message]]] = {
    "Gzip": ("envoy.compression.gzip.compressor", gzip_pb2.Gzip),
    "Brotli": ("envoy.compression.brotli.compressor", brotli_pb2.Brotli),
    "Zstd": ("envoy.compression.zstd.compressor", zstd_pb2.Zstd),
}


def filter_name(c: ir.Compressor) -> str:
    """``envoy.filters.http.compressor/<kind>``, with ``/<min_content_length>`` when set."""
    name = f"{COMPRESSOR_FILTER}/{c.kind.lower()}"
    return name if c.min_content_length is None else f"{name}/{c.min_content_length}"


def http_filters(routes: Iterable[ir.Route]) -> list[hcm_pb2.HttpFilter]:
    """The disabled compressor filters some of ``routes`` turn on."""
    used: dict[ir.Compressor, None] = {}
    for r in routes:
        used.update(dict.fromkeys(r.compression))
    out = []
    for c in used:
        extension, library = _LIBRARIES[c.kind]
        config = compressor_pb2.Compressor()
        config.compressor_library.name = extension
        config.compressor_library.typed_config.CopyFrom(pack(library()))
        if c.min_content_length is not None:
            common = config.response_direction_config.common_config
            common.min_content_length.value = c.min_content_length
        out.append(
            hcm_pb2.HttpFilter(name=filter_name(c), typed_config=pack(config), disabled=True)
        )
    return out


_ENABLE = pack(compressor_pb2.CompressorPerRoute(overrides=compressor_pb2.CompressorOverrides()))


def per_route(r: ir.Route) -> dict[str, any_pb2.Any]:
    """The per-route configs (by filter name) that turn ``r``'s compressors on."""
    return {filter_name(c): _ENABLE for c in r.compression}


def remove_accept_encoding(r: ir.Route, out: rc.Route) -> None:
    """A compressing route ``r`` (as ``out``) does not pass the client's Accept-Encoding on."""
    if r.compression and ACCEPT_ENCODING not in out.request_headers_to_remove:
        out.request_headers_to_remove.append(ACCEPT_ENCODING)
