"""The Gateway API conformance runner and its echo backends."""
