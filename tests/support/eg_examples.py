"""Envoy Gateway's published examples (tests/data/eg-examples, README.md there) served live:
one or more example directories, with one of Envoy Gateway's quickstarts, each file copied
byte for byte, by a real ``gateweave serve`` with Envoy Gateway's controller name inside a
network namespace the test made (:func:`serving`); every object of the served directory
accepted, or refused with the message expected (:func:`assert_status`); the backends the
Kubernetes quickstart's Deployment would run, as the quickstart's echo-basic image
answers (:func:`echo_pods`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from gateweave_bench import harness as h
from gateweave_conformance.echo import pod_name
from tests.support.data import EG_EXAMPLES, EG_KUBE_QUICKSTART, EG_QUICKSTART, yaml_files
from tests.support.netns import Netns
from tests.support.netserve import Serve, condition, gateway_address, until, write

EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
HOST = "www.example.com"  # the quickstarts' HTTPRoute's hostname
POLICY_KINDS = ("BackendTrafficPolicy", "ClientTrafficPolicy", "SecurityPolicy")
Key = tuple[str, str, str]  # (kind, namespace, name); "" namespace: cluster-scoped


@dataclass(frozen=True)
class Quickstart:
    """One of Envoy Gateway's quickstarts: its file and its Gateway's HTTP listener port."""

    path: Path
    port: int


STANDALONE = Quickstart(EG_QUICKSTART, 8888)  # Backend 0.0.0.0:3000
KUBERNETES = Quickstart(EG_KUBE_QUICKSTART, 80)  # Service backend:3000 (Deployment: echo-basic)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes


class Example:
    """The served example: requests to the quickstart Gateway's listener."""

    def __init__(self, serve: Serve, address: str, port: int) -> None:
        self.serve = serve
        self.address = address
        self.port = port

    def get(
        self, path: str = "/", headers: dict[str, str] | None = None, host: str = HOST
    ) -> h.Reply | None:
        return self.serve.ns.call(
            h.fetch_sync, self.address, self.port, path, host, headers=headers or {}
        )

    def request(
        self,
        method: str = "GET",
        path: str = "/",
        headers: Mapping[str, str] | None = None,
        host: str = HOST,
        timeout: float = 5,
    ) -> Answer | None:
        """One request on a fresh connection, its body as bytes (None: no answer)."""
        return self.serve.ns.call(
            send, self.address, self.port, method, path, headers or {}, host, timeout
        )

    def concurrently(self, n: int, path: str, timeout: float = 30) -> list[Answer | None]:
        """``n`` GETs of ``path`` at once, each on its own connection."""

        def all_at_once() -> list[Answer | None]:
            # threads started here are in the namespace too (the thread's, at their start)
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                return list(
                    pool.map(
                        lambda _: send(self.address, self.port, "GET", path, {}, HOST, timeout),
                        range(n),
                    )
                )

        return self.serve.ns.call(all_at_once)


def send(
    address: str,
    port: int,
    method: str,
    path: str,
    headers: Mapping[str, str],
    host: str,
    timeout: float,
) -> Answer | None:
    """One request on a fresh connection from the calling thread, its body as bytes (None: no
    answer)."""
    conn = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        conn.request(method, path, headers={"Host": host, **headers})
        resp = conn.getresponse()
        body = resp.read()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def answer(example: Example, status: int, **kw: Any) -> Callable[[], h.Reply | None]:
    """A probe: the answer to a GET, once it has ``status``."""

    def probe() -> h.Reply | None:
        reply = example.get(**kw)
        return reply if reply is not None and reply.status == status else None

    return probe


def example_files(name: str) -> list[Path]:
    return yaml_files(EG_EXAMPLES / name)


def objects_of(config: Path) -> list[Key]:
    """(kind, namespace, name) of every object in the directory."""
    out = []
    for path in sorted(config.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                meta = doc["metadata"]
                namespace = (
                    "" if doc["kind"] == "GatewayClass" else meta.get("namespace", "default")
                )
                out.append((doc["kind"], namespace, meta["name"]))
    return out


@contextlib.contextmanager
def serving(
    ns: Netns,
    tmp_path: Path,
    names: Sequence[str],
    extra: Sequence[Mapping[str, Any]] = (),
    *,
    quickstart: Quickstart = STANDALONE,
    refused: Mapping[Key, str] | None = None,
) -> Iterator[Example]:
    """``gateweave serve`` on ``quickstart`` plus the example directories ``names`` (each file
    copied byte for byte) and ``extra`` (what the task's shell commands, or Kubernetes, create);
    every object accepted but the policies ``refused`` (key -> the refusal's message). After the
    test, nothing was reported as a configuration error."""
    config = tmp_path / "config"
    config.mkdir()
    sources = [quickstart.path, *(f for name in names for f in example_files(name))]
    for source in sources:
        shutil.copyfile(source, config / f"{source.parent.name}-{source.name}")
    assert sorted(p.read_bytes() for p in config.iterdir()) == sorted(
        s.read_bytes() for s in sources
    )
    if extra:
        write(config / "created-by-the-task-commands.yaml", [dict(doc) for doc in extra])
    serve = Serve(ns, config, tmp_path / "serve.log", "--controller-name", EG_CONTROLLER)
    try:
        address = gateway_address(serve, "default", "eg")
        assert_status(serve, objects_of(config), refused or {})
        yield Example(serve, address, quickstart.port)
        assert serve.api("/api/errors") == {"items": []}
    finally:
        serve.stop()


def assert_status(serve: Serve, objects: list[Key], refused: Mapping[Key, str]) -> None:
    """Each object of the directory accepted (:func:`accepted`), or refused as ``refused``
    says (:func:`refused_with`), eventually."""
    assert set(refused) <= set(objects), (refused, objects)

    def holds() -> bool:
        items = (serve.api("/api/objects") or {"items": []})["items"]
        stored = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for o in items
        }
        return all(
            refused_with(stored.get(key), refused[key])
            if key in refused
            else accepted(key[0], stored.get(key))
            for key in objects
        )

    until(holds, 30, f"every object accepted but {dict(refused)}: {objects}", serve)


