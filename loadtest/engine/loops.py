"""The two ways of offering load, and how a run winds down.

Closed loop: N sessions, each sending its next unit when the last one ended (plus
think time). Open loop: one pacer sleeping to absolute deadlines, a task per arrival
made just ahead of it that sleeps to its own deadline, optionally capped by a
concurrency limit and a rate ceiling. Either way, stopping (end
of plan, Ctrl-C, SIGTERM) stops scheduling, gives in-flight units ``grace_s`` to end,
cancels the rest, and every request still ends as exactly one record on disk.

Cancellation: the units the engine cancels (grace expired, the user aborted, the run
itself cancelled) end as ``cancelled`` records whose error class says why, and the
cancellation goes on up; a cancellation of the run from outside is re-raised once
every unit is accounted for.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Iterable
from typing import Any, Protocol

from loadtest.config.scenario import LoadSpec
from loadtest.engine.schedule import ArrivalPlan, Clock, arrival_offsets_ns, pace

__all__ = ["LoopHost", "closed_loop", "open_loop"]

MAX_RETRY_AFTER_S = 30.0
"""The longest a closed-loop session waits when a 429 says Retry-After."""


class LoopHost(Protocol):
    """What the loops need of the runner."""

    @property
    def clock(self) -> Clock:
        """The clock of the schedule."""
        ...

    @property
    def load(self) -> LoadSpec:
        """The load to offer."""
        ...

    @property
    def seed(self) -> int:
        """The seed of the arrival process (the run's, in every worker)."""
        ...

    @property
    def t0_ns(self) -> int:
        """The run's start."""
        ...

    @property
    def arrival_start_ns(self) -> int:
        """Open loop: when the arrival schedule starts."""
        ...

    @property
    def arrival_share(self) -> tuple[int, int]:
        """Open loop: ``(i, n)``, this process keeps every n-th arrival from the i-th."""
        ...

    @property
    def end_ns(self) -> int | None:
        """When scheduling ends, for a duration-bound run."""
        ...

    @property
    def stop_event(self) -> asyncio.Event:
        """Set when scheduling stops."""
        ...

    @property
    def abort_event(self) -> asyncio.Event:
        """Set when in-flight units are to be cancelled without grace."""
        ...

    @property
    def measured_done(self) -> asyncio.Event:
        """Set once a count-bound plan's last measured unit has ended."""
        ...

    @property
    def extras(self) -> set[asyncio.Task[None]]:
        """Units started beside the schedule (bursts); drained with the others."""
        ...

    def take_index(self, intended_ns: int) -> int | None:
        """The next unit's index, or None when the plan has ended."""
        ...

    def idle_until(self, now_ns: int) -> int | None:
        """When the load may go on, if ``now_ns`` falls in an idle gap."""
        ...

    async def run_unit(self, index: int, intended_ns: int) -> float | None:
        """One unit of load; returns a Retry-After in seconds, if any."""
        ...

    def cancelling_for(self, reason: str) -> None:
        """The engine is about to cancel in-flight units, for ``reason``."""
        ...


async def closed_loop(host: LoopHost) -> None:
    """Run the sessions of a closed loop until the plan ends, then drain them."""
    load = host.load
    think_ns = int(load.think_time_ms * 1e6)
    n = load.concurrency
    ramp_ns = int(load.ramp_up_s * 1e9)
    sessions = {
        asyncio.create_task(
            _session(host, think_ns, host.t0_ns + ramp_ns * i // n),
            name=f"loadtest-session-{i}",
        )
        for i in range(n)
    }
    await _drain(host, sessions)


async def _session(host: LoopHost, think_ns: int, start_ns: int) -> None:
    # Sessions started together stay in step (a wave of sends, then a wave of first
    # tokens); a ramp spreads them out as real users would be.
    clock = host.clock
    await clock.sleep_until(start_ns)
    intended = start_ns
    while True:
        while (idle_end := host.idle_until(intended)) is not None:
            # An idle gap of the fault plan: the users are away, nothing is offered.
            await clock.sleep_until(idle_end)
            intended = idle_end
        index = host.take_index(intended)
        if index is None:
            break
        retry_after = await host.run_unit(index, intended)
        intended = clock.now_ns() + think_ns
        if retry_after:
            # Told to come back later, a session waits as a well-behaved client does.
            intended += int(min(retry_after, MAX_RETRY_AFTER_S) * 1e9)
            if host.end_ns is not None:
                intended = min(intended, host.end_ns)
        if intended > clock.now_ns():
            await clock.sleep_until(intended)


async def open_loop(host: LoopHost) -> None:
    """Pace arrivals until the plan ends or the run stops, then drain them."""
    tasks: set[asyncio.Task[None]] = set()
    pacer = asyncio.create_task(_pace_arrivals(host, tasks), name="loadtest-pacer")
    try:
        # Stopping may find the pacer asleep or waiting on the concurrency cap.
        await _first(pacer, host.stop_event.wait())
    except asyncio.CancelledError:
        await _cancel(host, tasks | host.extras, "run_cancelled")
        raise
    host.stop_event.set()
    await _drain(host, tasks)


ARM_LEAD_NS = 2_000_000
"""How long before its intended time an arrival's task is made: it then sleeps to that
time on its own timer (``_arrival``)."""


class _Armed:
    """Arrivals made ahead whose intended time has not come yet: the pacer, ending, waits
    for them, so that the end of its plan does not stop units it has already offered."""

    def __init__(self) -> None:
        self.count = 0
        self.none_left = asyncio.Event()
        self.none_left.set()

    def add(self) -> None:
        self.count += 1
        self.none_left.clear()

    def started(self) -> None:
        self.count -= 1
        if not self.count:
            self.none_left.set()


async def _pace_arrivals(host: LoopHost, tasks: set[asyncio.Task[None]]) -> None:
    load = host.load
    plan = ArrivalPlan(load.mode, load.rate, dict(load.arrival), load.trace_offsets_ns)
    cap = asyncio.Semaphore(load.concurrency) if load.concurrency > 0 else None
    ceiling: Any = None
    if load.rate_ceiling:
        from asyncio_throttle.throttler import Throttler

        # A ceiling only: it releases in bursts, so it never keeps the schedule.
        ceiling = Throttler(rate_limit=int(max(1, load.rate_ceiling)), period=1.0)
    armed = _Armed()
    due: deque[int] = deque()  # the armed arrivals' intended times, in the plan's order
    async for _, intended in pace(
        arrival_offsets_ns(plan, host.seed, host.arrival_share),
        host.clock,
        start_ns=host.arrival_start_ns,
        until_ns=host.end_ns,
        lead_ns=ARM_LEAD_NS,
    ):
        if host.stop_event.is_set():
            break  # an arrival made ahead found the plan ended
        if host.idle_until(intended) is not None:
            continue  # an idle gap: arrivals in it are not offered
        if cap is not None:
            await cap.acquire()
        if ceiling is not None:
            await ceiling.acquire()
        # Made ahead, not started from here: the arrival's timer wakes its own task at the
        # intended time, a loop turn sooner than a woken pacer could start one (measured in
        # benchmarks/bench_dispatch.py). The request's flight (its timeouts, its
        # cancellation) belongs to that task, never to the pacer.
        armed.add()
        due.append(intended)
        task = asyncio.create_task(_arrival(host, intended, due, cap, armed))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await armed.none_left.wait()


async def _arrival(
    host: LoopHost, wake: int, due: deque[int], cap: asyncio.Semaphore | None, armed: _Armed
) -> None:
    try:
        try:
            await host.clock.sleep_until(wake)
            # Whichever arrival wakes first sends the earliest one due, with its time: two
            # due arrivals can wake swapped (a re-sleep after an early uvloop timer lands
            # on the next whole ms), and a trace's line i must go out at line i's time.
            # (Making each wait for the one before instead cascaded: the dispatch lag's
            # median grew tenfold and more at 1,000 req/s; docs/benchmarks.md.)
            intended = due.popleft()
            # The index is taken when the arrival is due, so the plan's end (a count, a
            # duration, a stop) is decided at the intended time, as for any unit.
            index = host.take_index(intended)
        finally:
            armed.started()
        if index is not None:
            await host.run_unit(index, intended)
    finally:
        if cap is not None:
            cap.release()


async def _drain(host: LoopHost, tasks: set[asyncio.Task[None]]) -> None:
    """Wait for the plan to end, then give in-flight units the grace period.

    If the run itself is cancelled (the TUI closed, the caller gave up), in-flight
    units are cancelled and still recorded before the cancellation goes on.
    """
    try:
        await _first(
            asyncio.wait(set(tasks)) if tasks else asyncio.sleep(0), host.stop_event.wait()
        )
        pending = _pending(tasks | host.extras)
        if pending and not host.abort_event.is_set():
            try:
                async with asyncio.timeout(host.load.grace_s):
                    # A count-bound run ends when its measured units have: warm-up
                    # requests still open then measure nothing and are cancelled.
                    await _first(
                        asyncio.wait(pending),
                        host.abort_event.wait(),
                        host.measured_done.wait(),
                    )
            except TimeoutError:
                pass  # the grace period is over: what is left is cancelled below
        reason = (
            "aborted"
            if host.abort_event.is_set()
            else "warmup_unneeded"
            if host.measured_done.is_set()
            else "grace_expired"
        )
        await _cancel(host, tasks | host.extras, reason)
    except asyncio.CancelledError:
        host.stop_event.set()
        await _cancel(host, tasks | host.extras, "run_cancelled")
        raise


def _pending(tasks: Iterable[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
    return {t for t in tasks if not t.done()}


async def _cancel(host: LoopHost, tasks: set[asyncio.Task[None]], reason: str) -> None:
    """Cancel what is still running and wait until each has written its record."""
    pending = _pending(tasks)
    if not pending:
        return
    host.cancelling_for(reason)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def _first(*aws: Awaitable[Any]) -> None:
    """Wait until the first of ``aws`` completes; cancel and await the others."""
    futures = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in futures:
            f.cancel()
        await asyncio.gather(*futures, return_exceptions=True)
