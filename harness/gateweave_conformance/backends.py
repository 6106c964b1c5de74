"""Echo replicas for the Deployments of the conformance manifests, and their EndpointSlices.

Every replica of every Deployment (base and case manifests) runs as an in-process echo
(:mod:`gateweave_conformance.echo`) on its own loopback address (127.20.x.y), answering
as its pod (``manifests.pod_name``). The mode comes from the container's environment as
upstream's echo-basic reads it (ECHO.md); TLS Deployments get their certificate and key
from the Secret their volume mounts, and ``TLS_CLIENT_CACERTS`` from the mounted
ConfigMap. The coredns Deployment becomes the DNS stand-in on UDP 53, and a Deployment of
Envoy Gateway's static file server image a file server of what it mounts under its directory
(``echo.fileserver``).
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gateweave_conformance import manifests as mf
from gateweave_conformance.echo import EchoSpec, RunningEcho, start_echo
from gateweave_conformance.echo.spec import Mode

# (kind, namespace, name) -> the current object (a Secret or ConfigMap), or None.
Lookup = Callable[[str, str, str], dict[str, Any] | None]
PodKey = tuple[str, str]  # (namespace, pod name)


class BackendError(Exception):
    """A Deployment the runner cannot stand in for."""


@dataclass(frozen=True)
class Replica:
    pod: mf.Pod
    address: str
    echo: RunningEcho


def _env(container: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in container.get("env") or []:
        if isinstance(item, dict) and item.get("name"):
            out[str(item["name"])] = str(item.get("value") or "")
    return out


def _volume(
    mount: dict[str, Any], pod_spec: dict[str, Any], namespace: str, lookup: Lookup
) -> tuple[str, dict[str, bytes]] | None:
    """What a volume mount shows: its source's ``Kind ns/name`` and the files under the mount
    path (relative path -> content: the source's keys, or its ``items``' paths); None when the
    volume is not a Secret or ConfigMap."""
    volume = next(
        (v for v in pod_spec.get("volumes") or [] if v.get("name") == mount.get("name")), None
    )
    if volume is None:
        return None
    if "secret" in volume:
        kind, name, source = "Secret", volume["secret"].get("secretName"), volume["secret"]
    elif "configMap" in volume:
        kind, name, source = "ConfigMap", volume["configMap"].get("name"), volume["configMap"]
    else:
        return None
    where = f"{kind} {namespace}/{name}"
    obj = lookup(kind, namespace, str(name))
    if obj is None:
        raise BackendError(f"{mount.get('mountPath')}: {where} not found")
    data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}

    def content(key: str) -> bytes:
        if key not in data:
            raise BackendError(f"{mount.get('mountPath')}: {where} has no key {key!r}")
        return base64.b64decode(data[key]) if kind == "Secret" else data[key].encode()

    items = source.get("items") or []
    if items:
        paths = {posixpath.normpath(str(i.get("path"))): str(i.get("key")) for i in items}
    else:
        paths = {key: key for key in data}
    return where, {path: content(key) for path, key in paths.items()}


def _mounted_file(
    path: str, container: dict[str, Any], pod_spec: dict[str, Any], namespace: str, lookup: Lookup
) -> str:
    """The content of the file at ``path`` inside the container (a Secret or ConfigMap key)."""
    for mount in container.get("volumeMounts") or []:
        root = str(mount.get("mountPath") or "").rstrip("/")
        if not root or not path.startswith(root + "/"):
            continue
        volume = _volume(mount, pod_spec, namespace, lookup)
        if volume is None:
            break
        where, files = volume
        rel = posixpath.normpath(path[len(root) + 1 :])
        if rel not in files:
            raise BackendError(f"{path}: {where} has no key {rel!r}")
        return files[rel].decode()
    raise BackendError(f"{path}: not mounted from a Secret or ConfigMap")


def _served_files(
    directory: str,
    container: dict[str, Any],
    pod_spec: dict[str, Any],
    namespace: str,
    lookup: Lookup,
) -> tuple[tuple[str, bytes], ...]:
    """The files the container sees under ``directory`` (its Secret and ConfigMap mounts there),
    by URL path below it (``/jwt/jwks.json`` for ``<directory>/jwt/jwks.json``)."""
    root = posixpath.normpath(posixpath.join("/", directory))
    out: dict[str, bytes] = {}
    for mount in container.get("volumeMounts") or []:
        mount_path = posixpath.normpath(posixpath.join("/", str(mount.get("mountPath") or "")))
        if mount_path != root and not mount_path.startswith(root.rstrip("/") + "/"):
            continue
        volume = _volume(mount, pod_spec, namespace, lookup)
        if volume is None:
            raise BackendError(f"{mount_path}: not mounted from a Secret or ConfigMap")
        below = posixpath.relpath(mount_path, root)
        for rel, content in volume[1].items():
            out[posixpath.normpath(posixpath.join("/", below, rel))] = content
    return tuple(sorted(out.items()))


def _args(container: dict[str, Any]) -> dict[str, str]:
    """A Go program's ``--name=value`` / ``--name value`` arguments."""
    out: dict[str, str] = {}
    args = [str(a) for a in container.get("args") or []]
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        name, sep, value = arg.lstrip("-").partition("=")
        if not sep and i + 1 < len(args) and not args[i + 1].startswith("-"):
            value = args[i + 1]
        out[name] = value
    return out


