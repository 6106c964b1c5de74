"""The gateweave command line."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import msgspec
import typer
import yaml

from gateweave import DEFAULT_CONTROLLER_NAME, __version__, ir
from gateweave.api.kinds import Key
from gateweave.cliargs import (
    AdminTokenFileOpt,
    CheckIncrementalOpt,
    ClientTokenFileOpt,
    ControllerOpt,
    DefaultAddressOpt,
    PoolOpt,
    ServedDirOpt,
    StateDirOpt,
    check_default_address,
)
from gateweave.cliargs import check_pool as _check_pool
from gateweave.cliargs import err as _err
from gateweave.translate import TranslateOptions

app = typer.Typer(
    name="gateweave",
    help=(
        "A Gateway API control plane for Envoy: one pure translation of the whole system on every "
        "event."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Output(StrEnum):
    yaml = "yaml"
    json = "json"


class Show(StrEnum):
    status = "status"
    ir = "ir"
    xds = "xds"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


# Commands whose output is their result lines: without --log-level, only warnings and errors are
# logged.
_QUIET_COMMANDS = frozenset({"conformance"})


@app.callback()
def _configure(
    ctx: typer.Context,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level",
            help="Log verbosity (logs go to stderr; default info, for conformance warning).",
        ),
    ] = None,
) -> None:
    from gateweave import logs

    if log_level is None:
        log_level = LogLevel.warning if ctx.invoked_subcommand in _QUIET_COMMANDS else LogLevel.info
    logs.configure(log_level.value)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes any dict (protobuf's JSON form has OrderedDicts) as a mapping."""


_Dumper.add_multi_representer(dict, yaml.SafeDumper.represent_dict)


def _dump(data: Any, output: Output, wrap_items: bool) -> None:
    if output is Output.json:
        payload = {"items": data} if wrap_items else data
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    elif wrap_items:
        sys.stdout.write(
            yaml.dump_all(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
            if data
            else ""
        )
    else:
        sys.stdout.write(yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False))


def _problems(
    statuses: dict[tuple[str, str, str], dict[str, Any]], sources: dict[Key, str]
) -> list[str]:
    """One located line per False Accepted/ResolvedRefs/Programmed condition: what the user should
    look at.
    """
    lines: list[str] = []
    for (kind, ns, name), status in sorted(statuses.items()):
        where = sources.get(Key(kind, ns, name), "")
        who = f"{kind} {ns}/{name}" if ns else f"{kind} {name}"
        scopes: list[tuple[str, list[dict[str, Any]]]] = [("", status.get("conditions", []))]
        scopes += [
            (f"listener {lst['name']}: ", lst.get("conditions", []))
            for lst in status.get("listeners", [])
        ]
        for entry in status.get("parents", []) + status.get("ancestors", []):
            ref = entry.get("parentRef") or entry.get("ancestorRef") or {}
            section = f"/{ref['sectionName']}" if ref.get("sectionName") else ""
            scopes.append(
                (
                    f"parent {ref.get('kind', '')} "
                    f"{ref.get('namespace', ns)}/{ref.get('name', '')}{section}: ",
                    entry.get("conditions", []),
                )
            )
        for prefix, conds in scopes:
            for cond in conds:
                bad = (
                    cond["status"] == "False"
                    if cond["type"] in ("Accepted", "ResolvedRefs", "Programmed")
                    else cond["type"] == "Conflicted" and cond["status"] == "True"
                )
                if bad:
                    lines.append(
                        f"{where + ': ' if where else ''}{who}: "
                        f"{prefix}{cond['type']}={cond['status']} {cond['reason']}: "
                        f"{cond['message']}"
                    )
    return lines


