"""A network namespace a test makes (root, as CI runs), with its own /etc/hosts.

Processes started with :meth:`Netns.popen` run under ``ip netns exec``, which bind-mounts
``/etc/netns/<name>/hosts`` over ``/etc/hosts`` for them: that is how names resolve there
(``gateweave serve``, and the Envoys it starts, see it). The test's own sockets - its
backends and its client - are made by threads that entered the namespace (``setns`` applies
to the calling thread only), see :meth:`Netns.call`. Closing removes the namespace and its
``/etc/netns`` directory. :func:`link` joins two namespaces by a veth pair ("another host").
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_COUNTER = itertools.count()


class Netns:
    def __init__(self, hosts: Mapping[str, str]) -> None:
        """``hosts``: host name -> address, written to the namespace's hosts file."""
        self.name = f"gwt-{os.getpid()}-{next(_COUNTER)}"
        self.etc = Path("/etc/netns") / self.name
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)
            self.etc.mkdir(parents=True)
            lines = ["127.0.0.1 localhost", *(f"{addr} {host}" for host, addr in hosts.items())]
            (self.etc / "hosts").write_text("\n".join(lines) + "\n")
        except BaseException:
            self.close()
            raise
        self._pool = ThreadPoolExecutor(
            max_workers=4, thread_name_prefix=self.name, initializer=self._enter
        )

    def _enter(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {self.name}")
        finally:
            os.close(fd)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a thread inside the namespace
        (sockets it makes live there).
        """
        return self._pool.submit(fn, *args, **kwargs).result()

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """A process inside the namespace, seeing its hosts file as /etc/hosts."""
        return subprocess.Popen(["ip", "netns", "exec", self.name, *argv], **kwargs)

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
        subprocess.run(["ip", "netns", "del", self.name], check=False, capture_output=True)
        shutil.rmtree(self.etc, ignore_errors=True)


def link(a: Netns, b: Netns, a_address: str, b_address: str, prefix: int = 24) -> None:
    """A veth pair between two namespaces: ``gw0`` in ``a`` with ``a_address``, ``gw1`` in
    ``b`` with ``b_address`` (both ``/prefix``), up. Made inside the namespaces, so its names
    never meet another test's; deleting either namespace deletes it."""
    subprocess.run(
        [
            "ip",
            "-n",
            a.name,
            "link",
            "add",
            "gw0",
            "type",
            "veth",
            "peer",
            "name",
            "gw1",
            "netns",
            b.name,
        ],
        check=True,
    )
    for space, dev, addr in ((a, "gw0", a_address), (b, "gw1", b_address)):
        subprocess.run(
            ["ip", "-n", space.name, "addr", "add", f"{addr}/{prefix}", "dev", dev], check=True
        )
        subprocess.run(["ip", "-n", space.name, "link", "set", dev, "up"], check=True)
