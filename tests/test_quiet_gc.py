"""The collector's settings during a run, and afterwards."""

from __future__ import annotations

import gc
import weakref

from loadtest.quiet_gc import RUN_THRESHOLDS, quiet_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_a_run_freezes_what_exists_raises_thresholds_and_restores_them() -> None:
    before = gc.get_threshold()
    with quiet_gc():
        assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
        with quiet_gc():  # a second run in the same process (sweep, ab)
            assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_threshold() == RUN_THRESHOLDS  # the outer run still holds
        # Cycles made during the run are still collected.
        ref = weakref.ref(_Node())
        gc.collect()
        assert ref() is None
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
