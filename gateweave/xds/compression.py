"""BackendTrafficPolicy compression in Envoy: one compressor filter per algorithm in a
listener's HTTP connection manager while one of its routes compresses with it, disabled there;
a route governed by the policy turns on its algorithms, so other routes' answers pass as they
are. Of several, Envoy picks the encoding the client's ``Accept-Encoding`` weighs most.
"""

from __future__ import annotations

from collections.abc import Iterable

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

# Each type's compression library (Envoy's extension name and its default settings).
_LIBRARIES: dict[str, tuple[str, type[Message]]] = {
    "Gzip": ("envoy.compression.gzip.compressor", gzip_pb2.Gzip),
    "Brotli": ("envoy.compression.brotli.compressor", brotli_pb2.Brotli),
    "Zstd": ("envoy.compression.zstd.compressor", zstd_pb2.Zstd),
}


def filter_name(kind: str) -> str:
    return f"{COMPRESSOR_FILTER}/{kind.lower()}"


def http_filters(routes: Iterable[ir.Route]) -> list[hcm_pb2.HttpFilter]:
    """The disabled compressor filters some of ``routes`` turn on."""
    kinds: dict[str, None] = {}
    for r in routes:
        kinds.update(dict.fromkeys(r.compression))
    out = []
    for kind in kinds:
        extension, library = _LIBRARIES[kind]
        config = compressor_pb2.Compressor()
        config.compressor_library.name = extension
        config.compressor_library.typed_config.CopyFrom(pack(library()))
        out.append(
            hcm_pb2.HttpFilter(name=filter_name(kind), typed_config=pack(config), disabled=True)
        )
    return out


_ENABLE = pack(compressor_pb2.CompressorPerRoute(overrides=compressor_pb2.CompressorOverrides()))


def per_route(r: ir.Route) -> dict[str, any_pb2.Any]:
    """The per-route configs (by filter name) that turn ``r``'s compressors on."""
    return {filter_name(kind): _ENABLE for kind in r.compression}
