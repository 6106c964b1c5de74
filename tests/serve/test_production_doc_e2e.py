"""docs/production.md and deploy/systemd/gateweave.service cannot drift from gateweave.

* The unit passes ``systemd-analyze verify``; what the docs say of it holds: serve's
  ``ExecStart`` options exist in the CLI, the state directory systemd makes is the one serve
  is given, ``KillMode=process`` (Envoys outlive a crash, ``stop`` lets serve drain them),
  ``Restart=on-failure``, the capability for ports below 1024; the docs' table names every
  setting of the unit.
* Every manifest in the docs is accepted as written (``gateweave translate``'s reading).
* The docs run: the files they write (fenced blocks ``yaml file=PATH``) in a configuration
  directory, the unit's ``ExecStart`` run in a network namespace the test makes as an
  unprivileged user holding only the unit's capabilities (its Gateway binds port 80), the
  backend's DNS name in the namespace's hosts file, and the checks they give (fenced blocks
  ``sh check``) run line by line: the ``curl`` gets the backend's answer through Envoy,
  ``gateweave status`` lists the Gateway Programmed on every interface. Then the upgrade the
  docs give: serve alone killed, started again as systemd would, adopts the Envoy that kept
  serving.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from gateweave import cli
from gateweave.offline import read_objects
from gateweave_bench import harness as h
from tests.support.data import ROOT
from tests.support.netns import Netns
from tests.support.netserve import Serve, until

DOC = ROOT / "docs" / "production.md"
UNIT = ROOT / "deploy" / "systemd" / "gateweave.service"
BIN = Path(sys.executable).parent
NOBODY = 65534


# ---------------------------------------------------------------- reading the unit and the doc


def unit_settings(path: Path = UNIT) -> dict[str, dict[str, str]]:
    """The unit's settings by section (a key given twice: its last value, as systemd reads
    scalar settings)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path}: not a setting: {raw!r}"
        current[key.strip()] = value.strip()
    return sections


@dataclass(frozen=True)
class Block:
    lang: str
    attrs: str  # the rest of the info string: "file=PATH", "check"
    text: str


def blocks(path: Path = DOC) -> list[Block]:
    found = re.findall(
        r"^```(\S*)[ \t]*([^\n]*)\n(.*?)^```[ \t]*$", path.read_text(), re.MULTILINE | re.DOTALL
    )
    return [Block(lang, attrs.strip(), text) for lang, attrs, text in found]


def files(doc: list[Block]) -> dict[str, str]:
    return {b.attrs.removeprefix("file="): b.text for b in doc if b.attrs.startswith("file=")}


def checks(doc: list[Block]) -> list[str]:
    return [line for b in doc if b.attrs == "check" for line in b.text.splitlines() if line.strip()]


def serve_options() -> set[str]:
    group = typer.main.get_command(cli.app)
    assert isinstance(group, typer.core.TyperGroup)
    command = group.commands["serve"]
    return {opt for param in command.params for opt in getattr(param, "opts", [])}


# ---------------------------------------------------------------- the unit


def test_the_unit_is_what_the_docs_say() -> None:
    unit = unit_settings()
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == "/opt/gateweave/bin/gateweave" and argv[1] == "serve"
    options = serve_options()
    for arg in argv[2:]:
        if arg.startswith("--"):
            assert arg.split("=")[0] in options, f"ExecStart: serve has no option {arg}"
    args = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert (
        args["--state-dir"] == f"/var/lib/{service['StateDirectory']}"
    )  # systemd makes it for the user
    assert service["StateDirectoryMode"] == "0700"  # as serve requires of its state directory
    assert args["--config-dir"] == "/etc/gateweave" and "/etc/gateweave/web.yaml" in files(blocks())
    assert service["KillMode"] == "process"
    assert service["Restart"] == "on-failure"
    assert (
        service["AmbientCapabilities"] == service["CapabilityBoundingSet"] == "CAP_NET_BIND_SERVICE"
    )
    assert service["User"] == "gateweave" and "useradd --system" in DOC.read_text()
    text = DOC.read_text()
    table = text[text.index("| setting | why |") :]
    for key in service:
        assert f"`{key}=" in table, f"docs/production.md does not say why the unit sets {key}"


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """``systemd-analyze verify`` (offline; it checks that ExecStart's program exists, so the
    copy verified names this checkout's gateweave)."""
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, (
        "systemd-analyze (Debian's systemd package) is needed to check the unit"
    )
    copy = tmp_path / "gateweave.service"
    copy.write_text(
        UNIT.read_text().replace("/opt/gateweave/bin/gateweave", str(BIN / "gateweave"))
    )
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done


def test_every_manifest_in_the_docs_is_accepted(tmp_path: Path) -> None:
    manifests = [b for b in blocks() if b.lang == "yaml"]
    assert len(manifests) >= 2
    for i, block in enumerate(manifests):
        path = tmp_path / f"{i}.yaml"
        path.write_text(block.text)
        run = read_objects([str(path)])
        assert run.objects and not run.load_errors and not run.rejected, (
            block.text,
            run.load_errors,
            run.rejected,
        )


# ---------------------------------------------------------------- the docs, run