@app.command("translate")
def translate_cmd(
    files: Annotated[
        list[str],
        typer.Option("-f", "--filename", help="File, directory (recursive) or - for stdin."),
    ],
    output: Annotated[Output, typer.Option("-o", "--output")] = Output.yaml,
    controller_name: ControllerOpt = DEFAULT_CONTROLLER_NAME,
    show: Annotated[
        Show,
        typer.Option(
            "--show", help="status: objects with status; ir: the IRs; xds: Envoy resources."
        ),
    ] = Show.status,
    address_pool: PoolOpt = "127.10.0.0/16",
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Do not list rejected conditions on stderr.")
    ] = False,
) -> None:
    """Translate manifests offline and print every Gateway API object with its computed status."""
    from gateweave.offline import translate_paths
    from gateweave.output import objects_with_status

    _check_pool(address_pool)
    options = TranslateOptions(controller_name=controller_name, address_pool=address_pool)
    run = translate_paths(files, options)
    for load_error in run.load_errors:
        _err(f"error: {load_error}")
    if run.load_errors:
        raise typer.Exit(2)
    for rejected in run.rejected:
        _err(f"error: {rejected}")
    assert run.result is not None
    if show is Show.status:
        _dump(
            objects_with_status(run.objects, run.result.statuses, controller_name),
            output,
            wrap_items=True,
        )
    elif show is Show.ir:
        _dump(
            {
                "infra": msgspec.to_builtins(run.result.infra),
                "xds": msgspec.to_builtins(run.result.xds),
            },
            output,
            wrap_items=False,
        )
    else:
        from gateweave.xds.dump import dump_resources

        _dump(
            {name: dump_resources(gw) for name, gw in sorted(run.result.xds.items())},
            output,
            wrap_items=False,
        )
    if not quiet:
        for line in _problems(run.result.statuses, run.sources):
            _err(f"warning: {line}")
    raise typer.Exit(1 if run.rejected else 0)


