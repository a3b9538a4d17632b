"""The fault plan's part inside the load: each kind's ``LoadPart``, and the hold.

A fault plan acts in two places. The rig (``rig.py``) plays what happens beside the load,
once per run, on the coordinator: toxics on the draft's proxy, target restarts, hook
actions, the ``/metrics`` scrape, and the verdicts on the merged records. What happens to
the load itself happens in every process that sends it: the parts of the kinds that
declare ``Runs.in_load`` (no load is offered in an idle gap and a burst follows it, some
requests are cancelled mid-stream), and the hold while a restarted target is down. That
is this hook, one per worker (``--workers N``: each with its own seed and its share of a
burst; a one-process run has one, beside the rig).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from loadtest.engine.hooks import CancelOrder, RunContext, RunHook
from loadtest.features.faults.kind import LoadPart, LoadShare, fault_kind, overrides_part
from loadtest.features.faults.plan import FaultPlan

__all__ = ["FaultLoad", "HoldChannel", "HoldControl", "HoldFlag", "acts_in_load"]

_HOLD_POLL_NS = 20_000_000
"""While a restarted target is down, the load looks again this often."""


@dataclass(frozen=True, slots=True)
class HoldChannel:
    """A worker's line to the coordinator's hold: ``look`` reads the flag, ``ack`` says
    whether this worker now holds (a file in a local worker's folder, the run's control
    actor for a Ray task)."""

    look: Callable[[], bool]
    ack: Callable[[bool], None]


class HoldControl(Protocol):
    """The coordinator's side of the hold (the rig's ``on_hold``): set or clear the flag,
    and ask whether every worker has confirmed that it holds."""

    def __call__(self, down: bool) -> None: ...

    def holding(self) -> bool: ...


class HoldFlag:
    """A worker's copy of "the load must hold", which the coordinator sets while a
    restarted target is down: looked at every 20 ms (``watch``), off the hot path and off
    the event loop (a look may be a network round trip), and confirmed once this
    worker's copy has changed, so that the coordinator stops the target only when every
    worker holds, however slow a look is on a busy machine."""

    def __init__(self, channel: HoldChannel) -> None:
        self.channel = channel
        self.held = False
        self._confirmed = False

    def __call__(self) -> bool:
        return self.held

    async def watch(self) -> None:
        """Follow the coordinator's flag until cancelled."""
        while True:
            self.held = await asyncio.to_thread(self.channel.look)
            if self.held != self._confirmed:
                await asyncio.to_thread(self.channel.ack, self.held)
                self._confirmed = self.held
            await asyncio.sleep(_HOLD_POLL_NS / 1e9)


def acts_in_load(plan: FaultPlan) -> bool:
    """Whether some event of ``plan`` acts in the processes that send load (a part of its
    own there, or the load must hold while it acts)."""
    return any((runs := fault_kind(e.kind).runs).in_load or runs.holds_load for e in plan.events)


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
        parts = [
            part
            for i, ev in enumerate(plan.events)
            if fault_kind(ev.kind).runs.in_load
            and (part := fault_kind(ev.kind).load_part(ev, LoadShare(i, worker, workers)))
            is not None
        ]
        self._parts: list[LoadPart] = parts
        # Only the parts that act per request are asked per request (the hot path).
        self._idles = [p for p in parts if overrides_part(p, "idle_until")]
        self._cancels = [p for p in parts if overrides_part(p, "cancel_order")]
        self._tasks: list[asyncio.Task[None]] = []

    async def on_start(self, ctx: RunContext) -> None:
        """Take the run's clock and start the parts' own tasks (the bursts that end idle
        gaps)."""
        self.t0_ns = ctx.t0_ns
        if isinstance(self.hold, HoldFlag):
            self._tasks.append(asyncio.create_task(self.hold.watch()))
        for part in self._parts:
            self._tasks.extend(asyncio.create_task(c) for c in part.at_start(ctx))

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
        for part in self._idles:
            until = part.idle_until(self.t0_ns, now_ns)
            if until is not None:
                return until
        return None

    def cancel_order(self, intended_ns: int) -> CancelOrder | None:
        """Whether (and when) to cancel a request meant to start at ``intended_ns``."""
        for part in self._cancels:
            order = part.cancel_order(self.t0_ns, intended_ns, self._rng)
            if order is not None:
                return order
        return None
