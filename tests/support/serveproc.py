"""``gateweave serve`` as a user runs it: a real process, its admin API on a free port, its
stderr drained by a thread (kept for failure messages)."""

from __future__ import annotations

import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

GATEWEAVE = str(Path(sys.executable).with_name("gateweave"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ServeProcess:
    """``gateweave serve --admin-address 127.0.0.1:0 ARGS...``; ``url`` once its admin API listens.

    Without ``--state-dir`` in ``args`` (nor ``--no-dataplane``) it runs on a temporary state
    directory, removed by :meth:`stop`: a test leaves none behind. Its admin token is in a
    temporary file (``--admin-token-file``) unless ``args`` give one: :attr:`headers` send it."""

    def __init__(self, *args: str, token_file: bool = True) -> None:
        """``token_file``: False runs serve without ``--admin-token-file`` (it writes its own
        token to its state directory)."""
        self.lines: list[str] = []
        self.url: str | None = None
        self._found = threading.Event()
        self._state: str | None = None
        if "--state-dir" not in args and "--no-dataplane" not in args:
            self._state = tempfile.mkdtemp(prefix="gateweave-state-")
            args = (*args, "--state-dir", self._state)
        self._secrets = tempfile.mkdtemp(prefix="gateweave-token-")
        self.token = secrets.token_urlsafe(16)
        self.token_file = Path(self._secrets) / "admin-token"
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)
        if token_file and "--admin-token-file" not in args:
            args = (*args, "--admin-token-file", str(self.token_file))
        self.proc = subprocess.Popen(
            [GATEWEAVE, "serve", "--admin-address", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            line = ANSI.sub("", line.rstrip("\n"))
            self.lines.append(line)
            m = re.search(r"admin API listening.*url=(\S+)", line)
            if m and self.url is None:
                self.url = m.group(1)
                self._found.set()
        self._found.set()

    @property
    def headers(self) -> dict[str, str]:
        """What authenticates a client to its admin API."""
        return {"Authorization": f"Bearer {self.token}"}

    def log(self) -> str:
        return "\n".join(self.lines[-40:])

    def wait_listening(self, timeout: float = 30) -> str:
        """The admin API's URL, once it listens."""
        self._found.wait(timeout)
        assert self.url is not None, f"serve did not start (exit {self.proc.poll()}):\n{self.log()}"
        return self.url

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 10) -> None:
        """Send ``sig`` (SIGTERM: an explicit stop) and wait; SIGKILL if it does not end, and
        then fail: serve stops in well under a second, so one still running is a hung stop."""
        hung = False
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                hung = True
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        if self._state is not None:
            shutil.rmtree(self._state, ignore_errors=True)
        shutil.rmtree(self._secrets, ignore_errors=True)
        assert not hung, f"serve did not stop within {timeout} s of {sig.name}:\n{self.log()}"
