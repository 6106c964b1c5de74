"""Private keys never leave through the admin API: :func:`redact` blanks every PEM private key
block in a response body, whatever produced it (the IR's ``key_pem``, an error message or an
explanation that quoted one, a dashboard view), and every password hash of an htpasswd file
(``{SHA}`` and its base64, a SecurityPolicy's basicAuth users in the IR) and every API key
(the IR's ``api_key`` fields, a SecurityPolicy's apiKeyAuth credentials).

A block is ``-----BEGIN ... PRIVATE KEY-----`` up to its ``-----END`` line; a block cut short
(a truncated message) is blanked to the end of its JSON string (the next ``"``) or of the body.
It works on raw text and on JSON, where the key's newlines are ``\\n`` escapes: PEM never
contains ``"``, so a match never crosses out of the string it is in.
"""

from __future__ import annotations

import re

REDACTED = b"[redacted private key]"
REDACTED_HASH = b"{SHA}[redacted]"
REDACTED_API_KEY = b'"api_key":"[redacted]"'

_BLOCK = re.compile(
    rb'-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[^"]*?(?:-----END \1PRIVATE KEY-----|(?=")|\Z)'
)
_SHA_HASH = re.compile(rb"\{SHA\}[A-Za-z0-9+/=]*")
_API_KEY = re.compile(rb'"api_key":\s*"(?:[^"\\]|\\.)*"')


def redact(body: bytes) -> bytes:
    """``body`` with every PEM private key (complete or cut short) replaced by :data:`REDACTED`
    and every htpasswd SHA hash and API key by theirs."""
    if b"{SHA}" in body:
        body = _SHA_HASH.sub(REDACTED_HASH, body)
    if b'"api_key"' in body:
        body = _API_KEY.sub(REDACTED_API_KEY, body)
    if b"PRIVATE KEY-----" not in body:
        return body
    return _BLOCK.sub(REDACTED, body)
