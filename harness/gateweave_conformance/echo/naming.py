"""Pod names shaped like upstream's: ``<deployment>-<replicaset hash>-<suffix>``."""

from __future__ import annotations

import hashlib

# Kubernetes' SafeEncodeString alphabet: lowercase consonants and digits without
# look-alikes, so the tokens never contain "-" and never spell words.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _token(seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


def pod_name(deployment: str, replica_index: int, namespace: str = "") -> str:
    """A deterministic pod name for replica ``replica_index`` of ``deployment``.

    All replicas share the 10-character hash (as pods of one ReplicaSet do) and each
    gets its own 5-character suffix; dropping the last two ``-`` parts gives back
    ``deployment``.
    """
    if replica_index < 0:
        raise ValueError("replica_index must be >= 0")
    rs_hash = _token(f"rs/{namespace}/{deployment}", 10)
    used: set[str] = set()
    suffix = ""
    # Suffixes of lower indexes are regenerated so that indexes never collide.
    for index in range(replica_index + 1):
        attempt = 0
        while True:
            suffix = _token(f"pod/{namespace}/{deployment}/{index}/{attempt}", 5)
            if suffix not in used:
                break
            attempt += 1
        used.add(suffix)
    return f"{deployment}-{rs_hash}-{suffix}"
