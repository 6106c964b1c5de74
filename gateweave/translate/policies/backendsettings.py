"""SecurityPolicy ``backendSettings``: how Envoy reaches an auth service (``extAuth.http`` /
``extAuth.grpc``) or a remote JWKS (``jwt.providers[].remoteJWKS``).

The parts that are the upstream cluster's are BackendTrafficPolicy's, read by the same code
(upstream.py): ``loadBalancer``, ``circuitBreaker``, ``healthCheck``,
``timeout.tcp.connectTimeout``; the service is then reached through a copy of its cluster
carrying them (:func:`gateweave.ir.policy_cluster`). ``retry`` (retry.py: ``numRetries``,
``retryOn.triggers``, ``perRetry.backOff``) is the retry policy of the filter's own requests
(Envoy's ``retry_policy`` of the ext_authz service or of the JWKS fetch), and, for a JWKS,
``timeout.http.requestTimeout`` how long a fetch may take. Envoy retries those requests without
per-try timeouts or retriable status codes, so ``retry.perRetry.timeout`` and
``retry.retryOn.httpStatusCodes`` stay refused by name, with every other field of the CRD's
``ClusterSettings``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import retry, upstream

# The paths under ``backendSettings`` gateweave implements (fields.py's notation), beside
# upstream.py's: retry.py's retry but per-try timeouts and retriable status codes (Envoy retries a
# filter's own requests without them), and for a JWKS fetch its timeout.
_RETRY_FIELDS = frozenset(
    f
    for f in retry.FIELDS
    if f.startswith("retry")
    and f not in ("retry.perRetry.timeout", "retry.retryOn.httpStatusCodes")
)
_HTTP_TIMEOUT_FIELDS = frozenset({"timeout.http", "timeout.http.requestTimeout"})


def fields(prefix: str, request_timeout: bool) -> frozenset[str]:
    """The implemented paths of the ``backendSettings`` at ``prefix`` (``request_timeout``:
    with ``timeout.http.requestTimeout``)."""
    own = upstream.FIELDS | _RETRY_FIELDS
    if request_timeout:
        own |= _HTTP_TIMEOUT_FIELDS
    return frozenset({prefix} | {f"{prefix}.{f}" for f in own})


class Settings(msgspec.Struct, frozen=True):
    """What a ``backendSettings`` says (None: unset)."""

    cluster: ir.ClusterPolicy | None = None
    retry: ir.Retry | None = None
    request_timeout_s: float | None = None


_NONE = Settings()


def read(raw: Any, at: str, out: list[str]) -> Settings:
    """The ``backendSettings`` ``raw`` (at ``at``); problems, with their place, go to ``out``."""
    if raw is None:
        return _NONE
    if not isinstance(raw, dict):
        out.append(f"{at}: {raw!r} is not an object")
        return _NONE
    cluster = upstream.cluster_policy(raw, out, at)
    retry_, timeout = retry.settings(raw, out, at)
    if timeout is not None and timeout <= 0:
        out.append(f"{at}.timeout.http.requestTimeout must be more than 0")
    return Settings(cluster=cluster, retry=retry_, request_timeout_s=timeout)


def with_cluster_settings(cluster: ir.Cluster, settings: Settings) -> ir.Cluster:
    """``cluster``, or the copy of it carrying the settings' cluster policy."""
    if settings.cluster is None:
        return cluster
    name = ir.policy_cluster(cluster.name, settings.cluster)
    return msgspec.structs.replace(cluster, name=name, policy=settings.cluster)
