"""Which fault windows a run will reach and measure, told before it starts.

A window's times count from the run's start, warm-up included; its verdict compares the
measured requests before, during and after it. So a window due at or after the end of
the load sees no request (not_exercised), one inside the warm-up has nothing measured
before it (or at all), and one the end cuts short has nothing measured after it. Pure:
the plan and the run's frame in, one warning per such window out, saying which and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.features.faults.plan import FaultEvent, FaultPlan

__all__ = ["RunFrame", "timeline_warnings"]


@dataclass(frozen=True, slots=True)
class RunFrame:
    """The run's warm-up and its end, in seconds from its start."""

    warmup_s: float
    end_s: float | None
    """None where the end is not known ahead (a request count, a trace)."""
    ends_by: str = ""
    """With no ``end_s``: what ends the run instead (``after 200 requests``)."""


def timeline_warnings(plan: FaultPlan, frame: RunFrame) -> list[str]:
    """One line per window the run cannot reach, measure or judge whole."""
    lines = [w for ev in plan.events if (w := _warning(ev, frame))]
    if frame.end_s is None and plan.events:
        last = max(ev.end_s for ev in plan.events)
        lines.append(
            f"fault windows: the run ends {frame.ends_by}, not at a set time: whether "
            f"the windows (up to {last:g} s) fall inside it cannot be told ahead"
        )
    return lines


def _warning(ev: FaultEvent, frame: RunFrame) -> str | None:
    head = f"fault {ev.label!r} ({ev.kind}, {_span(ev)})"
    w, end = frame.warmup_s, frame.end_s
    if end is not None and ev.at_s >= end:
        return (
            f"{head} will not be exercised: it is due at or after the load ends at {end:g} s "
            f"({_frame(frame)}), when no request is sent any more; the load is "
            f"{ev.end_s - end:g} s short of the window's end, and needs time after it"
        )
    if ev.at_s < w and ev.end_s <= w:
        return (
            f"{head} lies inside the warm-up (the first {w:g} s), whose requests are not "
            "measured: it cannot be judged"
        )
    if ev.at_s <= w:
        where = (
            f"inside the warm-up (the first {w:g} s are not measured)"
            if ev.at_s < w
            else f"as the warm-up ends ({w:g} s)"
            if w
            else "with the run"
        )
        return (
            f"{head} starts {where}: no measured request before it to compare with, so "
            "whether latency came back cannot be told"
        )
    if end is not None and ev.end_s > end:
        return (
            f"{head} is cut short by the end of the load at {end:g} s ({_frame(frame)}), "
            f"{ev.end_s - end:g} s before the window ends: nothing measured after it, so "
            "whether latency came back cannot be told"
        )
    return None


def _span(ev: FaultEvent) -> str:
    return f"{ev.at_s:g}-{ev.end_s:g} s" if ev.duration_s else f"at {ev.at_s:g} s"


def _frame(frame: RunFrame) -> str:
    assert frame.end_s is not None
    if not frame.warmup_s:
        return f"{frame.end_s:g} s of load"
    return f"{frame.warmup_s:g} s warm-up + {frame.end_s - frame.warmup_s:g} s measured"
