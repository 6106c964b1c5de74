"""gateweave: a Gateway API control plane for Envoy."""

__version__ = "0.1.0"

DEFAULT_CONTROLLER_NAME = "gateweave.io/gateway-controller"