@app.command("serve")
def serve_cmd(
    config_dir: Annotated[
        str | None,
        typer.Option("--config-dir", help="Directory of manifests to watch (file provider)."),
    ] = None,
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of the admin API (loopback).")
    ] = "127.0.0.1:19000",
    controller_name: ControllerOpt = DEFAULT_CONTROLLER_NAME,
    no_dataplane: Annotated[
        bool, typer.Option("--no-dataplane", help="Translate and publish status only: no Envoy.")
    ] = False,
    address_pool: PoolOpt = "127.10.0.0/16",
    default_address: DefaultAddressOpt = "pool",
    provider: Annotated[
        str,
        typer.Option(
            "--provider",
            help="Where objects come from: file (--config-dir) or kubernetes (the API server).",
        ),
    ] = "file",
    kubeconfig: Annotated[
        str | None,
        typer.Option(
            "--kubeconfig",
            help=(
                "kubeconfig file (kubernetes provider; default: in-cluster, then $KUBECONFIG or "
                "~/.kube/config)."
            ),
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="Watch namespaced kinds in this namespace only (kubernetes provider).",
        ),
    ] = None,
    leader_elect: Annotated[
        bool,
        typer.Option(
            "--leader-elect",
            help=(
                "Only the holder of a coordination.k8s.io Lease writes status (kubernetes "
                "provider)."
            ),
        ),
    ] = False,
    dataplane_kind: Annotated[
        str,
        typer.Option(
            "--dataplane",
            help=(
                "With --provider kubernetes: none (default), kubernetes (an Envoy "
                "Deployment+Service per Gateway) or host (Envoy processes here)."
            ),
        ),
    ] = "none",
    xds_host: Annotated[
        str,
        typer.Option(
            "--xds-host",
            help=(
                "With --dataplane kubernetes: the host Envoy pods reach this controller's xDS "
                "server at."
            ),
        ),
    ] = "gateweave.gateweave-system.svc",
    xds_port: Annotated[
        int,
        typer.Option(
            "--xds-port",
            help="With --dataplane kubernetes: the xDS server's port (bound on 0.0.0.0).",
        ),
    ] = 18000,
    xds_plaintext: Annotated[
        bool,
        typer.Option(
            "--xds-plaintext",
            help=(
                "With --dataplane kubernetes: plain-text xDS, any client served (development only; "
                "default: mutual TLS with gateweave's CA)."
            ),
        ),
    ] = False,
    state_dir: StateDirOpt = None,
    check_incremental: CheckIncrementalOpt = False,
    access_log: Annotated[
        str,
        typer.Option(
            "--access-log",
            help=(
                "The access log of every Gateway whose GatewayParameters set none (JSON lines): "
                "file (in its Envoy's directory; `gateweave logs` reads it; in Kubernetes the "
                "pod's stdout), stdout (Envoy's) or off."
            ),
        ),
    ] = "file",
    tracing_endpoint: Annotated[
        str | None,
        typer.Option(
            "--tracing-endpoint",
            help=(
                "HOST:PORT of an OpenTelemetry collector (OTLP/gRPC): Envoy traces requests to it, "
                "unless a Gateway's GatewayParameters say otherwise. Default: no tracing."
            ),
        ),
    ] = None,
    tracing_sampling: Annotated[
        float,
        typer.Option(
            "--tracing-sampling", help="With --tracing-endpoint: the percentage of requests traced."
        ),
    ] = 100.0,
    admin_token_file: AdminTokenFileOpt = None,
    admin_metrics_auth: Annotated[
        bool,
        typer.Option(
            "--admin-metrics-auth",
            help="/metrics needs the admin token too (default: open, like /healthz and /readyz).",
        ),
    ] = False,
) -> None:
    """Watch a directory of manifests (or the Kubernetes API) and run Envoy for the Gateways it
    defines.

    The Envoys outlive this process if it dies, and the next serve on the same state directory
    adopts them; Ctrl-C or SIGTERM drains and stops them."""
    from gateweave import app as gw_app

    _check_pool(address_pool)
    check_default_address(default_address)
    telemetry = _telemetry(access_log, tracing_endpoint, tracing_sampling)
    dataplane: gw_app.HostDataplane | gw_app.KubeDataplane | None = gw_app.HostDataplane(
        state_dir=state_dir
    )
    source: gw_app.FileSettings | gw_app.KubeSettings
    if provider == "kubernetes":
        if dataplane_kind not in ("none", "host", "kubernetes"):
            _err(f"error: unknown data plane {dataplane_kind!r} (none, kubernetes or host)")
            raise typer.Exit(2)
        source = gw_app.KubeSettings(
            kubeconfig=kubeconfig, namespace=namespace, leader_elect=leader_elect
        )
        if dataplane_kind == "none":
            dataplane = None
        elif dataplane_kind == "kubernetes":
            dataplane = gw_app.KubeDataplane(
                xds_host=xds_host, xds_port=xds_port, xds_plaintext=xds_plaintext
            )
    elif provider == "file":
        if config_dir is None:
            _err("error: --config-dir is required with the file provider")
            raise typer.Exit(2)
        if kubeconfig or namespace or leader_elect or dataplane_kind != "none":
            _err(
                "error: --kubeconfig, --namespace, --leader-elect and --dataplane need --provider "
                "kubernetes"
            )
            raise typer.Exit(2)
        source = gw_app.FileSettings(config_dir)
    else:
        _err(f"error: unknown provider {provider!r} (file or kubernetes)")
        raise typer.Exit(2)
    settings = gw_app.Settings(
        provider=source,
        dataplane=None if no_dataplane else dataplane,
        controller_name=controller_name,
        address_pool=address_pool,
        default_address=default_address,
        admin=gw_app.AdminSettings(
            admin_address,
            token_file=admin_token_file,
            token=_env_token(),
            metrics_auth=admin_metrics_auth,
        ),
        runtime=gw_app.RuntimeSettings(check_incremental=check_incremental),
        telemetry=telemetry,
    )
    _serve(settings)


def _env_token() -> str | None:
    """The admin token serve takes from ``$GATEWEAVE_ADMIN_TOKEN`` (without --admin-token-file)."""
    from gateweave.admintoken import TOKEN_ENV

    return os.environ.get(TOKEN_ENV, "").strip() or None


def _serve(settings: Any, hooks: Any = None) -> None:
    """Run :func:`gateweave.app.run`; an operator's mistake ends it with one line and exit 2."""
    from gateweave import app as gw_app
    from gateweave.errors import OperatorError

    try:
        asyncio.run(gw_app.run(settings, hooks))
    except OperatorError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(2) from None


def _telemetry(access_log: str, tracing_endpoint: str | None, sampling: float) -> ir.Telemetry:
    if access_log not in ir.ACCESS_LOG_SINKS:
        _err(f"error: --access-log {access_log!r}: one of {', '.join(ir.ACCESS_LOG_SINKS)}")
        raise typer.Exit(2)
    if not 0 <= sampling <= 100:
        _err(f"error: --tracing-sampling {sampling}: a percentage, 0 to 100")
        raise typer.Exit(2)
    tracing = None
    if tracing_endpoint is not None:
        from gateweave.admin import parse_address

        try:
            host, port = parse_address(tracing_endpoint)
        except ValueError:
            _err(f"error: --tracing-endpoint {tracing_endpoint!r} is not HOST:PORT")
            raise typer.Exit(2) from None
        if not 0 < port < 65536:
            _err(f"error: --tracing-endpoint {tracing_endpoint!r}: port out of range")
            raise typer.Exit(2)
        tracing = ir.Tracing(collector_host=host, collector_port=port, sampling_percent=sampling)
    return ir.Telemetry(access_log=access_log, tracing=tracing)


