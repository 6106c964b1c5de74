"""The stored form kept packed (gateweave/api/packing.py): read back exactly as it was given,
and smaller than deflate alone makes it, thanks to the preset dictionary of field names."""

from __future__ import annotations

import copy
import zlib

import msgspec

from gateweave.api import models as m
from gateweave.api import packing
from gateweave.api.decode import decode
from tests.support.conformance_objects import all_case_files, case_raws


def test_every_conformance_object_reads_back_as_it_was_stored() -> None:
    count = 0
    for case_file in all_case_files():
        for raw in case_raws(case_file):
            dec, errors = decode(copy.deepcopy(raw))
            assert not errors, errors
            if dec is None:
                continue
            packed = dec.packed()
            assert packed is not dec  # (kept as bytes, not the dict)
            assert packed.raw == dec.raw and packed.status == dec.status
            assert packed.raw is not packed.raw  # a new dict on each read
            count += 1
    assert count > 500


def test_values_of_every_json_type_round_trip() -> None:
    value = {"a": [1, -2, 2**63 - 1, 1.5, True, False, None, "", "é" * 300], "b": {"c": {}}}
    assert packing.unpack(packing.pack(value)) == value


def _route(name: str) -> dict[str, object]:
    return {
        "apiVersion": f"{m.GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": [f"{name}.example.com"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}],
                    "backendRefs": [{"name": f"svc-{name}", "port": 8080}],
                }
            ],
        },
    }


def test_the_preset_dictionary_shares_the_field_names_between_objects() -> None:
    dec, errors = decode(_route("shop"))
    assert not errors and dec is not None
    plain = msgspec.msgpack.encode(dec.raw)
    packed = packing.pack(dec.raw)
    # Without the dictionary, deflate has nothing to refer a small object's field names to.
    assert len(packed) < 0.7 * len(zlib.compress(plain, 9))
    assert packing.unpack(packed) == dec.raw


def test_objects_packed_one_after_another_and_from_threads_each_stand_alone() -> None:
    """Each object is packed by a copy of one primed compressor: what one object leaves in it
    must not reach the next (each unpacks alone, to the bytes a fresh compressor makes), also
    when threads pack at once (the file provider reads in worker threads)."""
    from concurrent.futures import ThreadPoolExecutor

    raws = [_route(f"r{i}") for i in range(200)]

    def fresh(raw: object) -> bytes:
        z = zlib.compressobj(
            packing._LEVEL,
            zlib.DEFLATED,
            packing._WBITS,
            packing._MEM_LEVEL,
            zdict=packing.dictionary(),
        )
        return z.compress(msgspec.msgpack.encode(raw)) + z.flush()

    assert [packing.pack(raw) for raw in raws] == [fresh(raw) for raw in raws]
    with ThreadPoolExecutor(4) as pool:
        packed = list(pool.map(packing.pack, raws * 5))
    assert [packing.unpack(p) for p in packed] == raws * 5
    assert packed == [fresh(raw) for raw in raws * 5]
