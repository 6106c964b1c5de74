"""The incremental check of the tests: with GATEWEAVE_CHECK_INCREMENTAL=1 (CI sets it, .ci/run)
every incremental translation a test makes through the runtime is also made in full and
compared, and a difference fails that translation. The runtime reads no switch: a test hands
it :func:`incremental_translator`, or ``gateweave.app``'s ``RuntimeSettings(check_incremental=
CHECK_INCREMENTAL)``; a ``gateweave`` process a test starts reads the same variable as its
``--check-incremental`` option."""

from __future__ import annotations

import os

from gateweave.translate.incremental import IncrementalTranslator

CHECK_INCREMENTAL = os.environ.get("GATEWEAVE_CHECK_INCREMENTAL", "") not in ("", "0")


def incremental_translator() -> IncrementalTranslator:
    """The runtime's translator, checked against a full translation when CI asks for it."""
    return IncrementalTranslator(check=CHECK_INCREMENTAL)
