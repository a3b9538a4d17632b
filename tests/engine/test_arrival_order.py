"""Open-loop arrivals take their unit indexes in the plan's order, however they wake.

A trace's line i must go out at line i's time. Two due arrivals can wake swapped (a
re-sleep after an early uvloop timer lands on the next whole ms; on a busy machine, one
suite run in two): a trace test saw line 5 sent at line 6's time (607.1 against 608.7
ms). Here a clock oversleeps one arrival's timer on purpose, so that the two after it
wake first.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner
from loadtest.engine.schedule import MonotonicClock
from loadtest.sim import InProcessSim
from tests.conftest import FAST_SIM, make_scenario, read_jsonl

LATE_ARRIVAL = 3
"""Which arrival's timer fires late (counted from 1)."""


class _OneLateTimer(MonotonicClock):
    """The real clock, but the third arrival's own sleep lasts 40 ms longer: the next
    arrivals (10 ms apart) are due and wake before it."""

    def __init__(self) -> None:
        self.arrival_sleeps = 0

    async def sleep_until(self, deadline_ns: int) -> None:
        task = asyncio.current_task()
        if task is not None and task.get_coro().__qualname__ == "_arrival":  # type: ignore[union-attr]
            self.arrival_sleeps += 1
            if self.arrival_sleeps == LATE_ARRIVAL:
                deadline_ns += 40_000_000
        await super().sleep_until(deadline_ns)


async def test_a_late_waking_arrival_keeps_its_place_in_the_plan(tmp_path: Path) -> None:
    sc = make_scenario({"mode": "constant", "rate": 100, "requests": 8, "warmup_s": 0})
    pool, _ = build_pool(sc)
    clock = _OneLateTimer()
    async with InProcessSim(FAST_SIM) as sim:
        runner = Runner(RunConfig(sc, sim.url, "sim-llm", tmp_path), pool, clock=clock)
        await runner.run()
    assert clock.arrival_sleeps >= LATE_ARRIVAL  # the late timer was armed
    rows = sorted(read_jsonl(tmp_path / "requests.jsonl"), key=lambda r: r["index"])
    assert len(rows) == 8
    intended = [r["intended_ms"] for r in rows]
    # Unit i went out as arrival i: 10 ms apart, in order.
    assert intended == sorted(intended)
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    assert all(abs(g - 10.0) < 0.01 for g in gaps), gaps
    # Sent in that order too: the first arrival to wake after the late timer sent the
    # unit due then, 10 ms late (its lag shows), not its own.
    sent = [r["sent_ms"] for r in rows]
    assert sent == sorted(sent)
    assert rows[LATE_ARRIVAL - 1]["dispatch_lag_ms"] >= 5
