"""Answers' content codings (``Content-Encoding``): the body as the backend wrote it.

A case checks an echo answer's JSON whether or not the gateway compressed it (a
BackendTrafficPolicy's ``compressor``), so the runner reads every answer's raw bytes and
undoes its codings itself: gzip (and deflate) with the standard library, br with ``brotli``,
zstd with ``zstandard``. A coding it does not know, or a body that does not decode, is a
:class:`EncodingError` naming it.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import brotli
import zstandard


class EncodingError(ValueError):
    """An answer's body that cannot be decoded as its ``Content-Encoding`` says."""


def _zstd(data: bytes) -> bytes:
    # A streamed frame may not carry its size: decompress as a stream.
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _deflate(data: bytes) -> bytes:
    return zlib.decompress(data)


_DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": _deflate,
    "br": brotli.decompress,
    "zstd": _zstd,
}


def decode(content_encoding: str | None, raw: bytes) -> bytes:
    """``raw`` with the codings ``content_encoding`` lists undone (the last applied first)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    body = raw
    for coding in reversed(codings):
        if coding == "identity":
            continue
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise EncodingError(
                f"the answer's Content-Encoding {coding!r} is not one the runner reads"
            )
        try:
            body = decoder(body)
        except (OSError, EOFError, zlib.error, brotli.error, zstandard.ZstdError) as exc:
            raise EncodingError(f"the answer's body is not valid {coding}: {exc}") from exc
    return body
