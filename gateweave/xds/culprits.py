"""Which route objects made Envoy reject a Gateway's route tables.

When a Gateway's Envoy NACKs its RouteConfigurations, the suspects are the route objects
(HTTPRoute, GRPCRoute) whose IR routes differ between the snapshot that Envoy last ACKed and
the rejected one (every route object of the rejected one if nothing was ACKed yet): what
Envoy had before was fine, so what it refuses came with them.

One suspect is not yet a culprit: the rejection may not be theirs at all (a limit the whole
table hits). So the culprits are found by trying: a *trial* is the rejected snapshot with
the routes of some suspects left out, sent to the live Envoy, which ACKs or NACKs it in a
round trip (a few milliseconds). First all suspects are left out: if Envoy still refuses,
no route object explains the rejection (:func:`find_culprits` returns none) and the data
plane keeps today's handling (Programmed=False with Envoy's message, retry with backoff).
Otherwise the refused suspects are halved down to one culprit, each half tried on top of what
is known to be accepted (adaptive group testing), and the halves set aside are tried together
afterwards (halved again if refused): ``k`` culprits among ``n`` suspects cost about
``k * (log2(n) + 1) + 1`` trials. The number of trials is bounded (:data:`MAX_TRIALS`);
culprits still unfound then are found by the next search, on the next rejection.

Why trials against the live Envoy rather than ``envoy --mode validate`` of each suspect
offline: the live Envoy judges with its own runtime values and state (e.g. a regex program
size limit its operator lowered), so what it accepts in a trial is what it will accept; a
trial costs one round trip where a validation costs a process (~60-170 ms, and seconds for
large tables), which matters when the first snapshot of a Gateway (every route a suspect)
is rejected. A trial never adds anything Envoy did not have or takes away a route that was
not a suspect; a suspect left out of a trial was new or changed, and is served again (or
quarantined) once the search ends, within milliseconds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import msgspec

from gateweave import ir
from gateweave.api.kinds import Key

MAX_TRIALS = 64  # per search: log2(n) + 1 per culprit among n suspects, + 2

# A trial: the rejected snapshot without these route objects' routes -> (Envoy took it,
# Envoy's message when it did not); None when no answer can be had (a newer snapshot
# replaced the rejected one, the stream closed, no answer in time): the search stops.
Trial = Callable[[frozenset[Key]], Awaitable[tuple[bool, str] | None]]


def _route_configs(gw: ir.XdsGateway) -> Iterator[ir.RouteConfig]:
    for port in gw.ports:
        if port.http is not None:
            yield port.http
        for chain in port.filter_chains:
            if chain.http is not None:
                yield chain.http


def routes_by_owner(gw: ir.XdsGateway) -> dict[Key, list[tuple[str, ir.Route]]]:
    """Each route object's IR routes in ``gw``, with the virtual host each one is in."""
    out: dict[Key, list[tuple[str, ir.Route]]] = {}
    for config in _route_configs(gw):
        for vh in config.virtual_hosts:
            for route in vh.routes:
                owner = ir.route_owner(route.name)
                if owner is not None:
                    out.setdefault(Key(*owner), []).append((vh.name, route))
    return out


def suspects(acked: ir.XdsGateway | None, rejected: ir.XdsGateway) -> list[Key]:
    """The route objects whose routes in ``rejected`` differ from those in ``acked`` (sorted)."""
    before = routes_by_owner(acked) if acked is not None else {}
    return sorted(
        key for key, routes in routes_by_owner(rejected).items() if before.get(key) != routes
    )


def without(gw: ir.XdsGateway, left_out: Collection[Key]) -> ir.XdsGateway:
    """``gw`` with the routes of the route objects ``left_out`` removed (virtual hosts stay)."""
    if not left_out:
        return gw

    def keep(route: ir.Route) -> bool:
        owner = ir.route_owner(route.name)
        return owner is None or Key(*owner) not in left_out

    def config(rc: ir.RouteConfig | None) -> ir.RouteConfig | None:
        if rc is None:
            return None
        hosts = tuple(
            msgspec.structs.replace(vh, routes=tuple(r for r in vh.routes if keep(r)))
            for vh in rc.virtual_hosts
        )
        return msgspec.structs.replace(rc, virtual_hosts=hosts)

    ports = []
    for port in gw.ports:
        chains = tuple(
            msgspec.structs.replace(fc, http=config(fc.http)) for fc in port.filter_chains
        )
        ports.append(msgspec.structs.replace(port, http=config(port.http), filter_chains=chains))
    return msgspec.structs.replace(gw, ports=tuple(ports))


@dataclass(frozen=True)
class Search:
    """What a search found: each culprit with Envoy's message for the trial that singled it
    out; ``accepted``: the suspects Envoy took (the last trial it ACKed had them all);
    ``trials`` run; ``complete``: every suspect was judged (not stopped by MAX_TRIALS)."""

    culprits: dict[Key, str]
    accepted: frozenset[Key]
    trials: int
    complete: bool


async def find_culprits(
    candidates: Sequence[Key], message: str, trial: Trial, max_trials: int = MAX_TRIALS
) -> Search | None:
    """The culprits among ``candidates`` of a rejection whose Envoy message was ``message``.

    None when a trial had no answer (the search was overtaken). No culprits when Envoy
    refuses even the snapshot without any candidate (the rejection is not theirs).
    """
    everyone = frozenset(candidates)
    trials = 0

    async def run(included: frozenset[Key]) -> tuple[bool, str] | None:
        nonlocal trials
        trials += 1
        return await trial(everyone - included)

    first = await run(frozenset())
    if first is None:
        return None
    if not first[0]:
        return Search({}, frozenset(), trials, True)
    accepted: frozenset[Key] = frozenset()  # Envoy took these together (with no other candidate)
    culprits: dict[Key, str] = {}
    pending, refused, why = (
        sorted(everyone),
        True,
        message,
    )  # refused: Envoy refuses accepted + pending
    while pending:
        if trials >= max_trials:
            return Search(culprits, accepted, trials, False)
        if not refused:
            answer = await run(accepted | frozenset(pending))
            if answer is None:
                return None
            if answer[0]:
                accepted |= frozenset(pending)
                break
            why = answer[1]
        # Halve the refused group down to one culprit; the halves set aside are tried together
        # after.
        group, aside = pending, []
        while len(group) > 1:
            if trials >= max_trials:
                return Search(culprits, accepted, trials, False)
            half, other = group[: len(group) // 2], group[len(group) // 2 :]
            answer = await run(accepted | frozenset(half))
            if answer is None:
                return None
            if answer[0]:
                accepted |= frozenset(half)
                group = other  # the group was refused and its first half was not
            else:
                aside += other
                group, why = half, answer[1]
        culprits[group[0]] = why
        pending, refused = aside, False
    return Search(culprits, accepted, trials, True)
