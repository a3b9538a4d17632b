"""Keep Python's cyclic garbage collector from stalling the event loop during a run.

With a thousand open streams the collector's older generations hold tens of thousands
of live objects, and walking them stops the loop for milliseconds at a time, tens of
them for a full pass, several times a run (docs/benchmarks.md). Whatever arrives
meanwhile is stamped late (an arrival stamp cannot be taken while the loop is stopped),
so a collection shows up as server latency at the p99.

For the length of a run: what already exists (data sets, modules, the prompt pool) is
frozen out of the collector's reach, and the thresholds are raised so that young
collections are rarer and the old generations are walked far less often. Once a
second the run also freezes what survived the second (``settle``), so no collection
walks the open streams' objects. Reference counting frees objects at once, as always;
cycles that became garbage are collected if a collection comes first, else when the
run ends. Settings are restored when the last concurrent run ends.

What the host process froze itself stays frozen: ``gc.unfreeze`` cannot tell its
objects from ours, so when the host had frozen anything before the first run, the
run's end leaves the permanent generation as it is (only thresholds are restored).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "quiet_gc", "settle"]

RUN_THRESHOLDS = (20_000, 20, 100)
"""Allocations before a young collection, and young (then middle) collections before
the next generation is walked; the interpreter's defaults are (700, 10, 10)."""

_depth = 0
_saved: tuple[int, int, int] | None = None
_host_froze = False


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Freeze what exists and raise the collector's thresholds until the block ends."""
    global _depth, _saved, _host_froze
    if _depth == 0:
        _host_froze = gc.get_freeze_count() > 0
        gc.collect()  # garbage from before the run is not frozen in
        gc.freeze()
        _saved = gc.get_threshold()
        gc.set_threshold(*RUN_THRESHOLDS)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            if not _host_froze:
                gc.unfreeze()
            _saved = None


def settle() -> None:
    """Freeze what survived since the last call (once a second, from the run's roll).

    Survivors of a second of load are mostly the open streams' objects. Left in the
    young generation they wait there for the next collection, which then walks every
    survivor since the last one: with a thousand streams that single young pass held the
    loop for tens of ms, at whatever moment its threshold fell (docs/benchmarks.md).
    Frozen, they are never walked, and reference counting still frees them when their
    stream ends. Cycles that became garbage within the second are frozen too, until the
    run ends; loadtest makes few. Outside a run it does nothing.
    """
    if _depth:
        gc.freeze()
