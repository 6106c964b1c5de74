"""A socketserver server of the tests serving in a thread of its own until closed."""

from __future__ import annotations

import socketserver
import threading


class ServingThread:
    """``server`` serving in a daemon thread (polling for shutdown every 50 ms) until
    :meth:`close`."""

    def __init__(self, server: socketserver.BaseServer) -> None:
        self.server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(2)
