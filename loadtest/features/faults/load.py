"""The fault plan's part inside the load: idle gaps with their burst, and cancellations.

A fault plan acts in two places. The rig (``rig.py``) plays what happens beside the load,
once per run, on the coordinator: toxics on the draft's proxy, target restarts, hook
actions, the ``/metrics`` scrape, and the verdicts on the merged records. What happens to
the load itself happens in every process that sends it: no load is offered in an idle
gap and a burst follows it, and some requests are cancelled mid-stream. That is this
hook, one per worker (``--workers N``: each with its own seed and its share of a burst;
a one-process run has one, beside the rig).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

from loadtest.engine.hooks import CancelOrder, RunContext, RunHook
from loadtest.features.faults.plan import FaultPlan

__all__ = ["FaultLoad", "HoldFlag", "burst_share"]

_HOLD_POLL_NS = 20_000_000
"""While a restarted target is down, the load looks again this often."""


class HoldFlag:
    """A worker's copy of "the load must hold": a file the coordinator creates while a
    restarted target is down, looked at every 20 ms (``watch``) off the hot path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = False

    def __call__(self) -> bool:
        return self.held

    async def watch(self) -> None:
        """Follow the file until cancelled."""
        while True:
            self.held = self.path.exists()
            await asyncio.sleep(_HOLD_POLL_NS / 1e9)


def burst_share(burst: int, worker: int, workers: int) -> int:
    """Worker ``worker``'s part of a burst of ``burst`` units split over ``workers``."""
    return burst // workers + (worker < burst % workers)


class FaultLoad(RunHook):
    """Idle gaps, their bursts and mid-stream cancellations, in one process of the load."""

    def __init__(
        self,
        plan: FaultPlan,
        seed: int,
        *,
        worker: int = 0,
        workers: int = 1,
        hold: Callable[[], bool] | None = None,
    ) -> None:
        """``hold``: while it is true the load waits (the rig's restarted target is
        down): the rig's own answer in its process, a flag the coordinator sets in a
        worker (``HoldFlag``)."""
        self.plan = plan
        self.worker = worker
        self.workers = workers
        self.hold = hold
        self.t0_ns = time.perf_counter_ns()
        self._rng = random.Random(seed ^ 0x5EED)
        self._idle = [e for e in plan.events if e.kind == "idle"]
        self._cancels = [(i, e) for i, e in enumerate(plan.events) if e.kind == "cancel"]
        self._tasks: list[asyncio.Task[None]] = []

    async def on_start(self, ctx: RunContext) -> None:
        """Take the run's clock and schedule the bursts that end idle gaps."""
        self.t0_ns = ctx.t0_ns
        if isinstance(self.hold, HoldFlag):
            self._tasks.append(asyncio.create_task(self.hold.watch()))
        for ev in self._idle:
            share = burst_share(ev.burst, self.worker, self.workers)
            if share:
                self._tasks.append(asyncio.create_task(self._burst(ctx, ev.end_s, share)))

    async def _burst(self, ctx: RunContext, at_s: float, n: int) -> None:
        delay = (self.t0_ns + int(at_s * 1e9) - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        ctx.burst(n)

    async def on_finish(self) -> None:
        """Bursts still to come are dropped: the run is over."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def idle_until(self, now_ns: int) -> int | None:
        """When the load may go on, if ``now_ns`` falls in an idle gap or a restart.

        While a restarted target is down or loading, the load holds (polling every
        20 ms) rather than spinning through connection errors; the requests caught in
        flight by the stop are what the restart's verdict counts.
        """
        if self.hold is not None and self.hold():
            return now_ns + _HOLD_POLL_NS
        for ev in self._idle:
            start = self.t0_ns + int(ev.at_s * 1e9)
            end = start + int(ev.duration_s * 1e9)
            if start <= now_ns < end:
                return end
        return None

    def cancel_order(self, intended_ns: int) -> CancelOrder | None:
        """Whether (and when) to cancel a request meant to start at ``intended_ns``."""
        t = (intended_ns - self.t0_ns) / 1e9
        for i, ev in self._cancels:
            if ev.at_s <= t < ev.end_s and self._rng.random() < ev.fraction:
                if ev.after_tokens is not None:
                    hi = max(ev.after_tokens, ev.after_tokens_max or ev.after_tokens)
                    return CancelOrder(i, after_tokens=self._rng.randint(ev.after_tokens, hi))
                assert ev.after_ms is not None
                hi_ms = max(ev.after_ms, ev.after_ms_max or ev.after_ms)
                return CancelOrder(i, after_ms=self._rng.uniform(ev.after_ms, hi_ms))
        return None
