"""Which listeners may bind their port (standalone mode: the Gateways' Envoys share this host;
Kubernetes mode: the Gateways of a merged class share one Envoy Deployment, all on 0.0.0.0).

A listener binds (its Gateway's address, its port, TCP or UDP). Two binds of different
Gateways collide when protocol and port are equal and the addresses overlap: equal, or one
is the unspecified address of the same IP family (0.0.0.0:80 covers 10.0.0.5:80). The
Gateway that sorts first (creationTimestamp, then namespace/name) keeps the port; the
other's listeners on it are Accepted=False PortUnavailable, naming the Gateway that holds it,
and get no configuration. A port below ``TranslateOptions.privileged_ports_below`` (the
process may not bind it) is PortUnavailable too, saying why in words.

The granularity is the listener: a listener is bound entirely or not at all (all listeners
of a Gateway on one port share one bind, so they go together), and the Gateway's other
listeners are served. A Gateway left with no valid listener is not accepted, with the first
listener's reason.
"""

from __future__ import annotations

import ipaddress

from gateweave.translate import conditions as c
from gateweave.translate.context import GatewayCtx, ListenerCtx
from gateweave.translate.options import TranslateOptions

_Bind = tuple[str, int, int]  # (TCP|UDP, port, IP version)


class PortBook:
    """The binds held so far, by Gateway in precedence order (claim them oldest first)."""

    def __init__(self, options: TranslateOptions, *, host: bool = True) -> None:
        # host: the binds are this host's (standalone); else a pod's (no privileged ports here)
        self.privileged_below = options.privileged_ports_below if host else 0
        self._held: dict[
            _Bind, list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, GatewayCtx]]
        ] = {}

    def claim(self, gctx: GatewayCtx, lcs: list[ListenerCtx]) -> None:
        """Claims the ports of ``gctx``'s valid listeners; marks those it cannot have."""
        try:
            ip = ipaddress.ip_address(gctx.address)
        except ValueError:
            return
        mine: set[_Bind] = set()
        for lc in lcs:
            if lc.not_accepted is not None or lc.conflict is not None:
                continue
            if lc.port < self.privileged_below:
                lc.not_accepted = c.listener_port_unavailable(
                    f"port {lc.port} is privileged: binding it needs root or CAP_NET_BIND_SERVICE, "
                    "and "
                    "this process has neither (net.ipv4.ip_unprivileged_port_start is "
                    f"{self.privileged_below})"
                )
                continue
            bind: _Bind = ("UDP" if lc.protocol == "UDP" else "TCP", lc.port, int(ip.version))
            if bind not in mine:
                holder = self._holder(bind, ip, gctx)
                if holder is not None:
                    other, at = holder
                    lc.not_accepted = c.listener_port_unavailable(
                        f"{bind[0]} port {lc.port} on {ip} is held by Gateway {other.name} (bound "
                        "at "
                        f"{_where(at, lc.port)}), which comes first (creationTimestamp, then "
                        "namespace/name)"
                    )
                    continue
            mine.add(bind)
        for bind in sorted(mine):
            self._held.setdefault(bind, []).append((ip, gctx))

    def _holder(
        self, bind: _Bind, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, gctx: GatewayCtx
    ) -> tuple[GatewayCtx, ipaddress.IPv4Address | ipaddress.IPv6Address] | None:
        for at, other in self._held.get(bind, ()):
            if other is not gctx and (at == ip or at.is_unspecified or ip.is_unspecified):
                return other, at
        return None


def _where(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def first_port_problem(lcs: list[ListenerCtx]) -> c.Condition | None:
    """The first PortUnavailable among ``lcs`` (the Gateway's reason when none is valid)."""
    for lc in lcs:
        if lc.not_accepted is not None and lc.not_accepted.reason == c.R_PORT_UNAVAILABLE:
            return lc.not_accepted
    return None
