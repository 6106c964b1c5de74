"""The manifests of a conformance case: loading, placeholder substitution, EndpointSlices.

Upstream's applier rewrites manifests before applying them (FORMAT.md, "Placeholders"):
``{GATEWAY_CLASS_NAME}`` / ``{GATEWAY_CONTROLLER_NAME}`` in any string, and Gateway
``spec.addresses`` entries whose value is ``PLACEHOLDER_USABLE_ADDRS`` /
``PLACEHOLDER_UNUSABLE_ADDRS``. The live runner and the offline replay both use this
module, so nothing here knows where the files live: directories are parameters.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateweave import DEFAULT_CONTROLLER_NAME
from gateweave_conformance import tlsgen
from gateweave_conformance.cases import Case

DEFAULT_GATEWAY_CLASS = "gateweave-conformance"
BASE_MANIFESTS = "base/manifests.yaml"
USABLE = "PLACEHOLDER_USABLE_ADDRS"
UNUSABLE = "PLACEHOLDER_UNUSABLE_ADDRS"
# A case may copy a value of another object (FORMAT has no syntax for it; the transcription
# writes this token where upstream copies at run time).
_COPY_TOKEN = re.compile(
    r"^<copy of data\[(?P<key>[^\]]+)\] of (?P<kind>ConfigMap|Secret) "
    r"(?P<ns>[^/\s]+)/(?P<name>[^>\s]+)>$"
)


@dataclass(frozen=True)
class Address:
    type: str
    value: str

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "value": self.value}


@dataclass(frozen=True)
class Substitutions:
    """What the runner substitutes. Offline defaults: a usable address of the standalone pool
    (127.10.0.0/16) and an unusable one outside it (TEST-NET-2)."""

    gateway_class_name: str = DEFAULT_GATEWAY_CLASS
    controller_name: str = DEFAULT_CONTROLLER_NAME
    usable_addresses: tuple[Address, ...] = (Address("IPAddress", "127.10.255.1"),)
    unusable_addresses: tuple[Address, ...] = (Address("IPAddress", "198.51.100.1"),)


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=512)
def _parse(path: str, mtime_ns: int, size: int) -> tuple[Any, ...]:
    with open(path, encoding="utf-8") as fh:
        return tuple(yaml.load_all(fh, Loader=_Loader))


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a manifest file (fresh copies; parsed once per file
    version).
    """
    st = path.stat()
    docs = copy.deepcopy(_parse(str(path), st.st_mtime_ns, st.st_size))
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: document {i} is not a mapping")
        out.append(doc)
    return out


