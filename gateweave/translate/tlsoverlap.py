"""OverlappingTLSConfig: TLS listeners on one port whose hostnames or certificates overlap.

Gateway API v1.6, ``gateway_types.go``, ListenerConditionOverlappingTLSConfig: "Controllers
MUST detect the presence of overlapping hostnames and MAY detect the presence of overlapping
certificates. This condition MUST be set on all Listeners with overlapping TLS config." "If a
controller supports checking for both possible reasons and finds that both are true, it SHOULD
set the "OverlappingCertificates" Reason." And: "This is a negative polarity condition and
MUST NOT be set when it is False" - a listener without overlap has no such condition at all.

The listeners compared are those of one Gateway and its ListenerSets on one port (one Envoy
listener) that carry TLS - HTTPS, and TLS in either mode - and are in effect: accepted, not
conflicted, their references resolved (a listener that is not programmed has no TLS
configuration to overlap with).

Two overlaps, each meaning "some server name is matched by both":

* Hostnames, by the Gateway API's listener hostname rules: no hostname matches every name, and
  ``*.example.com`` matches every name below ``example.com`` at any depth. So
  ``*.example.com`` overlaps ``foo.example.com``, ``a.b.example.com`` and ``*.foo.example.com``.
* Certificates, by the rule TLS clients apply to a certificate's DNS subjectAltNames (RFC 6125
  6.4.3, what browsers and Go implement): a ``*`` is exactly one whole left-most label. The
  certificates of two listeners overlap when a DNS SAN of one of the first's certificates and
  a DNS SAN of one of the second's match a common name - the spec's example, ``*.example.com``
  and ``foo.example.com`` - or are the same name (one certificate used by both listeners
  overlaps itself). ``*.example.com`` does not overlap ``a.b.example.com`` nor ``example.com``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gateweave.translate import certs
from gateweave.translate import conditions as c
from gateweave.translate.context import ListenerCtx

_TLS_PROTOCOLS = frozenset({"HTTPS", "TLS"})

# (index of a listener in its port group, the hostname or SAN of it that was indexed)
_Hit = tuple[int, str]


def mark_overlapping(listeners: Sequence[ListenerCtx]) -> None:
    """Set ``overlap`` on every listener (of one Gateway and its ListenerSets) whose TLS
    configuration overlaps another one's on the same port."""
    by_port: dict[int, list[ListenerCtx]] = {}
    for lc in listeners:
        if lc.protocol in _TLS_PROTOCOLS and lc.accepted and lc.refs_problem is None:
            by_port.setdefault(lc.port, []).append(lc)
    for group in by_port.values():
        if len(group) < 2:
            continue
        by_host = hostname_overlaps([lc.hostname for lc in group])
        by_cert = certificate_overlaps([_sans(lc) for lc in group])
        for i, lc in enumerate(group):
            cert = by_cert[i]
            host = by_host[i]
            if cert is not None:
                (j, theirs), mine = cert
                lc.overlap = c.listener_overlapping_certificates(
                    f"the certificate SAN {mine} overlaps with the certificate SAN {theirs} of "
                    f"{_who(group[j])} on port {lc.port}"
                )
            elif host >= 0:
                other = group[host]
                lc.overlap = c.listener_overlapping_hostnames(
                    f"the hostname {lc.hostname or '(any)'} overlaps with the hostname "
                    f"{other.hostname or '(any)'} "
                    f"of {_who(other)} on port {lc.port}"
                )


def _who(lc: ListenerCtx) -> str:
    owner = lc.listener_set if lc.listener_set is not None else lc.gateway.gateway
    return f"listener {lc.name} of {owner.kind} {owner.metadata.namespace}/{owner.metadata.name}"


def _sans(lc: ListenerCtx) -> tuple[str, ...]:
    if lc.tls is None:
        return ()
    names: set[str] = set()
    for cert in lc.tls.certificates:
        names.update(certs.dns_names(cert.cert_pem))
    return tuple(sorted(names))


def _parents(name: str) -> Iterator[str]:
    """The domains strictly above ``name``: ``b.c`` and ``c`` for ``a.b.c``."""
    rest = name.partition(".")[2]
    while rest:
        yield rest
        rest = rest.partition(".")[2]


def _add(index: dict[str, list[_Hit]], key: str, i: int, name: str) -> None:
    hits = index.setdefault(key, [])
    if not hits or hits[-1][0] != i:  # one entry per listener and key
        hits.append((i, name))


def _other(hits: list[_Hit] | None, i: int) -> _Hit | None:
    """The first entry of another listener than ``i`` (each listener has one entry at most)."""
    if not hits:
        return None
    if hits[0][0] != i:
        return hits[0]
    return hits[1] if len(hits) > 1 else None


def hostname_overlaps(hostnames: Sequence[str | None]) -> list[int]:
    """For each listener hostname (None: any), the index of another one that overlaps it, or -1.

    Indexed by domain, so a port with many listeners costs their number times their depth,
    not their number squared."""
    anyname: list[_Hit] = []
    exact: dict[str, list[_Hit]] = {}
    wild: dict[str, list[_Hit]] = {}  # "example.com" for "*.example.com"
    below: dict[str, list[_Hit]] = {}  # a domain -> names and wildcards strictly below it
    for i, h in enumerate(hostnames):
        if h is None:
            anyname.append((i, ""))
            continue
        base = h[2:] if h.startswith("*.") else h
        _add(wild if h.startswith("*.") else exact, base, i, h)
        for d in _parents(base):
            _add(below, d, i, h)
    out: list[int] = []
    for i, h in enumerate(hostnames):
        if h is None:  # matches every name another listener can match
            out.append(0 if i != 0 else (1 if len(hostnames) > 1 else -1))
            continue
        hit = _other(anyname, i)
        if h.startswith("*."):
            base = h[2:]
            hit = hit or _other(wild.get(base), i) or _other(below.get(base), i)
        else:
            base = h
            hit = hit or _other(exact.get(base), i)
        for d in _parents(base):  # a wildcard above covers this name or wildcard
            hit = hit or _other(wild.get(d), i)
        out.append(hit[0] if hit is not None else -1)
    return out


def certificate_overlaps(sans: Sequence[tuple[str, ...]]) -> list[tuple[_Hit, str] | None]:
    """For each listener's certificate DNS SANs, ((index of another listener, its SAN), own SAN)
    for a pair of SANs both match some name (RFC 6125 wildcards), or None."""
    exact: dict[str, list[_Hit]] = {}
    wild: dict[str, list[_Hit]] = {}  # "example.com" for "*.example.com", "" for "*"
    child: dict[str, list[_Hit]] = {}  # a domain -> names exactly one label below it
    for i, names in enumerate(sans):
        for name in names:
            if name == "*" or name.startswith("*."):
                _add(wild, name[2:], i, name)
            else:
                _add(exact, name, i, name)
                _add(child, name.partition(".")[2], i, name)
    out: list[tuple[_Hit, str] | None] = []
    for i, names in enumerate(sans):
        found: tuple[_Hit, str] | None = None
        for name in names:
            if name == "*" or name.startswith("*."):
                hit = _other(wild.get(name[2:]), i) or _other(child.get(name[2:]), i)
            else:
                hit = _other(exact.get(name), i) or _other(wild.get(name.partition(".")[2]), i)
            if hit is not None:
                found = (hit, name)
                break
        out.append(found)
    return out