def ancestors(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list((obj or {}).get("status", {}).get("ancestors") or [])


def accepted(kind: str, obj: dict[str, Any] | None) -> bool:
    """Whether ``obj`` (of ``kind``; None: not stored) is accepted as its kind says it: its own
    conditions, its route parents' or its policy ancestors'. Other kinds (Secret) pass."""
    if kind in ("GatewayClass", "Gateway", "Backend"):
        wanted = ("Accepted", "Programmed") if kind == "Gateway" else ("Accepted",)
        return all((c := condition(obj, t)) is not None and c["status"] == "True" for t in wanted)
    if kind == "HTTPRoute":
        parents = (obj or {}).get("status", {}).get("parents") or []
        return (
            len(parents) == 1
            and parents[0]["controllerName"] == EG_CONTROLLER
            and {c["type"]: c["status"] for c in parents[0]["conditions"]}
            == {"Accepted": "True", "ResolvedRefs": "True"}
        )
    if kind in POLICY_KINDS:
        return bool(ancestors(obj)) and all(
            entry["controllerName"] == EG_CONTROLLER
            and any(
                (c["type"], c["status"], c["reason"]) == ("Accepted", "True", "Accepted")
                for c in entry["conditions"]
            )
            for entry in ancestors(obj)
        )
    return True


def refused_with(obj: dict[str, Any] | None, message: str) -> bool:
    """Whether the policy ``obj`` is refused (Accepted False, Invalid) with ``message`` on
    each of its ancestors."""
    return bool(ancestors(obj)) and all(
        entry["controllerName"] == EG_CONTROLLER
        and any(
            (c["type"], c["status"], c["reason"], c["message"])
            == ("Accepted", "False", "Invalid", message)
            for c in entry["conditions"]
        )
        for entry in ancestors(obj)
    )


# ---------------------------------------------------------------- the quickstart's pods


@dataclass(frozen=True)
class Pod:
    name: str
    address: str


@contextlib.contextmanager
def echo_pods(ns: Netns, replicas: int = 1) -> Iterator[list[Pod]]:
    """``replicas`` pods of the Kubernetes quickstart's Deployment ``backend``: the conformance
    echo backend (the stand-in of its image, echo-basic) on port 3000, each on its own loopback
    address (127.0.1.N) inside ``ns``; stopped on exit."""
    pods = [Pod(pod_name("backend", i, "default"), f"127.0.1.{i + 1}") for i in range(replicas)]
    procs = [
        ns.popen(
            [
                sys.executable,
                "-m",
                "gateweave_conformance.echo",
                "--host",
                pod.address,
                "--http-port",
                "3000",
                "--h2c-port",
                "0",
                "--pod",
                pod.name,
                "--namespace",
                "default",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pod in pods
    ]
    try:
        for pod, proc in zip(pods, procs, strict=True):
            until(partial(up, ns, pod, proc), 20, f"the echo pod {pod.name} listening")
        yield pods
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def up(ns: Netns, pod: Pod, proc: subprocess.Popen[bytes]) -> bool:
    """Whether the pod's process runs and listens (an error if it exited)."""
    assert proc.poll() is None, f"the echo pod {pod.name} exited ({proc.returncode})"
    return ns.call(listening, pod.address)


def listening(address: str, port: int = 3000) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        time.sleep(0.05)
        return False


def endpoint_slice(pods: Sequence[Pod]) -> dict[str, Any]:
    """The EndpointSlice Kubernetes makes for the quickstart's Service ``backend`` (port
    ``http``, 3000) from the Deployment's ready pods."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "backend-7xk2q",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "backend"},
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [pod.address],
                "conditions": {"ready": True},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod.name},
            }
            for pod in pods
        ],
        "ports": [{"name": "http", "port": 3000, "protocol": "TCP"}],
    }
