"""Steady traffic through an Envoy while its control plane restarts: a bounded request loop."""

from __future__ import annotations

import threading
import time

from gateweave_bench import harness as h


class Traffic:
    """A bounded request loop (about ``rate`` per second, each on a fresh connection) in a
    thread, counting the requests that did not answer 200 from the expected backend."""

    def __init__(
        self, address: str, port: int, want: str, rate: float = 50.0, limit: float = 90.0
    ) -> None:
        self.address, self.port, self.want = address, port, want
        self.interval, self.limit = 1.0 / rate, limit
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit
        while not self._stop.is_set() and time.monotonic() < deadline:
            reply = h.fetch_sync(self.address, self.port, "/", host="example.com")
            self.sent += 1
            if reply is None or reply.status != 200 or reply.body != self.want:
                self.failed.append(
                    f"{time.monotonic():.3f}: "
                    f"{None if reply is None else (reply.status, reply.body)}"
                )
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
