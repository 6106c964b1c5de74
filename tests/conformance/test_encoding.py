"""The conformance runner reads an answer's body with its Content-Encoding undone."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
import zstandard

from gateweave_conformance.encoding import EncodingError, decode

BODY = b'{"path": "/", "host": "example.com"}' * 4


@pytest.mark.parametrize(
    ("coding", "data"),
    [
        ("gzip", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),
        ("br", brotli.compress(BODY)),
        ("zstd", zstandard.ZstdCompressor().compress(BODY)),
        ("identity", BODY),
        (None, BODY),
    ],
)
def test_each_coding(coding: str | None, data: bytes) -> None:
    assert decode(coding, data) == BODY


def test_codings_undone_last_first() -> None:
    assert decode("gzip, br", brotli.compress(gzip.compress(BODY))) == BODY


def test_unknown_or_broken_bodies_named() -> None:
    with pytest.raises(EncodingError, match="'compress' is not one the runner reads"):
        decode("compress", BODY)
    with pytest.raises(EncodingError, match="not valid br"):
        decode("br", BODY)
    with pytest.raises(EncodingError, match="not valid gzip"):
        decode("gzip", BODY)
