"""The coredns stand-in: answer a DNS query with its ID, QR set and the question echoed.

Like CoreDNS' ``whoami`` it answers NOERROR with no answers and, in the additional
section, the client's address (A or AAAA) and port (SRV ``_udp.<qname>``).
"""

from __future__ import annotations

import ipaddress
import struct

_FORMERR = 1


def _question_end(query: bytes) -> int:
    """Offset just past the first question (name, type, class); ValueError if malformed."""
    i = 12
    for _ in range(128):
        if i >= len(query):
            raise ValueError("truncated name")
        length = query[i]
        if length == 0:
            i += 1
            break
        if length & 0xC0:
            raise ValueError("compressed name in question")
        i += 1 + length
    else:
        raise ValueError("name too long")
    if i + 4 > len(query):
        raise ValueError("truncated question")
    return i + 4


def answer(query: bytes, client_ip: str, client_port: int) -> bytes | None:
    """The reply datagram, or None for something that is not a DNS query."""
    if len(query) < 12:
        return None
    qid, flags, qdcount = struct.unpack("!HHH", query[:6])
    if flags & 0x8000:  # a response, not a query
        return None
    opcode_rd = flags & 0x7900  # opcode and RD copied
    if qdcount != 1:
        return struct.pack("!HHHHHH", qid, 0x8000 | opcode_rd | _FORMERR, 0, 0, 0, 0)
    try:
        end = _question_end(query)
    except ValueError:
        return struct.pack("!HHHHHH", qid, 0x8000 | opcode_rd | _FORMERR, 0, 0, 0, 0)
    question = query[12:end]
    name_ptr = b"\xc0\x0c"  # the question's name
    addr = ipaddress.ip_address(client_ip)
    if addr.version == 4:
        ip_rr = name_ptr + struct.pack("!HHIH", 1, 1, 0, 4) + addr.packed
    else:
        ip_rr = name_ptr + struct.pack("!HHIH", 28, 1, 0, 16) + addr.packed
    srv_name = b"\x04_udp" + name_ptr
    srv_rdata = struct.pack("!HHH", 0, 0, client_port) + b"\x00"
    srv_rr = srv_name + struct.pack("!HHIH", 33, 1, 0, len(srv_rdata)) + srv_rdata
    header = struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | opcode_rd, 1, 0, 0, 2)
    return header + question + ip_rr + srv_rr
