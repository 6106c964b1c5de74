"""Resource versions are a content hash: the same objects give the same versions in any process.

A restarted gateweave adopts the Envoys its predecessor left running; it serves them the same
configuration under the same versions only if nothing in the bytes depends on the process.
Maps inside a packed ``Any`` (a JSON access-log format's ``Struct``, ext_authz's context
extensions) are where the protobuf runtime's own order would show.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.data import ROOT

_BUILD = """
import json, sys
from gateweave_bench.objects import generate
from gateweave_bench.run import decode_all
from gateweave.store import Store
from gateweave.translate import translate
from gateweave.translate.options import TranslateOptions
from gateweave.xds.incremental import IncrementalSnapshots

store = Store()
for manifest in generate(40, 3, 1.0).manifests:
    store.apply(decode_all([manifest])[0])
result = translate(store.snapshot(), TranslateOptions())
snapshots = IncrementalSnapshots()
out = {}
for name, gateway in sorted(result.xds.items()):
    snapshot = snapshots.snapshot(gateway)
    for type_url in snapshot.type_urls():
        for resource, value in snapshot.of(type_url).items():
            out[f"{name} {type_url} {resource}"] = value.version
json.dump(out, sys.stdout)
"""


def _versions() -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "harness")]),
        "GATEWEAVE_NATIVE": "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", _BUILD], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    versions: dict[str, str] = json.loads(done.stdout)
    return versions


def test_the_same_objects_get_the_same_versions_in_another_process() -> None:
    first = _versions()
    assert {key.split()[1].rsplit(".", 1)[1] for key in first} >= {"Listener", "RouteConfiguration"}
    for _ in range(2):
        assert _versions() == first
