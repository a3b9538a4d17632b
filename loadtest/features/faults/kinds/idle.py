"""``idle``: no load is offered in the window; a burst of requests may end it.

Both happen in every process of the load (``load_part``: each sends its share of the
burst); the rig only waits out the window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from loadtest.features.faults.kind import (
    IN_LOAD,
    FaultKindBase,
    FaultSpec,
    LoadPart,
    LoadShare,
    Rig,
    spec_of,
)
from loadtest.features.faults.own_figures import top_observed
from loadtest.model.verdict import Observed

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.engine.hooks import RunContext
    from loadtest.features.faults.plan import FaultEvent

__all__ = ["IDLE", "IdleObserved", "IdleSpec", "burst_share"]


@dataclass(frozen=True, slots=True)
class IdleSpec(FaultSpec):
    """The settings of an idle gap."""

    burst: int = 0
    """Requests sent at once when the idle gap ends."""

    @property
    def extra_sessions(self) -> int:
        """The burst comes on top of the sessions or the in-flight cap."""
        return self.burst


def burst_share(burst: int, worker: int, workers: int) -> int:
    """Worker ``worker``'s part of a burst of ``burst`` units split over ``workers``."""
    return burst // workers + (worker < burst % workers)


class _Gap(LoadPart):
    def __init__(self, ev: FaultEvent, share: LoadShare) -> None:
        self.at_s = ev.at_s
        self.duration_s = ev.duration_s
        self.end_s = ev.end_s
        self.burst = burst_share(spec_of(ev, IdleSpec).burst, share.worker, share.workers)

    def at_start(self, ctx: RunContext) -> Sequence[Coroutine[Any, Any, None]]:
        return [self._burst(ctx)] if self.burst else []

    async def _burst(self, ctx: RunContext) -> None:
        delay = (ctx.t0_ns + int(self.end_s * 1e9) - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        ctx.burst(self.burst)

    def idle_until(self, t0_ns: int, now_ns: int) -> int | None:
        start = t0_ns + int(self.at_s * 1e9)
        end = start + int(self.duration_s * 1e9)
        return end if start <= now_ns < end else None


class IdleObserved(TypedDict, total=False):
    """What an idle window's entry says of its burst."""

    burst: int
    """Requests the load sent at once when the gap ended, over all its processes."""


class Idle(FaultKindBase):
    """The ``idle`` kind."""

    keys = frozenset({"burst"})
    runs = IN_LOAD
    # A gap sends nothing by design: what it tests is the burst and the load after it.
    needs_requests = False
    needs_completed = False
    observed_model = IdleObserved

    def parse(self, t: Table, event: FaultEvent) -> IdleSpec:
        """``burst``: an integer >= 0."""
        return IdleSpec(burst=t.integer("burst", 0) or 0)

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """The load idles and bursts by itself: wait out the window."""
        await rig.sleep_to(ev.end_s)
        # Sent by the load's own part: the entry says how big it was.
        top_observed(obs, IdleObserved)["burst"] = spec_of(ev, IdleSpec).burst

    def load_part(self, ev: FaultEvent, share: LoadShare) -> LoadPart:
        """The gap and this process's share of its burst."""
        return _Gap(ev, share)


IDLE = Idle()
