"""Hostname intersection of listeners and routes (Gateway API wildcard semantics).

``*.example.com`` matches ``a.example.com`` and ``a.b.example.com`` but not
``example.com``. ``None`` stands for "any hostname".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def _covers(wild: str, name: str) -> bool:
    """Whether wildcard ``wild`` (``*.suffix``) matches ``name`` (a hostname or a narrower
    wildcard).
    """
    suffix = wild[1:]  # ".example.com"
    return name.endswith(suffix) and len(name) > len(suffix)


def intersect(listener: str | None, route: str) -> str | None:
    """The hostnames common to a listener hostname and one route hostname, as the narrower of the
    two.
    """
    if listener is None or listener == route:
        return route
    lw, rw = listener.startswith("*."), route.startswith("*.")
    if lw and _covers(listener, route):
        return route
    if rw and _covers(route, listener):
        return listener
    return None


def effective_hostnames(
    listener: str | None, route_hostnames: tuple[str, ...]
) -> tuple[str, ...] | None:
    """Hostnames a route serves on a listener: None = any; () = no intersection."""
    if not route_hostnames:
        return None if listener is None else (listener,)
    return intersect_lowered(listener, tuple(h.lower() for h in route_hostnames))


def only_name(names: tuple[str, ...] | None) -> str | None:
    """The name of a tuple of exactly one, else None.

    Callers test this, not ``len(names) == 1``: mypy narrows a tuple so tested to a one-item
    tuple type, which mypyc holds unboxed and makes a new tuple of wherever it is stored or
    returned, so a route's own hostnames tuple would be copied per holder in the compiled
    build (docs/benchmarks.md, memory, seventh round)."""
    return names[0] if names is not None and len(names) == 1 else None


def intersect_lowered(listener: str | None, route_hostnames: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`effective_hostnames` for non-empty route hostnames that are already lowercase."""
    one = only_name(route_hostnames)
    if one is not None:
        hit = intersect(listener, one)
        if hit is None:
            return ()
        return route_hostnames if hit is one else (hit,)
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


# Things with a hostname (None: any), in the order they are tried: (thing, its hostname, the
# suffix its wildcard hostname covers, e.g. ".example.com" for "*.example.com", else None).
Selectors = list[tuple[T, str | None, str | None]]


def selectors(items: Sequence[tuple[T, str | None]]) -> Selectors[T]:
    """``(thing, hostname)`` pairs with what
    :func:`first_selecting` reads of each, computed once.
    """
    return [(item, h, h[1:] if h is not None and h.startswith("*.") else None) for item, h in items]


def first_selecting(items: Selectors[T], domain: str) -> T | None:
    """The first thing whose hostname selects ``domain``: no hostname (any host), the same name,
    or a wildcard that covers it as :func:`_covers` says (``*.suffix`` covers ``a.suffix``,
    ``a.b.suffix`` and a narrower wildcard ``*.a.suffix``, not ``suffix`` itself). The domain
    ``"*"`` (a route without hostnames) is selected only by a thing without a hostname."""
    if domain == "*":
        for item, h, _ in items:
            if h is None:
                return item
        return None
    for item, h, suffix in items:
        # _covers inline, with the suffix computed once per thing (a hot loop of the xDS IR).
        if (
            h is None
            or h == domain
            or (suffix is not None and domain.endswith(suffix) and len(domain) > len(suffix))
        ):
            return item
    return None
