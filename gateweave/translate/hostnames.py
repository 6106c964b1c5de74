"""Hostname intersection of listeners and routes (Gateway API wildcard semantics).

``*.example.com`` matches ``a.example.com`` and ``a.b.example.com`` but not
``example.com``. ``None`` stands for "any hostname".
"""

from __future__ import annotations


def _covers(wild: str, name: str) -> bool:
    """Whether wildcard ``wild`` (``*.suffix``) matches ``name`` (a hostname or a narrower wildcard)."""
    suffix = wild[1:]  # ".example.com"
    return name.endswith(suffix) and len(name) > len(suffix)


def intersect(listener: str | None, route: str) -> str | None:
    """The hostnames common to a listener hostname and one route hostname, as the narrower of the two."""
    if listener is None or listener == route:
        return route
    lw, rw = listener.startswith("*."), route.startswith("*.")
    if lw and _covers(listener, route):
        return route
    if rw and _covers(route, listener):
        return listener
    return None


def effective_hostnames(listener: str | None, route_hostnames: tuple[str, ...]) -> tuple[str, ...] | None:
    """Hostnames a route serves on a listener: None = any; () = no intersection."""
    if not route_hostnames:
        return None if listener is None else (listener,)
    return intersect_lowered(listener, tuple(h.lower() for h in route_hostnames))


def intersect_lowered(listener: str | None, route_hostnames: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`effective_hostnames` for non-empty route hostnames that are already lowercase."""
    if len(route_hostnames) == 1:
        hit = intersect(listener, route_hostnames[0])
        if hit is None:
            return ()
        return route_hostnames if hit is route_hostnames[0] else (hit,)
    out: list[str] = []
    for h in route_hostnames:
        hit = intersect(listener, h)
        if hit is not None and hit not in out:
            out.append(hit)
    return tuple(out)


def specificity(hostname: str | None) -> tuple[int, int]:
    """Sort key, most specific first: exact names, then wildcards by length, then no hostname."""
    if hostname is None:
        return (2, 0)
    if hostname.startswith("*"):
        return (1, -len(hostname))
    return (0, -len(hostname))
