"""The collector's settings during a run, and afterwards."""

from __future__ import annotations

import gc
import weakref

from loadtest._compat.quiet_gc import RUN_THRESHOLDS, quiet_gc, settle


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


def test_settle_freezes_survivors_only_inside_a_run() -> None:
    keep = [_Node() for _ in range(100)]
    settle()  # outside a run: nothing happens
    assert gc.get_freeze_count() == 0
    with quiet_gc():
        frozen = gc.get_freeze_count()
        more = [_Node() for _ in range(100)]
        settle()
        assert gc.get_freeze_count() >= frozen + len(more)
        assert all(gc.is_tracked(n) for n in more)
    assert gc.get_freeze_count() == 0  # the run's end gives everything back
    del keep, more


def test_a_run_never_unfreezes_what_the_host_froze() -> None:
    host_objects = [_Node() for _ in range(100)]
    gc.freeze()  # the host's own policy (a pre-fork server, a long-lived service)
    try:
        frozen = gc.get_freeze_count()
        before = gc.get_threshold()
        with quiet_gc():
            settle()
        assert gc.get_freeze_count() >= frozen  # the host's objects are still frozen
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
    del host_objects


def test_the_engine_tunes_gc_only_when_the_hook_is_attached() -> None:
    import ast
    from pathlib import Path

    import loadtest.engine as engine

    for path in Path(engine.__file__).parent.glob("*.py"):
        if path.name == "gc_policy.py":
            continue  # the opt-in hook itself
        names = {
            alias.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert not names & {"quiet_gc", "settle"}, path
