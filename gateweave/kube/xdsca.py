"""gateweave's xDS certificate authority, kept in a Secret in the controller's namespace, and
the certificates made from it: the xDS server's and, per Gateway, its Envoy's client
certificate (gateweave/xds/pki.py makes them).

* The CA Secret (:data:`CA_SECRET`) is shared by every replica: each reads it, and if it is
  absent creates it; two replicas racing to create it end with one CA (the loser's create
  fails with 409 AlreadyExists and it reads the winner's).
* :meth:`XdsCertificates.refresh` (every ``check_interval``, :meth:`XdsCertificates.run`)
  reads the Secret again (another replica may have rotated the CA), rotates the CA once
  2/3 of its lifetime has passed (an update carrying the resourceVersion read: of two
  replicas rotating at once one wins, the other reads its CA) and renews the server
  certificate when due or when another CA became the issuer. The replaced CA stays trusted
  until it expires, and a new CA signs nothing before ``propagation`` has passed (the time
  the kubelet takes to update mounted Secrets): no peer ever meets a certificate signed by a
  CA it does not trust yet.
* :meth:`XdsCertificates.client_files` gives a Gateway's Secret (``tls.crt``, ``tls.key``,
  ``ca.crt``), renewed when due, when the issuer changed, or when the trusted CAs changed.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from gateweave.infra.bootstrap import CA_FILE, CERT_FILE, KEY_FILE
from gateweave.kube.client import KubeClient, KubeError, ResourcePath
from gateweave.xds import pki
from gateweave.xds.auth import ServerTls

log = structlog.get_logger("gateweave.kube.xdsca")

SECRETS = ResourcePath("", "v1", "secrets", True)
CA_SECRET = "gateweave-xds-ca"

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class CertLifetimes:
    ca: float = pki.CA_LIFETIME.total_seconds()  # seconds
    leaf: float = pki.LEAF_LIFETIME.total_seconds()  # the server's and Gateways' certificates
    propagation: float = 120.0  # a new CA signs nothing before it is this old
    check_interval: float = 60.0  # how often certificates are checked for renewal


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return base64.b64decode(value).decode() if isinstance(value, str) else ""


def ca_secret(
    namespace: str, authority: pki.Authority, resource_version: str = ""
) -> dict[str, Any]:
    data = {"ca.crt": authority.current.cert_pem, "ca.key": authority.current.key_pem}
    if authority.previous is not None:
        data |= {
            "previous.crt": authority.previous.cert_pem,
            "previous.key": authority.previous.key_pem,
        }
    meta: dict[str, Any] = {
        "name": CA_SECRET,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "gateweave"},
    }
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "data": {k: _b64(v) for k, v in data.items()},
    }


def authority_of(secret: Mapping[str, Any]) -> pki.Authority:
    data = secret.get("data") or {}
    current = pki.KeyPair(_text(data, "ca.crt"), _text(data, "ca.key"))
    if not current.cert_pem or not current.key_pem:
        raise ValueError(f"Secret {CA_SECRET} has no ca.crt and ca.key")
    previous = pki.KeyPair(_text(data, "previous.crt"), _text(data, "previous.key"))
    return pki.Authority(current, previous if previous.cert_pem and previous.key_pem else None)


class XdsCertificates:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        server_hosts: list[str],
        lifetimes: CertLifetimes | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.server_hosts = server_hosts
        self.lifetimes = lifetimes or CertLifetimes()
        self.clock = clock
        self.authority: pki.Authority | None = None
        self._resource_version = ""
        self.server: pki.KeyPair | None = None
        self.tls: ServerTls | None = None

    @property
    def _ca_lifetime(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.lifetimes.ca)

    @property
    def _leaf_lifetime(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.lifetimes.leaf)

    def _issuer(self, authority: pki.Authority, now: datetime.datetime) -> pki.KeyPair:
        return authority.issuer(now, datetime.timedelta(seconds=self.lifetimes.propagation))

    # ------------------------------------------------------------ the CA Secret

    async def _read(self) -> dict[str, Any] | None:
        try:
            return await self.client.get(SECRETS.item(self.namespace, CA_SECRET))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    async def _load(self) -> pki.Authority:
        """The CA in the Secret, created if absent (one CA whoever races to create it)."""
        secret = await self._read()
        if secret is None:
            created = pki.Authority.generate(self.clock(), self._ca_lifetime)
            try:
                secret = await self.client.create(
                    SECRETS.collection(self.namespace), ca_secret(self.namespace, created)
                )
                log.info("xDS CA created", secret=f"{self.namespace}/{CA_SECRET}")
            except KubeError as exc:
                if exc.code != 409:
                    raise
                secret = await self._read()  # another replica created it first
                if secret is None:
                    raise
        self._resource_version = str((secret.get("metadata") or {}).get("resourceVersion") or "")
        return authority_of(secret)

    async def rotate(self) -> None:
        """Rotate the CA now (as :meth:`refresh` does once it is due)."""
        self.authority = await self._rotate(await self._load())
        await self.refresh()

    async def _rotate(self, authority: pki.Authority) -> pki.Authority:
        rotated = authority.rotated(self.clock(), self._ca_lifetime)
        try:
            secret = await self.client.replace(
                SECRETS.item(self.namespace, CA_SECRET),
                ca_secret(self.namespace, rotated, self._resource_version),
            )
        except KubeError as exc:
            if exc.code != 409:
                raise
            return await self._load()  # another replica rotated it first: take its CA
        self._resource_version = str((secret.get("metadata") or {}).get("resourceVersion") or "")
        log.info("xDS CA rotated", secret=f"{self.namespace}/{CA_SECRET}")
        return rotated

    # ------------------------------------------------------------ renewal

    async def refresh(self) -> bool:
        """Read the CA, rotate it if due, renew the server certificate if due; ``True`` if the
        trusted CAs or the issuing CA changed (Gateways' certificates then need renewing)."""
        authority = await self._load()
        now = self.clock()
        if pki.due(authority.current.cert_pem, now):
            authority = await self._rotate(authority)
        before = self.authority
        self.authority = authority
        issuer = self._issuer(authority, now)
        changed = (
            before is None
            or before.bundle(now) != authority.bundle(now)
            or (self._issuer(before, now) != issuer)
        )
        if (
            self.server is None
            or changed
            or pki.due(self.server.cert_pem, now)
            or not pki.issued_by(self.server.cert_pem, issuer)
        ):
            self.server = pki.issue_server(issuer, self.server_hosts, now, self._leaf_lifetime)
            if self.tls is None:
                self.tls = ServerTls(authority.bundle(now), self.server)
            else:
                self.tls.update(authority.bundle(now), self.server)
            log.info("xDS server certificate issued", hosts=",".join(self.server_hosts))
        return changed

    async def start(self) -> ServerTls:
        """Load (or create) the CA and issue the server certificate: the server's TLS."""
        await self.refresh()
        assert self.tls is not None
        return self.tls

    async def run(self, on_change: Callable[[], Any]) -> None:
        """Check every ``check_interval``; after a renewal call ``on_change()`` (awaited if a
        coroutine): the Gateways' Secrets are renewed then (and whenever theirs are due)."""
        while True:
            await asyncio.sleep(self.lifetimes.check_interval)
            try:
                await self.refresh()
                result = on_change()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API server unreachable: try again next time
                log.warning("xDS certificates not renewed", error=str(exc))

    # ------------------------------------------------------------ Gateways

    def client_files(
        self, node_id: str, current: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The files of the Gateway ``node_id``'s client Secret: ``current`` if still good,
        else newly issued."""
        assert self.authority is not None, "start() first"
        now = self.clock()
        issuer = self._issuer(self.authority, now)
        bundle = self.authority.bundle(now)
        if (
            current
            and current.get(CA_FILE) == bundle
            and current.get(CERT_FILE)
            and not pki.due(current[CERT_FILE], now)
            and pki.issued_by(current[CERT_FILE], issuer)
        ):
            return dict(current)
        pair = pki.issue_client(issuer, node_id, now, self._leaf_lifetime)
        return {CERT_FILE: pair.cert_pem, KEY_FILE: pair.key_pem, CA_FILE: bundle}