class UnitServe(Serve):
    """The unit's ``ExecStart`` (``argv``) in ``ns`` as ``NOBODY``, holding only the unit's
    capabilities, as systemd would run it (``state``: the state directory ``argv`` names)."""

    def __init__(
        self, ns: Netns, argv: list[str], service: dict[str, str], state: Path, log: Path
    ) -> None:
        self.ns, self.log, self.state = ns, log, state
        caps = ",".join(
            "+" + c.strip().lower().removeprefix("cap_")
            for c in service["AmbientCapabilities"].split()
        )
        bounding = ",".join(
            "+" + c.strip().lower().removeprefix("cap_")
            for c in service["CapabilityBoundingSet"].split()
        )
        prefix = [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            f"--inh-caps=-all,{caps}",
            f"--ambient-caps=-all,{caps}",
            f"--bounding-set=-all,{bounding}",
        ]
        if service.get("NoNewPrivileges") == "yes":
            prefix.append("--no-new-privs")
        with log.open("wb") as out:
            self.proc = ns.popen([*prefix, *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=out)


@pytest.fixture
def dirs() -> Iterator[dict[str, Path]]:
    """The configuration directory (readable by NOBODY) and the state directory (NOBODY's,
    0700, as StateDirectory= makes it)."""
    config = Path(tempfile.mkdtemp(prefix="gw-etc-"))
    state = Path(tempfile.mkdtemp(prefix="gw-state-"))
    try:
        config.chmod(0o755)
        os.chown(state, NOBODY, NOBODY)
        state.chmod(0o700)
        yield {"/etc/gateweave": config, "/var/lib/gateweave": state}
    finally:
        shutil.rmtree(config, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


def backend_of(manifests: dict[str, str]) -> tuple[str, int]:
    """The fqdn endpoint (host name, port) of the docs' Backend."""
    for text in manifests.values():
        for obj in yaml.safe_load_all(text):
            if obj and obj["kind"] == "Backend":
                fqdn = obj["spec"]["endpoints"][0]["fqdn"]
                return fqdn["hostname"], int(fqdn["port"])
    raise AssertionError("the docs' configuration has no Backend")


def test_the_docs_run(dirs: dict[str, Path], tmp_path: Path) -> None:
    doc = blocks()
    manifests = files(doc)
    mapping = {
        "/opt/gateweave/bin/gateweave": str(BIN / "gateweave"),
        **{k: str(v) for k, v in dirs.items()},
    }

    def mapped(text: str) -> str:
        for path, here in mapping.items():
            text = text.replace(path, here)
        return text

    for path, text in manifests.items():
        target = Path(mapped(path))
        assert target.parent == dirs["/etc/gateweave"], (
            f"{path} is not in the configuration directory"
        )
        target.write_text(text)
        target.chmod(0o644)
    name, port = backend_of(manifests)
    ns = Netns({name: "127.0.0.51"})
    backend: Any = None
    serve: UnitServe | None = None
    try:
        backend = ns.call(h.NameServer, "app", "127.0.0.51", port)
        service = unit_settings()["Service"]
        argv = [mapped(a) for a in shlex.split(service["ExecStart"])]
        serve = UnitServe(ns, argv, service, dirs["/var/lib/gateweave"], tmp_path / "serve.log")
        env = {
            **os.environ,
            "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "COLUMNS": "200",
        }

        def run(line: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["ip", "netns", "exec", ns.name, "bash", "-c", mapped(line)],
                capture_output=True,
                text=True,
                env=env,
                timeout=30,
            )

        lines = checks(doc)
        assert [line.split()[:2] for line in lines] == [["curl", "-sS"], ["gateweave", "status"]], (
            lines
        )
        curl, status = lines
        until(
            lambda: run(curl).stdout == "app", 60, "the docs' curl gets the backend's answer", serve
        )
        assert all(Path(f"/proc/{pid}").stat().st_uid == NOBODY for pid in serve.envoys())
        shown = run(status)
        assert shown.returncode == 0, shown
        row = next(
            line
            for line in shown.stdout.splitlines()
            if "default/web" in line and "0.0.0.0" in line
        )
        assert row.split("│")[4:6] == [" True     ", " True       "], row  # ACCEPTED, PROGRAMMED
        assert "No configuration errors." in shown.stdout

        # the upgrade: serve alone is killed (systemctl kill --kill-whom=main), systemd starts
        # it again (Restart=on-failure); the Envoys kept serving, and the new serve adopts them
        assert "systemctl kill --kill-whom=main --signal=SIGKILL gateweave" in DOC.read_text()
        envoys = sorted(serve.envoys())
        serve.proc.kill()
        serve.proc.wait(10)
        assert run(curl).stdout == "app"  # no controller: the Envoy serves on
        serve = UnitServe(ns, argv, service, dirs["/var/lib/gateweave"], tmp_path / "restarted.log")
        until(
            lambda: "Envoy adopted" in serve.log.read_text(),
            60,
            "the restarted serve adopts the Envoy",
            serve,
        )
        assert '"Envoy adopted" for every Gateway' in DOC.read_text()
        assert sorted(serve.envoys()) == envoys
        assert run(curl).stdout == "app"
    finally:
        if serve is not None:
            serve.stop()
        if backend is not None:
            ns.call(backend.close)
        ns.close()