def _client_token(
    token_file: str | None, config_dir: str | None, state_dir: str | None = None
) -> str | None:
    """The admin token this client sends (gateweave/admintoken.py), ``None`` if none is found."""
    from gateweave.admintoken import AdminTokenError, client_token

    try:
        return client_token(token_file, config_dir, state_dir)
    except AdminTokenError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(2) from None


def _unauthorized(admin_address: str) -> None:
    from gateweave.admintoken import HOW_TO_PASS

    _err(
        f"error: the gateweave admin API at {admin_address} refused this client's token (401): "
        f"{HOW_TO_PASS}"
    )
    raise typer.Exit(2)


def _fetch(admin_address: str, path: str, token: str | None) -> Any:
    import httpx

    from gateweave.admintoken import client_headers

    try:
        resp = httpx.get(
            f"http://{admin_address}{path}", headers=client_headers(token), timeout=5.0
        )
        if resp.status_code == 401:
            _unauthorized(admin_address)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        _err(f"error: cannot reach the gateweave admin API at {admin_address}: {exc}")
        raise typer.Exit(2) from None
    return resp.json()


@app.command("status")
def status_cmd(
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of a running gateweave.")
    ] = "127.0.0.1:19000",
    files: Annotated[
        list[str] | None,
        typer.Option("-f", "--filename", help="Translate these files instead of asking a server."),
    ] = None,
    controller_name: ControllerOpt = DEFAULT_CONTROLLER_NAME,
    state_dir: Annotated[
        str | None,
        typer.Option(
            "--state-dir",
            help=(
                "List the Envoys of this state directory and whether a controller runs them (no "
                "server needed)."
            ),
        ),
    ] = None,
    admin_token_file: ClientTokenFileOpt = None,
    config_dir: ServedDirOpt = None,
) -> None:
    """A table of Gateways, listeners, routes (with request and error rates, from a server) and
    Envoy Gateway Backends with their conditions, and the configuration errors;
    with --state-dir, the Envoys of a state directory (those running without a controller among
    them)."""
    from gateweave.statusview import render

    if state_dir is not None:
        from gateweave.infra.statedir import survey
        from gateweave.statusview import render_envoys

        if not os.path.isdir(state_dir):
            _err(f"error: state directory {state_dir} does not exist")
            raise typer.Exit(2)
        render_envoys(survey(state_dir))
        return
    traffic: dict[str, Any] | None = None  # rates: only a running server has them
    if files:
        from gateweave.offline import translate_paths
        from gateweave.output import objects_with_status

        run = translate_paths(files, TranslateOptions(controller_name=controller_name))
        for problem in [*run.load_errors, *run.rejected]:
            _err(f"error: {problem}")
        assert run.result is not None
        items = objects_with_status(run.objects, run.result.statuses, controller_name)
        errors = [{"source": e.source, "message": e.message} for e in run.load_errors]
        errors += [
            {
                "source": e.source,
                "kind": e.kind,
                "namespace": e.namespace,
                "name": e.name,
                "message": e.message,
            }
            for e in run.rejected
        ]
    else:
        token = _client_token(admin_token_file, config_dir)
        items = _fetch(admin_address, "/api/objects", token)["items"]
        errors = _fetch(admin_address, "/api/errors", token)["items"]
        traffic = _fetch(admin_address, "/api/traffic", token)
    render(items, controller_name, errors=errors, traffic=traffic)


