"""gateweave's benchmark: a development harness beside gateweave, not part of it (installed
from harness/; it adds ``gateweave bench``). Method and figures: docs/benchmarks.md."""