def _replace_strings(value: Any, subs: Substitutions) -> Any:
    if isinstance(value, str):
        return value.replace("{GATEWAY_CLASS_NAME}", subs.gateway_class_name).replace(
            "{GATEWAY_CONTROLLER_NAME}", subs.controller_name
        )
    if isinstance(value, list):
        return [_replace_strings(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _replace_strings(v, subs) for k, v in value.items()}
    return value


def expand_addresses(entries: Sequence[Any], subs: Substitutions) -> list[Any]:
    """Rewrite a ``spec.addresses`` list as upstream's applier does: the entries that are not
    placeholders stay first, in order; then each placeholder entry becomes the runner's
    addresses of that pool (its type from the pool, whatever the entry said)."""
    kept: list[Any] = []
    expanded: list[Any] = []
    for entry in entries:
        value = entry.get("value") if isinstance(entry, dict) else None
        if value == USABLE:
            expanded.extend(a.as_dict() for a in subs.usable_addresses)
        elif value == UNUSABLE:
            expanded.extend(a.as_dict() for a in subs.unusable_addresses)
        else:
            kept.append(entry)
    return kept + expanded


def substitute(obj: dict[str, Any], subs: Substitutions) -> dict[str, Any]:
    """A copy of one manifest with every placeholder substituted."""
    out: dict[str, Any] = _replace_strings(copy.deepcopy(obj), subs)
    spec = out.get("spec")
    if (
        out.get("kind") == "Gateway"
        and isinstance(spec, dict)
        and isinstance(spec.get("addresses"), list)
    ):
        spec["addresses"] = expand_addresses(spec["addresses"], subs)
    return out


def substitute_step_data(value: Any, subs: Substitutions) -> Any:
    """Placeholders inside step data (patches, inline objects, expected addresses): the class and
    controller names, and address lists holding ``PLACEHOLDER_*_ADDRS`` entries (whose
    ``PLACEHOLDER_*_TYPE`` types become the pool's types)."""
    value = _replace_strings(value, subs)
    return _expand_nested(value, subs)


def _expand_nested(value: Any, subs: Substitutions) -> Any:
    if isinstance(value, list):
        if any(isinstance(e, dict) and e.get("value") in (USABLE, UNUSABLE) for e in value):
            return expand_addresses(value, subs)
        return [_expand_nested(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _expand_nested(v, subs) for k, v in value.items()}
    return value


def resolve_copies(value: Any, lookup: Callable[[str, str, str], dict[str, Any] | None]) -> Any:
    """Replace ``<copy of data[KEY] of ConfigMap NS/NAME>`` strings by that object's data value.

    ``lookup(kind, namespace, name)`` returns the current object (or None); an unresolvable token
    raises ``KeyError``.
    """
    if isinstance(value, str):
        m = _COPY_TOKEN.match(value)
        if not m:
            return value
        obj = lookup(m["kind"], m["ns"], m["name"])
        data = (obj or {}).get("data") or {}
        if m["key"] not in data:
            raise KeyError(f"{value}: no such object or key")
        return data[m["key"]]
    if isinstance(value, list):
        return [resolve_copies(v, lookup) for v in value]
    if isinstance(value, dict):
        return {k: resolve_copies(v, lookup) for k, v in value.items()}
    return value


def gateway_class(subs: Substitutions) -> dict[str, Any]:
    """The GatewayClass under test (the runner creates it; no manifest names it)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": subs.gateway_class_name},
        "spec": {"controllerName": subs.controller_name},
    }


@dataclass
class Source:
    """One manifest to apply, with where it came from (for messages)."""

    obj: dict[str, Any]
    origin: str


@dataclass
class CaseManifests:
    """What a runner applies before the steps, in order."""

    objects: list[Source] = field(default_factory=list)
    tls: tlsgen.TLSMaterial | None = None


def case_manifests(manifests_dir: Path, case: Case, subs: Substitutions) -> CaseManifests:
    """GatewayClass, base manifests, generated TLS material, then the case's files (all
    substituted).
    """
    out = CaseManifests()
    out.objects.append(Source(gateway_class(subs), "runner: GatewayClass under test"))
    out.objects.extend(load_file(manifests_dir, BASE_MANIFESTS, subs))
    extra = tuple(g.to_tls() for g in case.generated)
    out.tls = tlsgen.with_extra(extra)
    out.objects.extend(Source(obj, "generated TLS material") for obj in out.tls.manifests())
    for rel in case.manifests:
        out.objects.extend(load_file(manifests_dir, rel, subs))
    return out


def load_file(manifests_dir: Path, rel: str, subs: Substitutions) -> list[Source]:
    path = manifests_dir / rel
    return [
        Source(substitute(doc, subs), f"{rel}#{i}") for i, doc in enumerate(load_documents(path))
    ]


# ---------------------------------------------------------------- backends: pods and EndpointSlices


def _token(seed: str, length: int) -> str:
    alphabet = (
        "bcdfghjklmnpqrstvwxz2456789"  # like Kubernetes' generated names: no vowels, no dashes
    )
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def pod_name(namespace: str, deployment: str, replica: int) -> str:
    """``<deployment>-<hash>-<suffix>``: two dash-free tokens, distinct per replica, stable."""
    stable = _token(f"{namespace}/{deployment}", 9)
    return f"{deployment}-{stable}-{_token(f'{namespace}/{deployment}#{replica}', 5)}"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    deployment: str
    replica: int
    labels: dict[str, str]
    container_ports: dict[str, int]  # named container ports (for named targetPorts)


def deployment_pods(objects: Iterable[dict[str, Any]]) -> list[Pod]:
    """The pods the Deployments among ``objects`` would run (replicas default 1)."""
    pods: list[Pod] = []
    for obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        spec = obj.get("spec") or {}
        replicas = spec.get("replicas", 1)
        template = spec.get("template") or {}
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        ports: dict[str, int] = {}
        for c in (template.get("spec") or {}).get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("name") and isinstance(p.get("containerPort"), int):
                    ports[p["name"]] = p["containerPort"]
        pods.extend(
            Pod(ns, pod_name(ns, name, i), name, i, labels, ports) for i in range(int(replicas))
        )
    return pods


def offline_pod_address(pod: Pod, index: int) -> str:
    """Offline placeholder endpoint address: 127.20.x.y, one per pod."""
    return f"127.20.{(index // 250) % 250}.{index % 250 + 1}"


def endpoint_slices(
    objects: Sequence[dict[str, Any]], address_for: Callable[[Pod, int], str] = offline_pod_address
) -> list[dict[str, Any]]:
    """One EndpointSlice per Service whose selector matches a Deployment's pod labels, as the
    EndpointSlice controller would publish it (ports are the target ports)."""
    pods = deployment_pods(objects)
    addresses = {(p.namespace, p.name): address_for(p, i) for i, p in enumerate(pods)}
    slices: list[dict[str, Any]] = []
    for svc in objects:
        if svc.get("kind") != "Service":
            continue
        meta = svc.get("metadata") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        spec = svc.get("spec") or {}
        selector = spec.get("selector") or {}
        if not selector or spec.get("type") == "ExternalName":
            continue
        selected = [
            p
            for p in pods
            if p.namespace == ns and all(p.labels.get(k) == v for k, v in selector.items())
        ]
        if not selected:
            continue
        ports: list[dict[str, Any]] = []
        for sp in spec.get("ports") or []:
            target = sp.get("targetPort", sp.get("port"))
            if isinstance(target, str):
                named = {pod.container_ports.get(target) for pod in selected} - {None}
                if len(named) != 1:
                    continue
                target = named.pop()
            port: dict[str, Any] = {
                "name": sp.get("name", ""),
                "port": target,
                "protocol": sp.get("protocol", "TCP"),
            }
            if sp.get("appProtocol"):
                port["appProtocol"] = sp["appProtocol"]
            ports.append(port)
        endpoints = [
            {
                "addresses": [addresses[(p.namespace, p.name)]],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "targetRef": {"kind": "Pod", "name": p.name, "namespace": p.namespace},
            }
            for p in selected
        ]
        slices.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{_token(f'{ns}/{name}', 5)}",
                    "namespace": ns,
                    "labels": {
                        "kubernetes.io/service-name": name,
                        "endpointslice.kubernetes.io/managed-by": "gateweave-conformance",
                    },
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": ports,
            }
        )
    return slices
