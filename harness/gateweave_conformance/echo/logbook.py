"""The log lines of one replica: kept in memory, optionally written to a file and stdout."""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class EchoLog:
    """Append-only log; mirror checks read ``lines`` (upstream reads the pod's stdout)."""

    def __init__(self, path: str | None = None, stdout: bool = False) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._file: TextIO | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._stdout = stdout

    def write(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
            if self._stdout:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def since(self, index: int) -> list[str]:
        """Lines written after the first ``index`` lines (a request window's start)."""
        with self._lock:
            return self._lines[index:]

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
