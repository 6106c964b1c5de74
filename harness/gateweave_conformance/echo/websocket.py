"""RFC 6455 for the echo's ``/ws``: the handshake checks of x/net/websocket and an echo loop."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import struct
from typing import TYPE_CHECKING

from gateweave_conformance.echo.httpmsg import Response

if TYPE_CHECKING:
    from gateweave_conformance.echo.conn import Prefixed
    from gateweave_conformance.echo.httpmsg import Request

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC11B85"
_MAX_MESSAGE = 16 << 20
_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_ORIGIN = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*:.+|/.*)")


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def check_handshake(req: Request) -> list[tuple[str, str]] | Response:
    """The 101 headers, or the error x/net/websocket answers (405, 400 or 403)."""
    if req.method != "GET":
        return Response(405, [("Connection", "close")])
    upgrade = req.header_get("Upgrade").lower()
    connection = req.header_get("Connection").lower()
    key = req.header_get("Sec-Websocket-Key")
    if upgrade != "websocket" or "upgrade" not in connection or not key:
        return Response(400, [("Connection", "close")])
    if req.header_get("Sec-Websocket-Version") != "13":
        return Response(400, [("Sec-WebSocket-Version", "13"), ("Connection", "close")])
    if not _ORIGIN.fullmatch(req.header_get("Origin")):
        return Response(403, [("Connection", "close")])
    return [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", accept_key(key)),
    ]


def encode_frame(opcode: int, payload: bytes, *, mask: bytes | None = None) -> bytes:
    """One final frame; servers send unmasked, clients pass a 4-byte ``mask``."""
    head = bytes([0x80 | opcode])
    mask_bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", n)
    if mask is not None:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


async def read_frame(reader: Prefixed | asyncio.StreamReader) -> tuple[bool, int, bytes]:
    """(fin, opcode, unmasked payload); raises IncompleteReadError at EOF."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if n > _MAX_MESSAGE:
        raise ValueError("websocket frame too large")
    mask = await reader.readexactly(4) if b1 & 0x80 else b""
    payload = await reader.readexactly(n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bool(b0 & 0x80), b0 & 0x0F, payload


async def echo_loop(reader: Prefixed, writer: asyncio.StreamWriter) -> None:
    """Echo each data message until the peer closes.

    Upstream replies in text frames; a payload that is not UTF-8 goes back binary so
    that strict clients do not fail on it.
    """
    message = bytearray()
    while True:
        try:
            fin, opcode, payload = await read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            return
        if opcode == _OP_CLOSE:
            writer.write(encode_frame(_OP_CLOSE, payload[:2]))
            await writer.drain()
            return
        if opcode == _OP_PING:
            writer.write(encode_frame(_OP_PONG, payload))
            await writer.drain()
            continue
        if opcode == _OP_PONG:
            continue
        if opcode not in (_OP_CONT, _OP_TEXT, _OP_BINARY):
            return
        message += payload
        if len(message) > _MAX_MESSAGE:
            return
        if not fin:
            continue
        data = bytes(message)
        message.clear()
        try:
            data.decode("utf-8")
            reply_op = _OP_TEXT
        except UnicodeDecodeError:
            reply_op = _OP_BINARY
        writer.write(encode_frame(reply_op, data))
        await writer.drain()
