"""The Gateway API conformance runner and its echo backends: a development harness beside
gateweave, not part of it (installed from harness/; it adds ``gateweave conformance``).
The case files and manifests it replays are in third_party/gateway-api/conformance."""
