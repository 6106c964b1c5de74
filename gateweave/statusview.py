"""``gateweave status``: a kubectl-like view of Gateways, listeners, routes and Backends with
their conditions, and of the configuration errors (files or objects refused: what is served
then is the last accepted version, so the tables above can be all green while the
configuration as written is not what runs)."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gateweave.infra.statedir import Survey

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# rich is imported by the functions that print (the CLI's): ``serve`` imports this module for
# ``is_bad`` (the dashboard) and keeps no rich (tests/serve/test_imports.py).

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
BACKEND_KINDS = ("Backend",)  # Envoy Gateway's, with their Accepted condition


def _cond(conds: Iterable[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conds if c.get("type") == type_), None)


def _cell(conds: Iterable[dict[str, Any]], type_: str) -> str:
    c = _cond(list(conds), type_)
    if c is None:
        return "-"
    colour = "green" if (c["status"] == "True") != (type_ == "Conflicted") else "red"
    return f"[{colour}]{c['status']}[/{colour}]"


def is_bad(cond: dict[str, Any]) -> bool:
    """Whether a condition is not as it should be: False, or True for Conflicted."""
    return cond.get("status") == ("True" if cond.get("type") == "Conflicted" else "False")


def _why(conds: Iterable[dict[str, Any]]) -> str:
    """The first condition that is not as it should be, as 'Type Reason: message'."""
    for c in conds:
        if is_bad(c):
            return f"{c['type']} {c['reason']}: {c.get('message', '')}"
    return ""


def _nn(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return (
        f"{meta.get('namespace')}/{meta.get('name')}"
        if meta.get("namespace")
        else str(meta.get("name"))
    )


def _errors_table(errors: list[dict[str, Any]]) -> Table:
    """``/api/errors`` items (source, message, and kind, namespace, name when about an object)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title=f"Configuration errors ({len(errors)})", title_justify="left", title_style="bold red"
    )
    for col in ("SOURCE", "OBJECT", "MESSAGE"):
        table.add_column(col)
    for err in errors:
        who = ""
        if err.get("kind"):
            who = (
                f"{err['kind']} {err['namespace']}/{err.get('name', '')}"
                if err.get("namespace")
                else f"{err['kind']} {err.get('name', '')}"
            )
        table.add_row(
            escape(str(err.get("source", ""))),
            escape(who),
            f"[red]{escape(str(err.get('message', '')))}[/red]",
        )
    return table


def _rates(traffic: dict[str, Any], route: str) -> tuple[str, str]:
    seen = traffic.get("routes", {}).get(route)
    if not seen:
        return "0", "0"
    return f"{seen.get('rate', 0):g}", f"{seen.get('error_rate', 0):g}"


def render(
    items: list[dict[str, Any]],
    controller_name: str,
    console: Console | None = None,
    errors: list[dict[str, Any]] | None = None,
    traffic: dict[str, Any] | None = None,
) -> None:
    """``traffic``: a running server's ``/api/traffic``, which adds each route's request and
    error rates (per second) to the routes table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 200)
    gateways = [o for o in items if o.get("kind") == "Gateway" and o.get("status")]
    gw_table = Table(title="Gateways", title_justify="left")
    for col in ("NAME", "CLASS", "ADDRESS", "ACCEPTED", "PROGRAMMED", "WHY"):
        gw_table.add_column(col)
    ls_table = Table(title="Listeners", title_justify="left")
    for col in (
        "GATEWAY",
        "LISTENER",
        "PORT",
        "PROTOCOL",
        "ROUTES",
        "ACCEPTED",
        "PROGRAMMED",
        "REFS",
        "WHY",
    ):
        ls_table.add_column(col)
    for gw in gateways:
        st = gw["status"]
        conds = st.get("conditions", [])
        addrs = ",".join(a.get("value", "") for a in st.get("addresses", [])) or "-"
        gw_table.add_row(
            _nn(gw),
            gw.get("spec", {}).get("gatewayClassName", ""),
            addrs,
            _cell(conds, "Accepted"),
            _cell(conds, "Programmed"),
            _why(conds),
        )
        spec_listeners = {lst.get("name"): lst for lst in gw.get("spec", {}).get("listeners", [])}
        for lst in st.get("listeners", []):
            spec = spec_listeners.get(lst["name"], {})
            lconds = lst.get("conditions", [])
            ls_table.add_row(
                _nn(gw),
                lst["name"],
                str(spec.get("port", "")),
                str(spec.get("protocol", "")),
                str(lst.get("attachedRoutes", 0)),
                _cell(lconds, "Accepted"),
                _cell(lconds, "Programmed"),
                _cell(lconds, "ResolvedRefs"),
                _why(lconds),
            )
    rt_table = Table(title="Routes", title_justify="left")
    rate_columns = ("REQ/S", "ERR/S") if traffic is not None else ()
    for col in ("KIND", "NAME", "PARENT", "ACCEPTED", "REFS", *rate_columns, "WHY"):
        rt_table.add_column(col)
    for obj in items:
        if obj.get("kind") not in ROUTE_KINDS:
            continue
        for entry in obj.get("status", {}).get("parents", []):
            if entry.get("controllerName") != controller_name:
                continue
            ref = entry.get("parentRef", {})
            parent = (
                f"{ref.get('kind', 'Gateway')} "
                f"{ref.get('namespace') or obj['metadata'].get('namespace')}/{ref.get('name')}"
            )
            if ref.get("sectionName"):
                parent += f"/{ref['sectionName']}"
            if ref.get("port"):
                parent += f":{ref['port']}"
            conds = entry.get("conditions", [])
            rates = _rates(traffic, f"{obj['kind']}/{_nn(obj)}") if traffic is not None else ()
            rt_table.add_row(
                obj["kind"],
                _nn(obj),
                parent,
                _cell(conds, "Accepted"),
                _cell(conds, "ResolvedRefs"),
                *rates,
                _why(conds),
            )
    be_table = Table(title="Backends", title_justify="left")
    for col in ("KIND", "NAME", "ACCEPTED", "WHY"):
        be_table.add_column(col)
    for obj in items:
        if obj.get("kind") in BACKEND_KINDS and obj.get("status"):
            conds = obj["status"].get("conditions", [])
            be_table.add_row(obj["kind"], _nn(obj), _cell(conds, "Accepted"), _why(conds))
    console.print(gw_table)
    console.print(ls_table)
    console.print(rt_table)
    if be_table.row_count:
        console.print(be_table)
    if errors:
        console.print(_errors_table(errors))
    elif errors is not None:
        console.print("[green]No configuration errors.[/green]")


def render_envoys(survey: Survey, console: Console | None = None) -> None:
    """The Envoys recorded in a state directory, and whether a controller runs them."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 200)
    if survey.holder is None:
        title = f"Envoys in {survey.path}: no controller"
        if survey.envoys:
            title += (
                " (they keep serving their last configuration; a serve on this state directory "
                "adopts them)"
            )
    else:
        title = f"Envoys in {survey.path}: controller pid {survey.holder.pid}"
    console.print(escape(title), soft_wrap=True)
    table = Table()
    for col in ("GATEWAY", "PID", "SINCE", "ADMIN", "CONTROLLER"):
        table.add_column(col)
    for record in survey.envoys:
        since = datetime.datetime.fromtimestamp(record.started_at, datetime.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        who = "[red]none[/red]" if survey.holder is None else str(survey.holder.pid)
        table.add_row(escape(record.gateway), str(record.pid), since, record.admin_address, who)
    console.print(table)
