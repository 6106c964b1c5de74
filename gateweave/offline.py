"""Offline translation of manifest files: what ``gateweave translate`` and ``explain -f`` run.

Files are decoded strictly (:attr:`gateweave.api.decode.Decoding.STRICT`), as the file
provider decodes them: what ``translate`` rejects is what ``serve`` would reject.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gateweave.api.decode import Decoded, ObjectError, decode_sourced
from gateweave.api.kinds import Key
from gateweave.api.load import LoadError, load_paths
from gateweave.gcpause import gc_paused
from gateweave.ir import Result
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate


@dataclass
class OfflineRun:
    objects: list[Decoded] = field(default_factory=list)
    sources: dict[Key, str] = field(default_factory=dict)
    load_errors: list[LoadError] = field(default_factory=list)
    rejected: list[ObjectError] = field(default_factory=list)
    result: Result | None = None


def read_objects(paths: Iterable[str]) -> OfflineRun:
    """Load and decode every object under ``paths``; a second
    definition of an object is rejected.
    """
    run = OfflineRun()
    with gc_paused():  # (as the file provider reads a directory)
        loaded = load_paths(paths)
        decoded = [decode_sourced(item) for item in loaded.objects]
    run.load_errors = list(loaded.errors)
    seen: dict[Key, Decoded] = {}
    for item, (dec, errors) in zip(loaded.objects, decoded, strict=True):
        run.rejected.extend(errors)
        if dec is None:
            continue
        meta = dec.model.metadata
        key = Key(dec.model.kind, meta.namespace, meta.name)
        if key in seen:
            run.rejected.append(
                ObjectError(
                    source=item.source,
                    kind=key.kind,
                    namespace=key.namespace,
                    name=key.name,
                    message=(
                        f"defined again (first defined at {run.sources[key]}); this definition is "
                        "ignored"
                    ),
                )
            )
            continue
        seen[key] = dec
        run.sources[key] = item.source
        run.objects.append(dec)
    return run


def translate_paths(paths: Iterable[str], options: TranslateOptions) -> OfflineRun:
    run = read_objects(paths)
    run.result = translate(Snapshot.from_objects(d.model for d in run.objects), options)
    return run
