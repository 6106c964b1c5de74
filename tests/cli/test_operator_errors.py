"""Every operator mistake is one ``error: ...`` line on stderr and exit 2, never a traceback:
the real ``gateweave`` command, as an operator runs it."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateweave.infra.statedir import StateDir

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWEAVE, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert says in lines[0], lines[0]


@contextmanager
def held_port() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def held_state(path: Path) -> Iterator[None]:
    state = StateDir.open(path)
    try:
        yield
    finally:
        state.close()


def test_config_dir_missing_or_a_file(tmp_path: Path) -> None:
    assert_one_line_error(run("serve", "--config-dir", str(tmp_path / "nope")), "does not exist")
    (tmp_path / "file.yaml").write_text("")
    assert_one_line_error(
        run("serve", "--config-dir", str(tmp_path / "file.yaml")), "is not a directory"
    )


def test_admin_address_in_use(tmp_path: Path) -> None:
    with held_port() as address:
        done = run(
            "serve", "--no-dataplane", "--config-dir", str(tmp_path), "--admin-address", address
        )
    assert_one_line_error(done, f"cannot listen on the admin address {address}")


def test_another_serve_on_the_same_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with held_state(state):
        done = run(
            "serve",
            "--config-dir",
            str(tmp_path),
            "--state-dir",
            str(state),
            "--admin-address",
            "127.0.0.1:0",
        )
    assert_one_line_error(done, "another gateweave serve")


def test_unusable_state_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = run(
        "serve",
        "--config-dir",
        str(tmp_path),
        "--state-dir",
        str(tmp_path / "file" / "state"),
        "--admin-address",
        "127.0.0.1:0",
    )
    assert_one_line_error(done, "state directory")


@pytest.mark.parametrize(
    "kubeconfig",
    [
        lambda tmp: str(tmp / "nope"),
        lambda tmp: (tmp / "kc").write_text("a: [") and str(tmp / "kc"),
    ],
    ids=["missing", "not-a-kubeconfig"],
)
def test_bad_kubeconfig(tmp_path: Path, kubeconfig: Callable[[Path], str]) -> None:
    path = kubeconfig(tmp_path)
    assert_one_line_error(
        run("serve", "--provider", "kubernetes", "--kubeconfig", path), f"kubeconfig {path}"
    )


@pytest.mark.parametrize(
    "args",
    [("quickstart", "--once", "true"), ("serve", "--no-such-flag"), ("serve", "--config-dir")],
    ids=["extra-argument", "unknown-flag", "missing-value"],
)
def test_bad_flags(args: tuple[str, ...]) -> None:
    assert_one_line_error(run(*args), "")