@app.command("logs")
def logs_cmd(
    gateway: Annotated[str, typer.Argument(help="The Gateway, NAMESPACE/NAME.")],
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing what is appended.")
    ] = False,
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of a running gateweave.")
    ] = "127.0.0.1:19000",
    admin_token_file: ClientTokenFileOpt = None,
    config_dir: ServedDirOpt = None,
    state_dir: Annotated[
        str | None,
        typer.Option(
            "--state-dir",
            help="The server's state directory: its admin-token authenticates this client.",
        ),
    ] = None,
) -> None:
    """A Gateway's access log (JSON lines, as its Envoy wrote them), from a running server."""
    import httpx

    namespace, sep, name = gateway.partition("/")
    if not sep or not namespace or not name or "/" in name:
        _err(f"error: {gateway!r} is not NAMESPACE/NAME")
        raise typer.Exit(2)
    url = f"http://{admin_address}/api/logs/{namespace}/{name}" + ("?follow=1" if follow else "")
    from gateweave.admintoken import client_headers

    headers = client_headers(_client_token(admin_token_file, config_dir, state_dir))
    out = sys.stdout.buffer
    try:
        # No read timeout when following: the server sends only what Envoy appends.
        with httpx.stream(
            "GET", url, headers=headers, timeout=httpx.Timeout(5.0, read=None if follow else 30.0)
        ) as resp:
            if resp.status_code == 401:
                _unauthorized(admin_address)
            if resp.status_code != 200:
                resp.read()
                try:
                    message = resp.json()["error"]
                except (ValueError, KeyError, TypeError):
                    message = f"HTTP {resp.status_code}"
                _err(f"error: {message}")
                raise typer.Exit(1)
            for chunk in resp.iter_bytes():
                out.write(chunk)
                out.flush()
    except httpx.HTTPError as exc:
        _err(f"error: cannot reach the gateweave admin API at {admin_address}: {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@app.command("explain")
def explain_cmd(
    kind: Annotated[
        str,
        typer.Argument(
            help=(
                "Gateway, ListenerSet, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute, "
                "Backend, or an Envoy Gateway policy kind."
            )
        ),
    ],
    name: Annotated[str, typer.Argument(help="NAMESPACE/NAME (NAME alone: namespace default).")],
    files: Annotated[
        list[str] | None,
        typer.Option("-f", "--filename", help="Explain from these files instead of a server."),
    ] = None,
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of a running gateweave.")
    ] = "127.0.0.1:19000",
    controller_name: ControllerOpt = DEFAULT_CONTROLLER_NAME,
    admin_token_file: ClientTokenFileOpt = None,
    config_dir: ServedDirOpt = None,
) -> None:
    """Why a route is (not) attached to each listener, why a Gateway's listeners are (not)
    programmed,
    what an Envoy Gateway Backend resolves to and which routes use it, which Envoy Gateway policies
    govern a route or Gateway, or what became of a policy."""
    from gateweave.api.kinds import KINDS

    canonical = {k.lower(): k for k in KINDS}
    kind = canonical.get(kind.lower().rstrip("s"), canonical.get(kind.lower(), kind))
    namespace, _, short = name.rpartition("/")
    namespace = namespace or "default"
    if files:
        from gateweave.explain import explain
        from gateweave.offline import read_objects
        from gateweave.snapshot import Snapshot

        run = read_objects(files)
        for problem in [*run.load_errors, *run.rejected]:
            _err(f"error: {problem}")
        snapshot = Snapshot.from_objects(d.model for d in run.objects)
        lines = explain(
            snapshot, TranslateOptions(controller_name=controller_name), kind, namespace, short
        )
    else:
        token = _client_token(admin_token_file, config_dir)
        lines = _fetch(admin_address, f"/api/explain/{kind}/{namespace}/{short}", token)["lines"]
    for line in lines:
        typer.echo(line)
    if lines and lines[0].endswith("not found"):
        raise typer.Exit(1)


@app.command("dashboard")
def dashboard_cmd(
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of a running gateweave.")
    ] = "127.0.0.1:19000",
    admin_token_file: ClientTokenFileOpt = None,
    config_dir: ServedDirOpt = None,
) -> None:
    """Print the dashboard's URL with the admin token (opening it once logs the browser in)."""
    from urllib.parse import quote

    token = _client_token(admin_token_file, config_dir)
    if token is None:
        _unauthorized(admin_address)
    _fetch(admin_address, "/api/errors", token)  # the server is there and takes this token
    typer.echo(f"http://{admin_address}/?token={quote(token or '', safe='')}")


