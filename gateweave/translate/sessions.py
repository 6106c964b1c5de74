"""A route rule's ``sessionPersistence`` (GEP-1619) -> :class:`ir.Session`.

A cookie without a name gets one made for its rule (``session-`` and 16 hex digits of the
rule's identity), so each rule keeps its own sessions. The cookie's Path is ``cookie.path``
("/" by default). ``absoluteTimeout`` ends a cookie session: a Permanent cookie carries it as
Max-Age, as the spec asks; for a Session cookie the spec wants the gateway alone to track it,
which Envoy does only together with Max-Age, so such a cookie has one too (the session still
ends on time; a browser may keep the cookie across restarts until then). Envoy's header
session state carries no expiry: a header session with an absoluteTimeout is refused (the rule
is dropped as UnsupportedValue, as any value gateweave cannot implement), never ignored.
"""

from __future__ import annotations

import hashlib

from gateweave import ir
from gateweave.api import models as m
from gateweave.translate.filters import RuleError, parse_duration


def cookie_name(rule_id: str) -> str:
    """The cookie of a rule that names none: stable while the route and rule keep their names."""
    return "session-" + hashlib.sha256(rule_id.encode()).hexdigest()[:16]


def session(sp: m.SessionPersistence | None, rule_id: str) -> ir.Session | None:
    """The IR session of a rule (``rule_id``: its kind, namespace, route name and rule name or
    index); raises RuleError for what Envoy cannot do (an absoluteTimeout on a header session)."""
    if sp is None:
        return None
    ttl = parse_duration(sp.absolute_timeout) if sp.absolute_timeout is not None else None
    if sp.type == "Header":
        if sp.header is None:
            raise RuleError("sessionPersistence of type Header needs header.name")
        if ttl is not None:
            raise RuleError("sessionPersistence.absoluteTimeout is not supported for type Header")
        return ir.Session(type="Header", name=sp.header.name.lower())
    if sp.type != "Cookie":
        raise RuleError(f"sessionPersistence type {sp.type} is not supported")
    cookie = sp.cookie or m.CookieConfig()
    if cookie.lifetime_type == "Permanent" and ttl is None:
        raise RuleError("a Permanent session cookie needs sessionPersistence.absoluteTimeout")
    return ir.Session(
        type="Cookie",
        name=cookie.name or cookie_name(rule_id),
        path=cookie.path or "/",
        ttl_s=ttl or None,
    )
