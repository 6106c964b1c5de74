"""gateweave: a Gateway API control plane for Envoy."""

from gateweave import native

# The translation's compiled modules, when a build matching their sources is there (see native).
native.activate()

__version__ = "0.1.0"

DEFAULT_CONTROLLER_NAME = "gateweave.io/gateway-controller"
