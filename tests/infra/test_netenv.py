"""The host facts translation takes as inputs: interface addresses read over rtnetlink (in a
network namespace the test makes, so the set is known), and the privileged port limit."""

from __future__ import annotations

import os
import subprocess

import pytest

from gateweave.infra import netenv
from tests.support.netns import Netns

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"
)


def test_local_addresses_are_the_namespaces_own() -> None:
    ns = Netns({})
    try:
        assert ns.call(netenv.local_addresses) == frozenset({"127.0.0.1", "::1"})
        subprocess.run(
            ["ip", "-n", ns.name, "link", "add", "d0", "type", "veth", "peer", "name", "d1"],
            check=True,
        )
        for addr in ("10.44.0.7/24", "10.44.1.7/24", "fd00:44::7/64"):
            subprocess.run(["ip", "-n", ns.name, "addr", "add", addr, "dev", "d0"], check=True)
        subprocess.run(["ip", "-n", ns.name, "link", "set", "d0", "up"], check=True)
        # a second IPv4 address of one interface too (SIOCGIFCONF would miss it)
        assert {"10.44.0.7", "10.44.1.7", "fd00:44::7"} <= ns.call(netenv.local_addresses)
    finally:
        ns.close()


def test_root_may_bind_every_port() -> None:
    assert netenv.privileged_ports_below() == 0
    assert netenv.unprivileged_port_start() >= 0