@app.command("quickstart")
def quickstart_cmd(
    config_dir: Annotated[
        str, typer.Option("--config-dir", help="The example to serve.")
    ] = "examples/quickstart",
    admin_address: Annotated[
        str, typer.Option("--admin-address", help="HOST:PORT of the admin API (loopback).")
    ] = "127.0.0.1:19000",
    backend: Annotated[
        str, typer.Option("--backend", help="HOST:PORT of the demo backend the example routes to.")
    ] = "127.0.0.1:18000",
    once: Annotated[
        bool,
        typer.Option("--once", help="Exit after proving the route works (default: keep serving)."),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the route to answer.")
    ] = 60.0,
    check_incremental: CheckIncrementalOpt = False,
    state_dir: StateDirOpt = None,
    admin_token_file: AdminTokenFileOpt = None,
) -> None:
    """Start the demo backend and serve the quickstart with a real Envoy; print a curl that answers
    through it.
    """
    from gateweave import app as gw_app
    from gateweave.demo import start_demo_backend
    from gateweave.quickstart import prove

    if not os.path.isdir(config_dir):
        _err(
            f"error: {config_dir} is not a directory (run from the repository root, or pass "
            "--config-dir)"
        )
        raise typer.Exit(2)
    host, _, port = backend.rpartition(":")
    try:
        demo = start_demo_backend(host, int(port))
    except OSError as exc:
        _err(f"error: cannot start the demo backend on {backend}: {exc}")
        raise typer.Exit(2) from None
    stop = asyncio.Event()
    outcome: dict[str, Any] = {}

    def started(running: gw_app.App) -> None:
        async def check() -> None:
            try:
                curl, code, body = await prove(running, timeout)
            except TimeoutError as exc:
                outcome["error"] = str(exc)
                stop.set()
                return
            typer.echo(
                f"\nEnvoy is serving the quickstart route. Try it:\n\n  {curl}\n\nanswer "
                f"({code}):\n{body}"
            )
            if once:
                stop.set()
            else:
                typer.echo(
                    f"gateweave is serving {config_dir} (admin API {running.admin.url}, dashboard"
                    f" {running.admin.dashboard_url}); edit the files to change it, Ctrl-C to stop."
                )

        outcome["task"] = asyncio.get_running_loop().create_task(check())

    settings = gw_app.Settings(
        provider=gw_app.FileSettings(config_dir),
        dataplane=gw_app.HostDataplane(state_dir=state_dir),
        admin=gw_app.AdminSettings(admin_address, token_file=admin_token_file, token=_env_token()),
        runtime=gw_app.RuntimeSettings(check_incremental=check_incremental),
    )
    try:
        _serve(settings, gw_app.Hooks(stop=stop, on_started=started))
    finally:
        demo.shutdown()
    if "error" in outcome:
        _err(f"error: {outcome['error']}")
        raise typer.Exit(1)


# `gateweave conformance` and `gateweave bench` belong to the development harnesses
# (harness/ in the source tree, installed by `python3 dev.py`), not to the product.
HARNESS_COMMANDS = {
    "bench": "gateweave_bench.command",
    "conformance": "gateweave_conformance.command",
}


def _harness_missing(name: str) -> Callable[[], None]:
    def missing() -> None:
        _err(
            f"error: `gateweave {name}` is part of gateweave's development harness, which is not "
            "installed here;"
            " in a clone of the repository, `python3 dev.py` installs it (or: pip install -e "
            "harness)"
        )
        raise typer.Exit(2)

    return missing


def _add_harness_commands() -> None:
    for name, module_name in HARNESS_COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name.partition(".")[0]:
                raise  # the harness is there but broken: say so
            app.command(
                name,
                help=(
                    "Not installed here: part of the development harness (harness/ in the source "
                    "tree)."
                ),
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            )(_harness_missing(name))
        else:
            app.command(name)(module.command)


_add_harness_commands()


@app.command("version")
def version_cmd() -> None:
    """Print gateweave's version."""
    typer.echo(__version__)


def main() -> None:
    """The ``gateweave`` command: a usage mistake (an unknown flag, a bad value, an extra
    argument such as ``--once true``) is one ``error:`` line and exit 2, as any other."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # click's usage errors and the like
        ctx = getattr(exc, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        _err(f"error: {exc.format_message()}{hint}")
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