def static_file_spec(
    container: dict[str, Any], pod_spec: dict[str, Any], pod: mf.Pod, address: str, lookup: Lookup
) -> EchoSpec:
    """Envoy Gateway's static file server (``--port``, default 8080; ``--dir``, default
    ``./files`` in the image's root): its files are what the Deployment mounts under that
    directory (upstream's image bakes its own in; a case mounts the ones it needs)."""
    args = _args(container)
    cert_dir = args.get("certPath", "/etc/certs").rstrip("/")
    if any(
        str(m.get("mountPath") or "").rstrip("/") == cert_dir
        for m in container.get("volumeMounts") or []
    ):
        raise BackendError(f"static file server {pod.name}: HTTPS (--certPath) is not supported")
    try:
        port = int(args.get("port", "8080"))
    except ValueError:
        raise BackendError(f"static file server {pod.name}: --port {args['port']!r}") from None
    directory = args.get("dir", "./files")  # relative to the image's working directory, /
    return EchoSpec(
        mode="files",
        host=address,
        pod=pod.name,
        namespace=pod.namespace,
        files=_served_files(directory, container, pod_spec, pod.namespace, lookup),
        files_port=port,
    )


def echo_spec(deployment: dict[str, Any], pod: mf.Pod, address: str, lookup: Lookup) -> EchoSpec:
    """How upstream's container for ``pod`` would run, as an :class:`EchoSpec` on ``address``."""
    pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    if not containers:
        raise BackendError(f"Deployment {pod.namespace}/{pod.deployment} has no container")
    container = containers[0]
    image = str(container.get("image") or "")
    if "coredns" in image:
        return EchoSpec(mode="dns", host=address, pod=pod.name, namespace=pod.namespace)
    if "gateway-static-file-server" in image:
        return static_file_spec(container, pod_spec, pod, address, lookup)
    env = _env(container)
    mode: Mode = "http"
    for var, candidate in (
        ("GRPC_ECHO_SERVER", "grpc"),
        ("TCP_ECHO_SERVER", "tcp"),
        ("UDP_ECHO_SERVER", "udp"),
    ):
        if env.get(var):
            mode = candidate  # type: ignore[assignment]
            break
    key_var = "TLS_SERVER_PRIVKEY" if mode == "http" else "TLS_SERVER_PRIV_KEY"
    cert = key = client_ca = None
    if env.get("TLS_SERVER_CERT") and env.get(key_var):
        cert = _mounted_file(env["TLS_SERVER_CERT"], container, pod_spec, pod.namespace, lookup)
        key = _mounted_file(env[key_var], container, pod_spec, pod.namespace, lookup)
    if mode == "http" and env.get("TLS_CLIENT_CACERTS"):
        client_ca = _mounted_file(
            env["TLS_CLIENT_CACERTS"], container, pod_spec, pod.namespace, lookup
        )
    return EchoSpec(
        mode=mode,
        host=address,
        pod=pod.name,
        namespace=pod.namespace,
        service=env.get("SERVICE_NAME", ""),
        tls_cert=cert,
        tls_key=key,
        client_ca=client_ca,
    )


class Backends:
    """The running replicas, by pod; ``sync`` makes them match a set of objects."""

    def __init__(self, prefix: str = "127.20") -> None:
        self.prefix = prefix
        self.replicas: dict[PodKey, Replica] = {}
        self._next = 0
        self._addresses: dict[PodKey, str] = {}

    def _address(self, key: PodKey) -> str:
        if key not in self._addresses:
            n = self._next
            self._next += 1
            self._addresses[key] = f"{self.prefix}.{(n // 250) % 250}.{n % 250 + 1}"
        return self._addresses[key]

    def address_for(self, pod: mf.Pod, _index: int = 0) -> str:
        return self._address((pod.namespace, pod.name))

    async def sync(self, objects: Sequence[dict[str, Any]], lookup: Lookup) -> list[str]:
        """Start the replicas of the Deployments in ``objects`` that do not run yet and stop
        those whose Deployment is gone; returns problems (replicas that could not start)."""
        deployments = {
            (
                str((o.get("metadata") or {}).get("namespace") or "default"),
                str((o.get("metadata") or {}).get("name")),
            ): o
            for o in objects
            if o.get("kind") == "Deployment"
        }
        wanted = {(p.namespace, p.name): p for p in mf.deployment_pods(deployments.values())}
        for key in [k for k in self.replicas if k not in wanted]:
            await self.replicas.pop(key).echo.stop()
        problems: list[str] = []
        started: list[Replica] = []
        for key, pod in wanted.items():
            if key in self.replicas:
                continue
            address = self._address(key)
            try:
                spec = echo_spec(deployments[(pod.namespace, pod.deployment)], pod, address, lookup)
                echo = await start_echo(spec)
            except (BackendError, OSError, ValueError) as exc:
                problems.append(f"pod {pod.namespace}/{pod.name}: {exc}")
                continue
            replica = Replica(pod, address, echo)
            self.replicas[key] = replica
            started.append(replica)
        for replica in started:
            if not await replica.echo.ready(10.0):
                problems.append(f"pod {replica.pod.namespace}/{replica.pod.name}: not ready")
        return problems

    def endpoint_slices(self, objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return mf.endpoint_slices(objects, self.address_for)

    def pods_of(self, namespace: str, app: str) -> Iterable[Replica]:
        """Replicas labelled ``app=<app>`` in ``namespace`` (upstream reads these pods' logs)."""
        for (ns, _), replica in self.replicas.items():
            if ns == namespace and replica.pod.labels.get("app") == app:
                yield replica

    async def close(self) -> None:
        for replica in list(self.replicas.values()):
            await replica.echo.stop()
        self.replicas.clear()
