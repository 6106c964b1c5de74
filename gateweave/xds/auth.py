"""Who may talk to the ADS server over mutual TLS, and as which node.

:class:`ServerTls` gives the server its TLS credentials: the server certificate and the CA
certificates a client's certificate must chain to (``require_client_authentication``: a
client without one, or with one from another CA, fails the handshake and gets nothing).
Both may change while the server runs (:meth:`ServerTls.update`, on renewal or CA rotation):
gRPC asks for the current ones at every new handshake, so connected clients keep their
connection and new ones meet the new certificates.

:func:`peer_node` reads the node a connected client's certificate names (its URI SAN, see
:func:`gateweave.xds.pki.gateway_identity`): the server serves that node only, and takes
ACKs and NACKs for it only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc

from gateweave.xds.pki import KeyPair, node_of_identity


class ServerTls:
    def __init__(self, trusted_pem: str, server: KeyPair) -> None:
        self._config = self._make(trusted_pem, server)
        self._fresh = False  # whether gRPC has yet to fetch _config

    @staticmethod
    def _make(trusted_pem: str, server: KeyPair) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(server.key_pem.encode(), server.cert_pem.encode())],
            root_certificates=trusted_pem.encode(),
        )

    def update(self, trusted_pem: str, server: KeyPair) -> None:
        """New certificates for the handshakes from now on."""
        self._config = self._make(trusted_pem, server)
        self._fresh = True

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        if not self._fresh:
            return None  # keep the current one
        self._fresh = False
        return self._config

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._config, self._fetch, require_client_authentication=True
        )


def peer_node(auth_context: Mapping[str, Sequence[bytes]]) -> str | None:
    """The one xDS node the peer's (verified) certificate names, else ``None``."""
    nodes = {
        node_of_identity(v.decode(errors="replace"))
        for v in auth_context.get("x509_subject_alternative_name", ())
    }
    nodes.discard(None)
    return nodes.pop() if len(nodes) == 1 else None
