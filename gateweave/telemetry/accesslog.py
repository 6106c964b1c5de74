"""A Gateway's access log file, read as written (``gateweave logs``, through the admin API).

Envoy appends one JSON line per request or session; :func:`read` yields the file's bytes in
chunks, each read in a worker thread (never on the event loop), and with ``follow`` keeps
polling for what is appended (a file that shrank was truncated or replaced: it is read again
from its start).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

CHUNK = 64 * 1024
POLL_S = 0.25


def _read_at(path: Path, offset: int) -> tuple[bytes, int]:
    """What ``path`` holds from ``offset`` (at most :data:`CHUNK` bytes), and its size."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            if size < offset:  # truncated or replaced
                return b"", size
            f.seek(offset)
            return f.read(CHUNK), size
    except FileNotFoundError:
        return b"", 0


async def read(path: Path, follow: bool = False) -> AsyncIterator[bytes]:
    """The file's content, chunk by chunk; with ``follow``, then
    what is appended, until cancelled.
    """
    offset = 0
    while True:
        data, size = await asyncio.to_thread(_read_at, path, offset)
        if data:
            offset += len(data)
            yield data
            continue
        if size < offset:
            offset = 0
            continue
        if not follow:
            return
        await asyncio.sleep(POLL_S)
