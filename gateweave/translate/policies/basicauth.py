"""SecurityPolicy ``basicAuth``: the htpasswd file in the Secret ``users`` names (key
``.htpasswd``; another namespace's with a ReferenceGrant to the SecurityPolicy), SHA hashes only,
as Envoy's basic_auth filter takes them: a request without matching credentials gets 401; the
user's name goes to the backend in the header ``forwardUsernameHeader`` names, if set."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import securityrefs, specvalue

FIELDS: frozenset[str] = frozenset(
    {
        "basicAuth",
        "basicAuth.users",
        "basicAuth.users.group",
        "basicAuth.users.kind",
        "basicAuth.users.name",
        "basicAuth.users.namespace",
        "basicAuth.forwardUsernameHeader",
    }
)

HTPASSWD_KEY = ".htpasswd"  # Envoy Gateway's key of the users Secret
_SHA = "{SHA}"
_SHA1_BYTES = 20


class _BasicAuth(msgspec.Struct, frozen=True, rename="camel"):
    users: securityrefs.SecretRef
    forward_username_header: str = ""


def resolve(ctx: Any, namespace: str, raw: Any, out: list[str]) -> ir.BasicAuth | None:
    """The users of ``raw`` (the spec's basicAuth); problems with their place in ``out``."""
    conf = securityrefs.read(raw, _BasicAuth, "spec.basicAuth", out)
    if conf is None:
        return None
    header = conf.forward_username_header
    if header and not specvalue.HEADER_NAME.fullmatch(header):
        out.append(f"spec.basicAuth.forwardUsernameHeader: {header!r} is not a header name")
    ref = conf.users
    where = "spec.basicAuth.users"
    text = securityrefs.secret_text(ctx, namespace, ref, where, HTPASSWD_KEY, out)
    if text is None:
        return None
    users = htpasswd_users(text)
    if isinstance(users, str):
        out.append(
            f"{where}: Secret {ref.namespace or namespace}/{ref.name} key {HTPASSWD_KEY}: {users}"
        )
        return None
    return ir.BasicAuth(
        users="\n".join(users), forward_username_header=conf.forward_username_header
    )


def htpasswd_users(text: str) -> list[str] | str:
    """The htpasswd file's user lines (blank lines dropped), or what Envoy's basic_auth filter
    would refuse in it: only ``user:{SHA}base64(sha1)`` lines, each user once."""
    lines: list[str] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            return f"line {number} is not user:hash"
        if not hashed.startswith(_SHA):
            return f"line {number} (user {user}): only {_SHA} hashes are supported"
        try:
            digest = base64.b64decode(hashed[len(_SHA) :], validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != _SHA1_BYTES:
            return f"line {number} (user {user}): not a base64 SHA-1 hash"
        if user in seen:
            return f"line {number}: user {user} appears twice"
        seen.add(user)
        lines.append(line)
    if not lines:
        return "no users"
    return lines
