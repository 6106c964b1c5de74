"""gateweave: a Gateway API control plane for Envoy."""

# First: the one structlog every module logs through (imported without rich: see logs).
from gateweave import logs as logs
from gateweave import native

# The translation's compiled modules, when a build matching their sources is there (see native).
native.activate()

__version__ = "0.1.0"

DEFAULT_CONTROLLER_NAME = "gateweave.io/gateway-controller"
