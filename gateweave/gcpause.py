"""Pausing Python's cyclic garbage collector while a translation runs.

A translation allocates hundreds of thousands of short-lived containers. With the cyclic
collector on, those allocations trigger collections that walk every tracked object of
the process - the whole store included - several times per translation (at 10,000
routes that was more than half of the translation's time). Translation frees almost
everything by reference counting, so pausing the collector loses nothing: whatever cyclic
garbage there is gets collected on the collector's normal schedule once it is back on.

Process-wide and reentrant: overlapping translations (threads) keep it paused until the
last one ends, and a collector the application turned off stays off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_restore = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
