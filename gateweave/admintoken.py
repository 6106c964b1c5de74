"""The admin API's bearer token: where the server gets it, where a client finds it.

The server's token is read from ``serve --admin-token-file FILE`` (a file nobody but its
owner may read: a group- or world-readable one is refused), else ``$GATEWEAVE_ADMIN_TOKEN``
(in Kubernetes: from a Secret), else a fresh random one is written to ``<state dir>/admin-token``
(0600) at every start, where the operator's CLI on
this machine finds it. A client (``gateweave status``, ``logs``, ``explain``) takes
``--admin-token-file``, else ``$GATEWEAVE_ADMIN_TOKEN``, else the ``admin-token`` of the
state directory of ``--config-dir`` (the served directory's default state directory) or
of ``--state-dir``.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from gateweave.errors import OperatorError

TOKEN_FILE = "admin-token"
TOKEN_ENV = "GATEWEAVE_ADMIN_TOKEN"
COOKIE = "gateweave-admin-token"
_MAX_BYTES = 4096


class AdminTokenError(OperatorError):
    """A token file that cannot be used, said in one line."""


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (its first line); refused when group or world may read it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise AdminTokenError(
            f"cannot read admin token file {path}: {exc.strerror or exc}"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AdminTokenError(f"admin token file {path} is not a regular file")
        if info.st_mode & 0o077:
            raise AdminTokenError(
                f"admin token file {path} is readable by others (mode "
                f"{stat.S_IMODE(info.st_mode):04o});"
                f" chmod 600 {path}"
            )
        raw = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    lines = raw.decode(errors="replace").splitlines()
    token = lines[0].strip() if lines else ""
    if len(raw) > _MAX_BYTES or not token:
        raise AdminTokenError(
            f"admin token file {path}: its first line must hold the token (at most {_MAX_BYTES} "
            "bytes)"
        )
    return token


def write_new_token(path: Path) -> str:
    """A fresh random token, written to ``path`` (mode 0600, its directory 0700 if created)."""
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (token + "\n").encode())
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError as exc:
        raise AdminTokenError(
            f"cannot write the admin token to {path}: {exc.strerror or exc}"
            " (pass --admin-token-file)"
        ) from None
    return token


def matches(given: str | None, token: str) -> bool:
    """Whether ``given`` is ``token`` (compared in constant time)."""
    # (a hostile header may hold anything: replaced, it still never equals a token)
    return given is not None and hmac.compare_digest(
        given.encode(errors="replace"), token.encode(errors="replace")
    )


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    scheme, _, value = (header or "").strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def client_token(
    token_file: str | None, config_dir: str | None = None, state_dir: str | None = None
) -> str | None:
    """The token a CLI client sends: ``--admin-token-file``, else ``$GATEWEAVE_ADMIN_TOKEN``,
    else the state directory's (``--state-dir``, else the default one of ``--config-dir``);
    ``None`` when none is found (the server will say 401)."""
    if token_file:
        return read_token_file(token_file)
    if os.environ.get(TOKEN_ENV, "").strip():
        return os.environ[TOKEN_ENV].strip()
    from gateweave.infra.statedir import default_state_dir

    directory = (
        Path(state_dir) if state_dir else default_state_dir(config_dir) if config_dir else None
    )
    if directory is not None and (directory / TOKEN_FILE).is_file():
        return read_token_file(directory / TOKEN_FILE)
    return None


def client_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


HOW_TO_PASS = (
    f"pass --admin-token-file FILE, set ${TOKEN_ENV}, or --config-dir/--state-dir of the served"
    f" configuration (whose {TOKEN_FILE} serve wrote)"
)
