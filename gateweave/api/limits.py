"""What one manifest file may cost: the bounds every file read by gateweave is held to.

A file that exceeds one of them is refused as a whole, with a located error, before it
can cost more: reading stops at :data:`MAX_FILE_BYTES`, YAML is turned into values
event by event (never by a recursive composer) and stops at the first limit crossed.
The worst case of any file is therefore about what parsing :data:`MAX_FILE_BYTES` of
ordinary YAML costs.

The values are generous for configuration (10,000 HTTPRoutes in one file are about
4 MB, 40 documents deep at most for a CRD-sized schema) and far below what hurts.
"""

from __future__ import annotations

import json

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Bytes read from one file (the Kubernetes API server takes 3 MB per request)."""

MAX_DOCUMENTS = 100_000
"""YAML documents in one file (empty ones count)."""

MAX_DEPTH = 100
"""Nesting of mappings and sequences (the document's root is depth 1), aliases expanded."""

MAX_ALIAS_NODES = 100_000
"""Nodes that aliases (``*name``) may add to one file, counting each alias as the size of
the node it repeats: a "billion laughs" file is refused at this count, after a few
hundred events, instead of being expanded."""

MAX_ECHO_CHARS = 64
"""Characters of a value an error message quotes (the rest is summarized by its size)."""

MAX_MESSAGE_CHARS = 1000
"""Characters of one error message, a backstop (values are already quoted cut)."""


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text``, or its first ``limit`` characters and its size when it is longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text.encode('utf-8', 'replace'))} bytes)"


def quote(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` as a JSON string for an error message; a long one is cut as :func:`clip` does."""
    if len(text) <= limit:
        return json.dumps(text)
    return f'{json.dumps(text[:limit])[:-1]}..." ({len(text.encode("utf-8", "replace"))} bytes)'
