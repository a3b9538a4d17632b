"""Which fault windows a run reaches and measures, at the edges of its frame."""

from __future__ import annotations

from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.timeline import RunFrame, timeline_warnings


def _warn(at_s: float, duration_s: float, frame: RunFrame) -> list[str]:
    plan = FaultPlan(events=(FaultEvent(kind="idle", at_s=at_s, duration_s=duration_s),))
    return timeline_warnings(plan, frame)


def test_a_window_due_exactly_at_the_end_is_not_exercised() -> None:
    (line,) = _warn(10, 1, RunFrame(0, 10))
    assert "will not be exercised" in line and "load ends at 10 s (10 s of load)" in line
    assert "the load is 1 s short of the window's end" in line  # by how much
    (line,) = _warn(9, 5, RunFrame(2, 12))
    assert "cut short by the end of the load at 12 s (2 s warm-up + 10 s measured)" in line
    assert "2 s before the window ends" in line
    assert _warn(9.5, 0.5, RunFrame(0, 10)) == []  # ends with the run: whole


def test_the_warm_up_edge_and_the_first_instant() -> None:
    (line,) = _warn(2, 1, RunFrame(2, 10))
    assert "starts as the warm-up ends (2 s): no measured request before it" in line
    (line,) = _warn(0, 1, RunFrame(0, 10))
    assert "starts with the run: no measured request before it" in line
    (line,) = _warn(1, 0, RunFrame(2, 10))  # an instant (a hook, a restart) in the warm-up
    assert "lies inside the warm-up (the first 2 s)" in line
    assert _warn(2.5, 1, RunFrame(2, 10)) == []


def test_an_unknown_end_is_said_once_not_guessed() -> None:
    plan = FaultPlan(
        events=(FaultEvent(kind="idle", at_s=3, duration_s=1), FaultEvent(kind="idle", at_s=50))
    )
    (line,) = timeline_warnings(plan, RunFrame(0, None, "after 5 requests"))
    assert line.startswith("fault windows: the run ends after 5 requests, not at a set time")
    assert "(up to 50 s)" in line
    assert timeline_warnings(FaultPlan(), RunFrame(0, None, "after 5 requests")) == []
