"""xDS mutual TLS in the Kubernetes data plane, against the API-server stand-in: one CA in a
Secret however replicas race to create it; certificates (the CA's too) renewed before they
expire without a client ever failing to connect; a real Envoy started from the bootstrap and
files a Gateway's pod gets is served its route over mutual TLS and picks up a renewed
certificate without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import urllib.request
from pathlib import Path

from cryptography import x509

from gateweave.app import KubeDataplane
from gateweave.infra.host import free_port
from gateweave.kube.client import KubeClient
from gateweave.kube.xdsca import CA_SECRET, CertLifetimes, XdsCertificates, authority_of, ca_secret
from gateweave.sinks.kubeinfra import ENVOY_ADMIN_PORT, object_name
from gateweave.xds import pki
from gateweave_bench import harness as h
from tests.support.kubeapi import KubeAPI, Request, serving, settle, write_kubeconfig
from tests.support.kubeenvoy import envoy, mount_config_map, quickstart, until, until_reply
from tests.support.xdsclient import envoy_pod, secret_files

NS = "gateweave-system"
NODE = "default/quickstart"


async def test_replicas_racing_to_create_the_ca_end_with_one(tmp_path: Path) -> None:
    api = KubeAPI()
    await api.start()
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    clients = [await KubeClient.from_kubeconfig(kc) for _ in range(3)]
    winner = pki.Authority.generate(datetime.datetime.now(datetime.UTC))

    def other_replica_first(req: Request) -> None:
        # the first create: another replica's create lands between this one's read and create
        if (
            req.verb == "create"
            and req.resource == "secrets"
            and api.get("Secret", NS, CA_SECRET) is None
        ):
            api.put(ca_secret(NS, winner))

    api.hooks.append(other_replica_first)
    try:
        replicas = [XdsCertificates(c, NS, ["gateweave.gateweave-system.svc"]) for c in clients]
        await asyncio.gather(*(r.start() for r in replicas))
        assert all(r.authority == pki.Authority(winner.current) for r in replicas)
        stored = api.get("Secret", NS, CA_SECRET)
        assert stored is not None and authority_of(stored) == pki.Authority(winner.current)
        assert (
            api.requests(verb="create", resource="secrets", ok=True) == []
        )  # every create lost: 409
    finally:
        for c in clients:
            await c.close()
        await api.stop()


async def test_certificates_rotate_before_expiry_without_a_failed_connection(
    tmp_path: Path,
) -> None:
    """Lifetimes of seconds: the CA rotates (trusted with the old one until that expires), the
    server's and the Gateway's certificates are renewed; a pod reconnecting all along with what
    its Secret holds at that moment always gets its listeners, and a stream opened before the
    rotation is not cut."""
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    quickstart(api)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    xds_port = free_port()
    short = CertLifetimes(ca=8.0, leaf=3.0, propagation=0.5, check_interval=0.1)
    name = object_name("quickstart")
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(xds_bind="127.0.0.1", xds_port=xds_port, certificates=short),
            lease_namespace=NS,
        ) as (runtime, source):
            await settle(api, runtime, source)
            first = secret_files(await until(lambda: api.get("Secret", "default", name)))
            first_ca = authority_of(api.get("Secret", NS, CA_SECRET) or {})
            client_certs, cas = {first["tls.crt"]}, {first_ca.current.cert_pem}
            async with envoy_pod(xds_port, NODE, first) as long_lived:
                await until(lambda: bool(long_lived))
                connections = 0
                # until the first CA has been replaced and has expired (bounded by the loop)
                for _ in range(400):
                    files = secret_files(api.get("Secret", "default", name) or {})
                    client_certs.add(files["tls.crt"])
                    cas.add(authority_of(api.get("Secret", NS, CA_SECRET) or {}).current.cert_pem)
                    async with envoy_pod(xds_port, NODE, files) as listeners:
                        await until(lambda: bool(listeners), timeout=5.0)  # raises if refused
                    connections += 1
                    if pki.expired(first_ca.current.cert_pem, datetime.datetime.now(datetime.UTC)):
                        break
                    await asyncio.sleep(0.05)
                assert pki.expired(first_ca.current.cert_pem, datetime.datetime.now(datetime.UTC))
                assert long_lived  # the stream opened first was never cut
            assert len(cas) >= 2 and len(client_certs) >= 3, (
                len(cas),
                len(client_certs),
                connections,
            )
            # a certificate of the first CA is refused now that it expired (nothing trusts it)
            with contextlib.suppress(TimeoutError):
                async with envoy_pod(xds_port, NODE, first) as stale:
                    await until(lambda: bool(stale), timeout=1.0)
            assert not stale
    finally:
        await api.stop()


# ---------------------------------------------------------------- a real Envoy


def write_secret_volume(directory: Path, files: dict[str, str], generation: int) -> None:
    """The kubelet's layout of a mounted Secret: the files in a timestamped directory,
    ``..data`` linking to it (swapped atomically on update), each name linking through it."""
    directory.mkdir(parents=True, exist_ok=True)
    version = directory / f"..{generation}"
    version.mkdir()
    for key, text in files.items():
        (version / key).write_text(text)
    tmp = directory / "..data_tmp"
    tmp.symlink_to(version.name)
    tmp.replace(directory / "..data")
    for key in files:
        link = directory / key
        if not link.is_symlink():
            link.symlink_to(f"..data/{key}")


def xds_client_serial() -> int | None:
    """The serial number of the client certificate Envoy's xDS
    connection presents (admin /certs).
    """
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{ENVOY_ADMIN_PORT}/certs", timeout=1
        ) as resp:
            certs = json.load(resp)["certificates"]
    except OSError:
        return None
    for entry in certs:
        for chain in entry.get("cert_chain", []):
            if any(
                s.get("uri") == pki.gateway_identity(NODE)
                for s in chain.get("subject_alt_names", [])
            ):
                return int(chain["serial_number"], 16)
    return None


def serial(cert_pem: str) -> int:
    return x509.load_pem_x509_certificate(cert_pem.encode()).serial_number


async def test_an_envoy_with_the_pods_bootstrap_is_served_over_mtls(tmp_path: Path) -> None:
    backend = h.NameServer("demo")
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    quickstart(api, backend.port)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    xds_port = free_port()
    name = object_name("quickstart")
    boot_dir, cert_dir = tmp_path / "etc-envoy", tmp_path / "etc-gateweave-xds"
    # the leaf lives 6 s: renewed after 4 s
    lifetimes = CertLifetimes(leaf=6.0, check_interval=0.2)
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(
                xds_bind="127.0.0.1",
                xds_port=xds_port,
                xds_host="127.0.0.1",
                certificates=lifetimes,
            ),
            lease_namespace=NS,
        ) as (runtime, source):
            await settle(api, runtime, source)
            config_map = api.get("ConfigMap", "default", name)
            secret = api.get("Secret", "default", name)
            assert config_map is not None and secret is not None
            # the pod's volumes, where this test can write them: the same text, mount paths moved
            bootstrap = mount_config_map(config_map, boot_dir, cert_dir)
            files = secret_files(secret)
            write_secret_volume(cert_dir, files, 1)
            with envoy(bootstrap, tmp_path / "envoy.log") as proc:
                reply = await until_reply(
                    lambda: h.fetch("127.0.0.1", 8080, "/", "demo.example.com")
                )
                assert reply.status == 200 and reply.headers["x-served-by"] == "gateweave"
                assert xds_client_serial() == serial(files["tls.crt"])

                # renewed: the kubelet swaps the files; Envoy presents the new certificate, no
                # restart
                renewed = secret_files(
                    await until(
                        lambda: (
                            (s := api.get("Secret", "default", name)) is not None
                            and secret_files(s) != files
                            and s
                        ),
                        timeout=15,
                    )
                )
                write_secret_volume(cert_dir, renewed, 2)
                await until(lambda: xds_client_serial() == serial(renewed["tls.crt"]), timeout=10)
                assert proc.poll() is None
                reply = await until_reply(
                    lambda: h.fetch("127.0.0.1", 8080, "/", "demo.example.com")
                )
                assert reply.status == 200
    finally:
        await api.stop()
        backend.close()
        print(
            (tmp_path / "envoy.log").read_text() if (tmp_path / "envoy.log").exists() else "",
            end="",
        )


async def test_plain_text_xds_only_when_asked_for(tmp_path: Path) -> None:
    api = KubeAPI(bookmark_interval=0.02)
    await api.start()
    quickstart(api)
    kc = write_kubeconfig(api, str(tmp_path / "kc"))
    xds_port = free_port()
    name = object_name("quickstart")
    try:
        async with serving(
            api,
            kc,
            KubeDataplane(xds_bind="127.0.0.1", xds_port=xds_port, xds_plaintext=True),
            lease_namespace=NS,
        ) as (runtime, source):
            await settle(api, runtime, source)
            config_map = api.get("ConfigMap", "default", name)
            assert config_map is not None and set(config_map["data"]) == {"bootstrap.json"}
            assert (
                "transport_socket"
                not in json.loads(config_map["data"]["bootstrap.json"])["static_resources"][
                    "clusters"
                ][0]
            )
            assert (
                api.get("Secret", "default", name) is None
                and api.get("Secret", NS, CA_SECRET) is None
            )
            async with envoy_pod(xds_port, NODE) as listeners:  # no credentials at all
                await until(lambda: bool(listeners))
    finally:
        await api.stop()
