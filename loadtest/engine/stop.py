"""When a run stops offering load: a pure rule over a frozen state.

No I/O, no clock: the runner asks ``decide`` before each unit of load with the unit's
intended time (tests pass a fake clock's), and a timer wakes at
``StopPlan.end_ns`` so a duration-bound run ends on time even when no unit ever
returns (a stalled endpoint keeps every closed-loop session inside its request).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.config.scenario import LoadSpec

__all__ = ["Decision", "StopPlan", "StopState", "decide", "measured_s", "plan_stop"]


@dataclass(frozen=True, slots=True)
class StopPlan:
    """The bounds of a run, in absolute ``perf_counter_ns`` and counts."""

    warmup_end_ns: int
    """Units intended before this are warm-up: sent, recorded, not measured."""
    end_ns: int | None = None
    """The measured window's end (``duration_s`` after the warm-up), if time-bound."""
    limit: int | None = None
    """Measured units to send (``requests``), if count-bound."""


@dataclass(frozen=True, slots=True)
class StopState:
    """What the rule looks at before one more unit."""

    intended_ns: int
    measured: int
    """Measured units taken so far."""
    stop_requested: bool = False
    """``stop()`` was called (Ctrl-C, the dashboard). The clock's end of the window is
    not a stop request: a unit intended before it still goes."""


@dataclass(frozen=True, slots=True)
class Decision:
    """Go (counted as measured or not) or stop, and why."""

    go: bool
    measured: bool = False
    reason: str | None = None
    """Why the run stops: ``stopped``, ``duration`` or ``requests``."""


_WARMUP = Decision(go=True)
_MEASURED = Decision(go=True, measured=True)


def plan_stop(load: LoadSpec, t0_ns: int) -> StopPlan:
    """The bounds of ``load`` for a run that starts at ``t0_ns``."""
    warmup_end = t0_ns + int(load.warmup_s * 1e9)
    end = warmup_end + int(load.duration_s * 1e9) if load.duration_s is not None else None
    return StopPlan(warmup_end, end, load.requests)


def decide(plan: StopPlan, state: StopState) -> Decision:
    """May one more unit intended at ``state.intended_ns`` be offered?"""
    if state.stop_requested:
        return Decision(go=False, reason="stopped")
    # Judged at the unit's intended time, not when its task woke: an arrival due just
    # before the end, woken a moment after it (a busy loop, a timer that fired early and
    # slept again), is in the plan. By the clock, whether it went was a race, and a
    # seeded plan sent 317 arrivals in one run and 318 in the next. A closed-loop
    # session's next unit is intended when its last one returned, so a session stuck past
    # the end still stops there.
    if plan.end_ns is not None and state.intended_ns >= plan.end_ns:
        return Decision(go=False, reason="duration")
    if state.intended_ns < plan.warmup_end_ns:
        return _WARMUP
    if plan.limit is not None and state.measured >= plan.limit:
        return Decision(go=False, reason="requests")
    return _MEASURED


def measured_s(
    plan: StopPlan,
    *,
    closed_loop: bool,
    first_intended_ns: int | None,
    last_end_ns: int | None,
    end_ns: int,
) -> float:
    """The measured window, in seconds: from the warm-up's end to the last measured end.

    A closed loop's window starts by the clock: a session stuck in a warm-up request
    must not push it back. Open-loop workers may start their arrivals late, so theirs
    starts at the first measured intended send. The run's rates divide by this.
    """
    start = plan.warmup_end_ns
    if not closed_loop:
        start = max(start, first_intended_ns or start)
    return max((last_end_ns or end_ns) - start, 1) / 1e9
