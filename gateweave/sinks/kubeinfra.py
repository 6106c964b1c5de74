"""Kubernetes infrastructure: per Gateway an Envoy Deployment, Service, ServiceAccount,
bootstrap ConfigMap and (with xDS mutual TLS) the Secret of its xDS client certificate,
owned by the Gateway.

It is the runtime's infra sink (``update(changed, removed)``) in Kubernetes mode. Each
object is written with server-side apply (field manager ``gateweave``, forced: these
objects are ours), carries an ownerReference to its Gateway (``InfraGateway.uid``, so
deleting the Gateway garbage-collects them) and the Gateway's ``spec.infrastructure``
labels and annotations; a Gateway that leaves the infra IR (deleted, or no longer ours)
has its objects deleted.
The Gateways of a GatewayClass whose parameters set ``mergeGateways`` are one infra IR entry
(translate/merging.py, :func:`is_merged`): one set of these objects for the class, named
:func:`class_object_name`, in :attr:`KubernetesInfra.namespace` (the controller's), labelled
and selected by :func:`gateweave.ir.class_envoy_labels` and owned by the GatewayClass; its
pods are the class's xDS node. Switching merging on or off is a change of the infra IR like
any other: the entries that went have their objects deleted, the new ones are applied.
Only the leader manages infrastructure (``enabled``): a follower remembers the desired
state and applies it all when it becomes the leader.

The Service carries :func:`gateweave.ir.envoy_labels` (also its selector): translate finds
it by them and writes the Gateway's ``status.addresses`` from it (translate/addresses.py).
The Gateway's requested ``spec.addresses`` (``InfraGateway.requested_addresses``) go into
the Service: ``loadBalancerIP`` (the first) for a LoadBalancer Service, else ``externalIPs``.

With ``certs`` (gateweave/kube/xdsca.py) the Envoy talks to the xDS server over mutual TLS:
the Secret (``tls.crt``, ``tls.key`` naming the Gateway, ``ca.crt``) is mounted at
:data:`XDS_CERT_DIR` and the bootstrap's SDS files (in the ConfigMap) point there;
:meth:`KubernetesInfra.renew` rewrites the Secrets whose certificate is due, and Envoy picks
the new files up without a restart.

The Gateway's parameters (``InfraGateway.envoy`` and ``.kubernetes``, from its
GatewayParameters) give the Deployment's replicas, the Envoy container's arguments and
resources, the Service type (else ``service_type``), and when asked for a
PodDisruptionBudget and a HorizontalPodAutoscaler (then the Deployment leaves its replicas
to it); either is deleted when no longer asked for.

Each Envoy pod is its own xDS node, ``ns/name/<pod>`` (:func:`node_id`, the pod's name from
the downward API), so Programmed can say which pods run the current configuration. A pod
drains before it stops: its preStop hook starts Envoy's graceful listener drain and waits
the drain time; the grace period covers it.

Envoy's admin listens on the pod's loopback only (:data:`ENVOY_ADMIN_PORT`); its statistics
are read from outside through the stats port (:data:`STATS_PORT`, container port
``metrics``): a listener of the bootstrap that lets through a ``GET`` of exactly the paths
gateweave reads (:data:`gateweave.telemetry.stats.READ_PATHS`) and ``/ready`` (the kubelet's
readiness probe), and answers anything else 404 (gateweave/infra/bootstrap.py). The controller
finds the pods and reads them (gateweave/kube/pods.py); the pods carry the
``prometheus.io/scrape``, ``port`` and ``path`` annotations for a Prometheus that scrapes pods.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from gateweave.infra.bootstrap import (
    XDS_CLUSTER,
    BootstrapParams,
    XdsClientTls,
    envoy_flags,
    is_ip,
    node_metadata,
    render,
    sds_files,
)
from gateweave.ir import (
    ENVOY_APP_LABELS,
    GATEWAY_CLASS_LABEL,
    GATEWAY_NAME_LABEL,
    InfraGateway,
    class_envoy_labels,
    envoy_labels,
)
from gateweave.kube.client import APPLY_PATCH, KubeClient, KubeError, ResourcePath
from gateweave.kube.xdsca import SECRETS, XdsCertificates
from gateweave.telemetry.stats import PROMETHEUS_PATH, READ_PATHS
from gateweave.translate.merging import MERGED_NAMESPACE

log = structlog.get_logger("gateweave.sinks.kubeinfra")

FIELD_MANAGER = "gateweave"
DEFAULT_IMAGE = "envoyproxy/envoy:v1.40.0"
ENVOY_ADMIN_PORT = 19000  # on the pod's loopback only
STATS_PORT = 19001  # the pod's read-only statistics (and readiness), as Envoy Gateway's
STATS_PORT_NAME = "metrics"
READY_PATH = "/ready"
BOOTSTRAP_DIR = "/etc/envoy"  # the ConfigMap: bootstrap.json and the xDS TLS SDS files
XDS_CERT_DIR = "/etc/gateweave-xds"  # the Secret: the xDS client certificate

DEPLOYMENTS = ResourcePath("apps", "v1", "deployments", True)
SERVICES = ResourcePath("", "v1", "services", True)
SERVICE_ACCOUNTS = ResourcePath("", "v1", "serviceaccounts", True)
CONFIG_MAPS = ResourcePath("", "v1", "configmaps", True)
DISRUPTION_BUDGETS = ResourcePath("policy", "v1", "poddisruptionbudgets", True)
AUTOSCALERS = ResourcePath("autoscaling", "v2", "horizontalpodautoscalers", True)
OPTIONAL = (DISRUPTION_BUDGETS, AUTOSCALERS)  # generated only when the parameters ask for them
OWNED = (DEPLOYMENTS, SERVICES, CONFIG_MAPS, SERVICE_ACCOUNTS, SECRETS, *OPTIONAL)
DEFAULT_DRAIN_S = 5  # Envoy's drain time when the parameters set none (as the host data plane's)
STOP_MARGIN_S = 10  # terminationGracePeriodSeconds beyond the drain: the hook's start, Envoy's exit
POD_NAME_ENV = "POD_NAME"  # the downward API's pod name, part of the Envoy's xDS node id


def node_id(gateway: str, pod: str) -> str:
    """The xDS node id of one Envoy pod of ``gateway`` ("ns/name"): ``ns/name/pod``
    (gateweave.xds.server serves it the Gateway's snapshot and reports it by pod)."""
    return f"{gateway}/{pod}"


def drain_hook(drain_s: int, admin_port: int = ENVOY_ADMIN_PORT) -> dict[str, Any]:
    """The Envoy container's preStop: start Envoy's graceful drain of its listeners through
    the admin (127.0.0.1 in the pod, so an exec, and bash's /dev/tcp since the image has no
    HTTP client), then wait the drain time; only then does Kubernetes send SIGTERM. Every
    listener drains (not ``inboundonly``: that skips listeners without a traffic direction,
    which gateweave's are)."""
    request = (
        "POST /drain_listeners?graceful HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n"
        "Content-Length: 0\\r\\nConnection: close\\r\\n\\r\\n"
    )
    script = (
        f"exec 3<>/dev/tcp/127.0.0.1/{admin_port} && printf '{request}' >&3 && timeout 5 cat <&3 "
        ">/dev/null; "
        f"sleep {drain_s}"
    )
    return {"preStop": {"exec": {"command": ["/bin/bash", "-c", script]}}}


def object_name(gateway_name: str) -> str:
    """``gateweave-<gateway>``, shortened with a hash to fit a DNS label (63)."""
    name = f"gateweave-{gateway_name}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(gateway_name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def class_object_name(class_name: str) -> str:
    """The objects of a merged GatewayClass: ``gateweave-<class>-<hash>`` (the hash of the
    class's node, so that no Gateway's own ``gateweave-<gateway>`` is likely to meet it),
    shortened to fit a DNS label (63)."""
    digest = hashlib.sha256(f"{MERGED_NAMESPACE}/{class_name}".encode()).hexdigest()[:8]
    return f"gateweave-{class_name}"[:54].rstrip("-") + f"-{digest}"


def is_merged(gw: InfraGateway) -> bool:
    """Whether ``gw`` is the one Envoy of a merged GatewayClass (translate/merging.py)."""
    return gw.namespace == MERGED_NAMESPACE


def pod_tls(
    xds_host: str, cert_dir: str = XDS_CERT_DIR, sds_dir: str = BOOTSTRAP_DIR
) -> XdsClientTls:
    """A pod's xDS TLS: the server must be ``xds_host``; the files where the pod mounts them."""
    return XdsClientTls(server_name=xds_host, cert_dir=cert_dir, sds_dir=sds_dir)


def bootstrap(
    gw: InfraGateway, xds_host: str, xds_port: int, tls: XdsClientTls | None = None
) -> dict[str, Any]:
    """The Envoy bootstrap for a Gateway's pod: ADS to the control plane's Service."""
    doc = render(
        BootstrapParams(
            node_id=gw.name,
            xds_host=xds_host,
            xds_port=xds_port,
            admin_port=ENVOY_ADMIN_PORT,
            admin_host="127.0.0.1",
            tls=tls,
            metadata=node_metadata(gw),
            stats_port=STATS_PORT,
            stats_paths=(*READ_PATHS, READY_PATH),
        )
    )
    if not is_ip(xds_host):  # a Service DNS name: resolve it
        for cluster in doc["static_resources"]["clusters"]:
            if cluster["name"] == XDS_CLUSTER:
                cluster["type"] = "STRICT_DNS"
    return doc


class KubernetesInfra:
    def __init__(
        self,
        client: KubeClient,
        *,
        xds_host: str,
        xds_port: int,
        image: str = DEFAULT_IMAGE,
        service_type: str = "LoadBalancer",
        certs: XdsCertificates | None = None,
        namespace: str = "default",
        scope: str = "",
    ) -> None:
        self.client = client
        self.namespace = namespace  # where a merged GatewayClass's objects go
        self.scope = scope  # the namespace the Gateways are watched in ("": all)
        self.certs = certs  # None: plain-text xDS
        self.tls = pod_tls(xds_host) if certs is not None else None
        self.client_files: dict[str, dict[str, str]] = {}  # Gateway -> its client Secret's files
        self.xds_host, self.xds_port = xds_host, xds_port
        self.image = image
        self.service_type = service_type
        self.enabled = True
        self.desired: dict[str, InfraGateway] = {}
        self.applied: dict[str, InfraGateway] = {}
        self.swept: set[str] = set()  # classes whose leftovers _delete_other_shape looked for

    # ------------------------------------------------------------ the infra sink

    async def update(self, changed: Mapping[str, InfraGateway], removed: Sequence[str]) -> None:
        for name in removed:
            self.desired.pop(name, None)
        self.desired.update(changed)
        if self.enabled:
            await self.reconcile()

    async def reconcile(self) -> None:
        """Make the cluster match :attr:`desired` (after a change, or on becoming leader)."""
        for name in sorted(self.applied.keys() - self.desired.keys()):
            self.client_files.pop(name, None)
            await self._delete(self.applied.pop(name))
        for name, gw in sorted(self.desired.items()):
            if self.applied.get(name) != gw:
                await self._apply(gw)
                self.applied[name] = gw

    async def renew(self) -> None:
        """Rewrite the client Secrets whose certificate is due (or whose CA changed)."""
        if not self.enabled or self.certs is None:
            return
        for name, gw in sorted(self.applied.items()):
            files = self._files(gw)
            if files != self.client_files.get(name):
                await self._write(SECRETS, self._secret(gw, files))
                self.client_files[name] = files  # once written: a failed write is tried again
                log.info("xDS client certificate renewed", gateway=name)

    # ------------------------------------------------------------ objects

    def _files(self, gw: InfraGateway) -> dict[str, str]:
        """The Gateway's client Secret files: the last ones if still good, else new ones."""
        assert self.certs is not None
        return self.certs.client_files(gw.name, self.client_files.get(gw.name))

    def _secret(self, gw: InfraGateway, files: Mapping[str, str]) -> dict[str, Any]:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in sorted(files.items())}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self._meta(gw),
            "type": "kubernetes.io/tls",
            "data": data,
        }

    def place(self, gw: InfraGateway) -> tuple[str, str]:
        """(namespace, name) of ``gw``'s objects: a Gateway's are in its namespace, a merged
        GatewayClass's in :attr:`namespace`."""
        if is_merged(gw):
            return self.namespace, class_object_name(gw.gateway_name)
        return gw.namespace, object_name(gw.gateway_name)

    @staticmethod
    def _owner(gw: InfraGateway) -> list[dict[str, Any]]:
        """The Gateway, or for a merged class's objects the GatewayClass (cluster-scoped)."""
        if not gw.uid:
            return []
        return [
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass" if is_merged(gw) else "Gateway",
                "name": gw.gateway_name,
                "uid": gw.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    def _meta(
        self, gw: InfraGateway, extra_labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        labels = {**gw.labels, **self.selector(gw), **(extra_labels or {})}
        namespace, name = self.place(gw)
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "labels": dict(sorted(labels.items())),
        }
        if gw.annotations:
            meta["annotations"] = dict(sorted(gw.annotations.items()))
        owner = self._owner(gw)
        if owner:
            meta["ownerReferences"] = owner
        return meta

    @staticmethod
    def selector(gw: InfraGateway) -> dict[str, str]:
        if is_merged(gw):
            return class_envoy_labels(gw.gateway_name)
        return envoy_labels(gw.gateway_name)

    def pod_owners(self) -> dict[tuple[str, str, str], str]:
        """(namespace, label, value) -> the Envoy (infra IR name) whose pods are there and
        carry that label (gateweave/kube/pods.py finds each pod's Envoy by it)."""
        out: dict[tuple[str, str, str], str] = {}
        for name, gw in self.desired.items():
            namespace, _ = self.place(gw)
            label = GATEWAY_CLASS_LABEL if is_merged(gw) else GATEWAY_NAME_LABEL
            out[(namespace, label, gw.gateway_name)] = name
        return out

    def manifests(self, gw: InfraGateway) -> list[tuple[ResourcePath, dict[str, Any]]]:
        _, name = self.place(gw)
        boot = json.dumps(
            bootstrap(gw, self.xds_host, self.xds_port, self.tls), indent=2, sort_keys=True
        )
        boot_hash = hashlib.sha256(boot.encode()).hexdigest()[:16]
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self._meta(gw)}
        files = {"bootstrap.json": boot, **(sds_files(self.tls) if self.tls is not None else {})}
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": self._meta(gw), "data": files}
        mounts = [{"name": "bootstrap", "mountPath": BOOTSTRAP_DIR, "readOnly": True}]
        volumes: list[dict[str, Any]] = [{"name": "bootstrap", "configMap": {"name": name}}]
        if self.tls is not None:
            mounts.append({"name": "xds-tls", "mountPath": XDS_CERT_DIR, "readOnly": True})
            volumes.append({"name": "xds-tls", "secret": {"secretName": name}})
        ports = [
            {
                "name": f"{p.protocol.lower()}-{p.port}",
                "containerPort": p.port,
                "protocol": p.protocol,
            }
            for p in gw.ports
        ]
        ports.append({"name": STATS_PORT_NAME, "containerPort": STATS_PORT, "protocol": "TCP"})
        scrape = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(STATS_PORT),
            "prometheus.io/path": PROMETHEUS_PATH.partition("?")[0],
        }
        pod_annotations = {**scrape, **gw.annotations, "gateweave.io/bootstrap-hash": boot_hash}
        envoy, kube = gw.envoy, gw.kubernetes
        args = [
            "--config-path",
            f"{BOOTSTRAP_DIR}/bootstrap.json",
            "--log-level",
            envoy.log_level or "warn",
            "--disable-hot-restart",
        ]
        if envoy.concurrency:
            args += ["--concurrency", str(envoy.concurrency)]
        drain_s = DEFAULT_DRAIN_S if envoy.drain_time_s is None else envoy.drain_time_s
        args += [
            "--drain-time-s",
            str(drain_s),
            "--service-node",
            node_id(gw.name, f"$({POD_NAME_ENV})"),
            *envoy_flags(envoy.extra_args),
        ]
        args += envoy.extra_args
        container: dict[str, Any] = {
            "name": "envoy",
            "image": self.image,
            "args": args,
            "env": [
                {"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            ],
            "ports": ports,
            # the kubelet probes the pod's address: the stats port passes /ready to the admin
            "readinessProbe": {"httpGet": {"path": READY_PATH, "port": STATS_PORT_NAME}},
            "lifecycle": drain_hook(drain_s),
            "volumeMounts": mounts,
        }
        resources = {k: v for k, v in (("requests", kube.requests), ("limits", kube.limits)) if v}
        if resources:
            container["resources"] = resources
        service_type = kube.service_type or self.service_type
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._meta(gw),
            "spec": {
                **(
                    {} if kube.autoscaling is not None else {"replicas": kube.replicas}
                ),  # else the HPA's
                "selector": {"matchLabels": self.selector(gw)},
                "template": {
                    "metadata": {
                        "labels": dict(sorted({**gw.labels, **self.selector(gw)}.items())),
                        "annotations": dict(sorted(pod_annotations.items())),
                    },
                    "spec": {
                        "serviceAccountName": name,
                        "automountServiceAccountToken": False,
                        "terminationGracePeriodSeconds": drain_s + STOP_MARGIN_S,
                        "containers": [container],
                        "volumes": volumes,
                    },
                },
            },
        }
        service_spec: dict[str, Any] = {
            "type": service_type,
            "selector": self.selector(gw),
            "ports": [
                {
                    "name": f"{p.protocol.lower()}-{p.port}",
                    "port": p.port,
                    "targetPort": p.port,
                    "protocol": p.protocol,
                }
                for p in gw.ports
            ],
        }
        if gw.requested_addresses and service_type == "LoadBalancer":
            service_spec["loadBalancerIP"] = gw.requested_addresses[0]
        elif gw.requested_addresses:
            service_spec["externalIPs"] = list(gw.requested_addresses)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self._meta(gw),
            "spec": service_spec,
        }
        secret = []
        if self.tls is not None:
            files = self.client_files[gw.name] = self._files(gw)
            secret = [(SECRETS, self._secret(gw, files))]
        return [
            (SERVICE_ACCOUNTS, sa),
            *secret,
            (CONFIG_MAPS, cm),
            (DEPLOYMENTS, deployment),
            (SERVICES, service),
            *self._fleet(gw),
        ]

    def _fleet(self, gw: InfraGateway) -> list[tuple[ResourcePath, dict[str, Any]]]:
        """The PodDisruptionBudget and HorizontalPodAutoscaler the parameters ask for."""
        out: list[tuple[ResourcePath, dict[str, Any]]] = []
        budget, scaling = gw.kubernetes.disruption_budget, gw.kubernetes.autoscaling
        if budget is not None:
            pdb_spec: dict[str, Any] = {"selector": {"matchLabels": self.selector(gw)}}
            if budget.min_available is not None:
                pdb_spec["minAvailable"] = budget.min_available
            if budget.max_unavailable is not None:
                pdb_spec["maxUnavailable"] = budget.max_unavailable
            out.append(
                (
                    DISRUPTION_BUDGETS,
                    {
                        "apiVersion": "policy/v1",
                        "kind": "PodDisruptionBudget",
                        "metadata": self._meta(gw),
                        "spec": pdb_spec,
                    },
                )
            )
        if scaling is not None:
            metrics = [
                {
                    "type": "Resource",
                    "resource": {
                        "name": resource,
                        "target": {"type": "Utilization", "averageUtilization": target},
                    },
                }
                for resource, target in (
                    ("cpu", scaling.cpu_utilization),
                    ("memory", scaling.memory_utilization),
                )
                if target is not None
            ]
            out.append(
                (
                    AUTOSCALERS,
                    {
                        "apiVersion": "autoscaling/v2",
                        "kind": "HorizontalPodAutoscaler",
                        "metadata": self._meta(gw),
                        "spec": {
                            "scaleTargetRef": {
                                "apiVersion": "apps/v1",
                                "kind": "Deployment",
                                "name": self.place(gw)[1],
                            },
                            "minReplicas": scaling.min_replicas,
                            "maxReplicas": scaling.max_replicas,
                            "metrics": metrics,
                        },
                    },
                )
            )
        return out

    async def _write(self, path: ResourcePath, obj: dict[str, Any]) -> None:
        await self.client.patch(
            path.item(obj["metadata"]["namespace"], obj["metadata"]["name"]),
            obj,
            APPLY_PATCH,
            field_manager=FIELD_MANAGER,
            force=True,
        )

    async def _apply(self, gw: InfraGateway) -> None:
        manifests = self.manifests(gw)
        for path, obj in manifests:
            await self._write(path, obj)
        # An optional object no longer asked for goes: known from what was applied before, or
        # (nothing applied yet by this process: a restart, a new leader) whatever may be left.
        before = self.applied.get(gw.name)
        had = set(OPTIONAL) if before is None else {path for path, _obj in self._fleet(before)}
        await self._delete_objects(self.place(gw), had - {path for path, _obj in manifests})
        if before is None:
            await self._delete_other_shape(gw)
        log.info("infrastructure applied", gateway=gw.name)

    async def _delete_other_shape(self, gw: InfraGateway) -> None:
        """Nothing applied yet by this process for ``gw`` (a restart, a new leader): its class
        may have switched merging while no controller converged it, so the objects of the
        other shape may be left: a merged class's Gateways' own, or an unmerged Gateway's
        class's shared ones (once per class). Within this process a switch is converged by
        :meth:`reconcile` (what was applied and is no longer desired is deleted)."""
        if gw.gateway_class in self.swept:
            return
        self.swept.add(gw.gateway_class)
        if is_merged(gw):  # its Gateways' own, found by their Deployments (one list)
            found = await self._deployments(self.scope, GATEWAY_NAME_LABEL)
            for member in gw.members:
                namespace, _, name = member.partition("/")
                if (namespace, object_name(name)) in found:
                    await self._delete_objects((namespace, object_name(name)), OWNED)
        else:
            place = (self.namespace, class_object_name(gw.gateway_class))
            if place in await self._deployments(self.namespace, GATEWAY_CLASS_LABEL):
                await self._delete_objects(place, OWNED)

    async def _deployments(self, namespace: str, label: str) -> set[tuple[str, str]]:
        """(namespace, name) of the Envoy Deployments in ``namespace`` ("": all) that carry
        ``label`` (a Gateway's or a merged class's)."""
        selector = ",".join([*(f"{k}={v}" for k, v in sorted(ENVOY_APP_LABELS.items())), label])
        items, _ = await self.client.list(
            DEPLOYMENTS.collection(namespace), label_selector=selector
        )
        return {
            (str(meta.get("namespace")), str(meta.get("name")))
            for meta in (item.get("metadata") or {} for item in items)
        }

    async def _delete(self, gw: InfraGateway) -> None:
        await self._delete_objects(self.place(gw), OWNED)
        log.info("infrastructure deleted", gateway=gw.name)

    async def _delete_objects(self, place: tuple[str, str], paths: Iterable[ResourcePath]) -> None:
        namespace, name = place
        for path in sorted(paths, key=OWNED.index):
            try:
                await self.client.delete(path.item(namespace, name))
            except KubeError as exc:
                if exc.code != 404:
                    raise
