"""The stop rule is a pure function of a frozen state: tested without I/O or sleeping."""

from __future__ import annotations

import dataclasses

import pytest

from loadtest.engine.stop import Decision, StopPlan, StopState, decide, plan_stop
from tests.conftest import make_scenario
from tests.test_schedule import FakeClock

S = 1_000_000_000


def test_warmup_units_go_uncounted_then_measured_ones_are_counted() -> None:
    plan = StopPlan(warmup_end_ns=10 * S, end_ns=None, limit=2)
    assert decide(plan, StopState(intended_ns=5 * S, measured=0)) == Decision(go=True)
    measured = decide(plan, StopState(intended_ns=10 * S, measured=1))
    assert measured.go and measured.measured
    done = decide(plan, StopState(intended_ns=11 * S, measured=2))
    assert not done.go and done.reason == "requests"


def test_warmup_units_ignore_the_request_limit() -> None:
    plan = StopPlan(warmup_end_ns=10 * S, limit=0)
    assert decide(plan, StopState(intended_ns=S, measured=0)).go


def test_the_end_of_the_window_is_judged_at_the_intended_time() -> None:
    plan = StopPlan(warmup_end_ns=S, end_ns=4 * S)
    # Due a moment before the end (whenever its task woke): in the plan, and measured.
    due = decide(plan, StopState(intended_ns=4 * S - 1, measured=0))
    assert due.go and due.measured
    # A session stuck past the end intends its next unit when it returns: over.
    late = decide(plan, StopState(intended_ns=4 * S, measured=0))
    assert not late.go and late.reason == "duration"


def test_a_stop_request_wins_over_everything() -> None:
    plan = StopPlan(warmup_end_ns=S, end_ns=4 * S, limit=10)
    d = decide(plan, StopState(intended_ns=0, measured=0, stop_requested=True))
    assert d == Decision(go=False, reason="stopped")


def test_the_state_is_frozen() -> None:
    state = StopState(intended_ns=0, measured=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.measured = 1  # type: ignore[misc]


def test_plan_of_a_load_table() -> None:
    load = make_scenario({"mode": "closed", "duration_s": 3, "warmup_s": 1}).load
    assert plan_stop(load, 5 * S) == StopPlan(warmup_end_ns=6 * S, end_ns=9 * S, limit=None)
    counted = make_scenario({"mode": "closed", "requests": 7}).load
    assert plan_stop(counted, 0) == StopPlan(warmup_end_ns=0, end_ns=None, limit=7)


async def test_a_session_on_a_fake_clock_stops_when_the_window_ends() -> None:
    load = make_scenario({"mode": "closed", "duration_s": 2, "warmup_s": 1}).load
    clock = FakeClock()
    plan = plan_stop(load, clock.now_ns())
    measured, warmup, reason = 0, 0, None
    while True:
        d = decide(plan, StopState(clock.now_ns(), measured))
        if not d.go:
            reason = d.reason
            break
        measured += d.measured
        warmup += not d.measured
        await clock.sleep_until(clock.now_ns() + 300_000_000)  # a 0.3 s request
    assert reason == "duration"
    assert warmup == 4 and measured == 6  # 0, .3, .6, .9 | 1.2 ... 2.7
    assert plan.end_ns is not None and clock.now_ns() >= plan.end_ns
