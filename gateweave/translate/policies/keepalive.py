"""``tcpKeepalive`` (Envoy Gateway's ``TCPKeepalive``): of a BackendTrafficPolicy (and a
SecurityPolicy's ``backendSettings``) on the connections to the endpoints, of a
ClientTrafficPolicy on the clients' connections.

``idleTime`` and ``interval`` are whole seconds, as Envoy Gateway takes them (a fraction is
dropped). The kernel refuses a socket option outside its own limits (an idle time or interval of
0 or above 32767 s, 0 or more than 127 probes), which would fail the Envoy listener or every
upstream connection: such a value is a problem named with its place.
"""

from __future__ import annotations

from typing import Any

from gateweave import ir
from gateweave.translate.policies import specvalue

FIELDS: frozenset[str] = frozenset(
    {"tcpKeepalive", "tcpKeepalive.probes", "tcpKeepalive.idleTime", "tcpKeepalive.interval"}
)

# Linux's limits (MAX_TCP_KEEPCNT, MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL)
_MAX_PROBES = 127
_MAX_SECONDS = 32767


def tcp_keepalive(spec: dict[str, Any], at: str, out: list[str]) -> ir.TCPKeepalive | None:
    """``spec``'s ``tcpKeepalive`` (``spec`` being at ``at``); None when unset or not
    applicable, with the problems in ``out``."""
    raw = spec.get("tcpKeepalive")
    if raw is None:
        return None
    at = f"{at}.tcpKeepalive"
    if not isinstance(raw, dict):
        out.append(f"{at}: {raw!r} is not an object")
        return None
    problems = len(out)
    probes = raw.get("probes")
    if probes is not None and (
        isinstance(probes, bool) or not isinstance(probes, int) or not 0 < probes <= _MAX_PROBES
    ):
        out.append(f"{at}.probes: {probes!r} is not a number of probes (1 to {_MAX_PROBES})")
    idle = _seconds(raw.get("idleTime"), f"{at}.idleTime", out)
    interval = _seconds(raw.get("interval"), f"{at}.interval", out)
    if len(out) > problems:
        return None
    return ir.TCPKeepalive(probes=probes, idle_s=idle, interval_s=interval)


def _seconds(value: Any, at: str, out: list[str]) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        out.append(f"{at} {value!r} is not a duration")
        return None
    seconds = specvalue.seconds(value, at, out)
    if seconds is None:
        return None
    if not 1 <= int(seconds) <= _MAX_SECONDS:
        out.append(f"{at} {value!r} must be from 1s to {_MAX_SECONDS}s")
        return None
    return int(seconds)
