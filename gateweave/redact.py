"""Private keys never leave through the admin API: :func:`redact` blanks every PEM private key
block in a response body, whatever produced it (the IR's ``key_pem``, an error message or an
explanation that quoted one, a dashboard view).

A block is ``-----BEGIN ... PRIVATE KEY-----`` up to its ``-----END`` line; a block cut short
(a truncated message) is blanked to the end of its JSON string (the next ``"``) or of the body.
It works on raw text and on JSON, where the key's newlines are ``\\n`` escapes: PEM never
contains ``"``, so a match never crosses out of the string it is in.
"""

from __future__ import annotations

import re

REDACTED = b"[redacted private key]"

_BLOCK = re.compile(
    rb'-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[^"]*?(?:-----END \1PRIVATE KEY-----|(?=")|\Z)'
)


def redact(body: bytes) -> bytes:
    """``body`` with every PEM private key (complete or cut short) replaced by :data:`REDACTED`."""
    if b"PRIVATE KEY-----" not in body:
        return body
    return _BLOCK.sub(REDACTED, body)
