"""Arrival plans and the clock they run on; pure apart from ``MonotonicClock``.

An open-loop schedule is a sequence of *offsets from the start*, never of gaps to
sleep: ``pace`` sleeps until ``start + offset`` each time, so lateness in one step does
not push every later request back (no drift), and the intended send time of each
request is known exactly for coordinated-omission-corrected latency.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from loadtest.config.arrivals import TRACE_MODE, Param, arrival_process
from loadtest.errors import UsageError

__all__ = [
    "ArrivalPlan",
    "Clock",
    "MonotonicClock",
    "arrival_offsets_ns",
    "pace",
    "trace_offsets_ns",
]


class Clock(Protocol):
    """What the pacer needs of time; tests pass a fake one."""

    def now_ns(self) -> int:
        """Monotonic time in nanoseconds."""
        ...

    async def sleep_until(self, deadline_ns: int) -> None:
        """Return at or after ``deadline_ns``."""
        ...


class MonotonicClock:
    """The real clock: ``perf_counter_ns`` (uvloop's ``loop.time()`` is too coarse)."""

    def now_ns(self) -> int:
        """Current ``time.perf_counter_ns()``."""
        return time.perf_counter_ns()

    async def sleep_until(self, deadline_ns: int) -> None:
        """Sleep until the deadline; returns at once when it has passed.

        Loops can wake early: uvloop's timers count whole milliseconds and fire a
        0.3 ms sleep after a few µs (asyncio's round up to 1 ms instead). Sleeping
        again until the clock agrees keeps "never before the intended time" true.
        """
        # A polling loop on purpose (ASYNC110): the event waited for is the clock itself.
        while (delay := deadline_ns - time.perf_counter_ns()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(delay / 1e9)


@dataclass(frozen=True, slots=True)
class ArrivalPlan:
    """An open-loop arrival process: a registered one by its mode's name
    (``config.arrivals``) with its own keys' values, or a trace's recorded times."""

    mode: str
    rate: float
    params: Mapping[str, Param] = field(default_factory=dict)
    offsets_ns: tuple[int, ...] = ()
    """Mode ``trace``: the recorded send times, in order (the plan ends after the last)."""

    def __post_init__(self) -> None:
        if self.mode == TRACE_MODE:
            if any(b < a for a, b in zip(self.offsets_ns, self.offsets_ns[1:], strict=False)):
                raise ValueError("trace offsets must not go back in time")
        else:
            try:
                process = arrival_process(self.mode)
            except UsageError as exc:
                raise ValueError(f"mode: {exc}") from exc
            if unknown := sorted(set(self.params) - set(process.keys)):
                raise ValueError(f"{unknown[0]}: not a key of mode {self.mode!r}")
            # A plan made in code gets the defaults a scenario file would.
            object.__setattr__(self, "params", {**process.keys, **self.params})
            if (wrong := process.problem(self.params)) is not None:
                raise ValueError(f"{wrong[0]}: {wrong[1]}")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be a positive number, got {self.rate!r}")


def arrival_offsets_ns(
    plan: ArrivalPlan, seed: int, share: tuple[int, int] = (0, 1)
) -> Iterator[int]:
    """Yield intended send times in ns from the start, in order, forever (a trace plan
    ends with its offsets).

    ``share`` ``(i, n)``: worker ``i`` of ``n`` keeps arrivals ``i``, ``i + n``, ... of the
    whole plan drawn from the run's ``seed``, so N workers together send exactly the
    arrivals one process would, for any process (a superposition of N thinned gamma
    processes is no gamma process; of N constant ones, constant only when phased).
    """
    worker, workers = share
    if not 0 <= worker < workers:
        raise ValueError(f"share must be (i, n) with 0 <= i < n, got {share!r}")
    if plan.mode == TRACE_MODE:
        whole: Iterator[int] = iter(plan.offsets_ns)
    else:
        whole = arrival_process(plan.mode).offsets_ns(plan.rate, plan.params, random.Random(seed))
    yield from itertools.islice(whole, worker, None, workers)


def trace_offsets_ns(timestamps_ms: Sequence[float], speedup: float = 1.0) -> tuple[int, ...]:
    """A trace's timestamps (ms, in order) as offsets from its first one, ``speedup`` x faster."""
    if not (speedup > 0 and math.isfinite(speedup)):
        raise ValueError(f"speedup must be a positive number, got {speedup!r}")
    if not timestamps_ms:
        return ()
    first = timestamps_ms[0]
    return tuple(round((t - first) * 1e6 / speedup) for t in timestamps_ms)


async def pace(
    offsets: Iterator[int],
    clock: Clock,
    *,
    start_ns: int | None = None,
    until_ns: int | None = None,
    limit: int | None = None,
    lead_ns: int = 0,
) -> AsyncIterator[tuple[int, int]]:
    """Yield ``(index, intended_ns)`` when each arrival is due, or ``lead_ns`` before.

    ``until_ns`` (absolute) and ``limit`` (count) end the plan. When the consumer falls
    behind, due arrivals are yielded at once with their original intended times, so
    the lateness shows up as dispatch lag rather than being forgotten.
    """
    start = clock.now_ns() if start_ns is None else start_ns
    for index, offset in enumerate(offsets):
        if limit is not None and index >= limit:
            return
        intended = start + offset
        if until_ns is not None and intended >= until_ns:
            return
        if clock.now_ns() < intended - lead_ns:
            await clock.sleep_until(intended - lead_ns)
        yield index, intended
