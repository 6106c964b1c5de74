"""The xDS side: IR -> Envoy resources (``build``), and their static pre-check (``validate``)."""

from gateweave.xds.build import build
from gateweave.xds.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SECRET,
    TYPE_URLS,
    Resources,
    resource_version,
    serialize,
)

__all__ = [
    "CLUSTER",
    "ENDPOINT",
    "LISTENER",
    "ROUTE",
    "SECRET",
    "TYPE_URLS",
    "Resources",
    "build",
    "resource_version",
    "serialize",
]
