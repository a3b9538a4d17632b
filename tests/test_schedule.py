"""Arrival plans and the pacer, on a fake clock (no sleeping)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from loadtest.engine.schedule import ArrivalPlan, arrival_offsets_ns, pace


class FakeClock:
    """Time moves only when the pacer sleeps; each sleep overshoots by ``late_ns``."""

    def __init__(self, late_ns: int = 0) -> None:
        self.t = 1_000_000
        self.late_ns = late_ns
        self.sleeps = 0

    def now_ns(self) -> int:
        return self.t

    async def sleep_until(self, deadline_ns: int) -> None:
        self.sleeps += 1
        self.t = max(self.t, deadline_ns) + self.late_ns


def take(plan: ArrivalPlan, n: int, seed: int = 0) -> list[int]:
    return list(itertools.islice(arrival_offsets_ns(plan, seed), n))


def test_constant_rate_is_exact() -> None:
    assert take(ArrivalPlan("constant", 4.0), 4) == [0, 250_000_000, 500_000_000, 750_000_000]


@pytest.mark.parametrize("mode", ["poisson", "gamma"])
def test_mean_rate_matches_the_plan(mode: str) -> None:
    params = {"burstiness": 3.0} if mode == "gamma" else {}
    offsets = take(ArrivalPlan(mode, 1000.0, params), 20_001, seed=7)
    rate = 20_000 / (offsets[-1] / 1e9)
    assert rate == pytest.approx(1000.0, rel=0.05)


def test_burstiness_raises_the_spread_of_gaps() -> None:
    def cv(burst: float) -> float:
        o = take(ArrivalPlan("gamma", 100.0, {"burstiness": burst}), 5000, seed=3)
        gaps = [b - a for a, b in itertools.pairwise(o)]
        return statistics.pstdev(gaps) / statistics.mean(gaps)

    assert cv(0.25) < 0.7 < cv(1.0) < 1.3 < cv(4.0)


def test_same_seed_same_schedule() -> None:
    plan = ArrivalPlan("poisson", 50.0)
    assert take(plan, 100, seed=5) == take(plan, 100, seed=5)
    assert take(plan, 100, seed=5) != take(plan, 100, seed=6)


def test_bad_plans_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="rate"):
        ArrivalPlan("poisson", 0.0)
    with pytest.raises(ValueError, match="mode"):
        ArrivalPlan("bursty", 1.0)
    with pytest.raises(ValueError, match="burstiness"):
        ArrivalPlan("gamma", 1.0, {"burstiness": 0})
    with pytest.raises(ValueError, match="pulse: not a key of mode 'gamma'"):
        ArrivalPlan("gamma", 1.0, {"pulse": 3})
    with pytest.raises(ValueError, match="'closed' is no arrival process"):
        ArrivalPlan("closed", 1.0)
    # A plan made in code gets the process's defaults, as a scenario file's does.
    assert ArrivalPlan("gamma", 1.0).params == {"burstiness": 1.0}
    with pytest.raises(ValueError, match="share"):
        take_share(ArrivalPlan("poisson", 1.0), 2, 2)


def take_share(plan: ArrivalPlan, worker: int, workers: int, n: int = 10) -> list[int]:
    return list(itertools.islice(arrival_offsets_ns(plan, 4, (worker, workers)), n))


@pytest.mark.parametrize(
    "plan",
    [
        ArrivalPlan("constant", 100.0),
        ArrivalPlan("poisson", 100.0),
        ArrivalPlan("gamma", 100.0, {"burstiness": 3.0}),
        ArrivalPlan("trace", 1.0, offsets_ns=tuple(range(0, 3_000, 7))),
    ],
    ids=lambda p: p.mode,
)
def test_the_shares_of_n_workers_together_are_the_whole_plan(plan: ArrivalPlan) -> None:
    whole = list(itertools.islice(arrival_offsets_ns(plan, 4), 300))
    shares = [take_share(plan, i, 3, 100) for i in range(3)]
    # Worker i keeps arrivals i, i + 3, ...: interleaved again they are the whole plan.
    assert [shares[k % 3][k // 3] for k in range(300)] == whole
    assert len(set(whole)) > 250  # a plan, not one offset repeated


async def test_pace_sleeps_to_absolute_deadlines_without_drift() -> None:
    clock = FakeClock(late_ns=3_000_000)  # every wake-up is 3 ms late
    start = clock.t
    got = [
        x
        async for x in pace(arrival_offsets_ns(ArrivalPlan("constant", 100.0), 0), clock, limit=50)
    ]
    # Intended times stay on the 10 ms grid: lateness does not accumulate into them.
    assert [t for _, t in got] == [start + i * 10_000_000 for i in range(50)]
    # And the clock never falls further behind than one wake-up's lateness.
    assert clock.t - got[-1][1] == 3_000_000


async def test_pace_yields_overdue_arrivals_at_once_with_their_intended_times() -> None:
    clock = FakeClock()
    start = clock.t
    it = pace(arrival_offsets_ns(ArrivalPlan("constant", 1000.0), 0), clock, limit=5)
    first = await it.__anext__()
    clock.t += 3_500_000  # the consumer stalled for 3.5 ms
    rest = [x async for x in it]
    assert first == (0, start)
    assert [t - start for _, t in rest] == [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    assert clock.sleeps == 1  # 1, 2 and 3 ms were overdue; only 4 ms needed a sleep


async def test_pace_with_a_lead_yields_each_arrival_that_long_before_it_is_due() -> None:
    # The open loop makes each arrival's task ahead; the task sleeps the rest itself.
    clock = FakeClock()
    start = clock.t
    seen: list[tuple[int, int]] = []
    async for _, intended in pace(
        arrival_offsets_ns(ArrivalPlan("constant", 100.0), 0), clock, limit=4, lead_ns=2_000_000
    ):
        seen.append((clock.now_ns(), intended))
    assert [i - start for _, i in seen] == [0, 10_000_000, 20_000_000, 30_000_000]
    # The first is overdue at once; each later one comes 2 ms before its time, never later.
    assert [i - now for now, i in seen] == [0, 2_000_000, 2_000_000, 2_000_000]


async def test_pace_stops_at_the_end_time() -> None:
    clock = FakeClock()
    got = [
        x
        async for x in pace(
            arrival_offsets_ns(ArrivalPlan("constant", 10.0), 0),
            clock,
            start_ns=0,
            until_ns=1_000_000_000,
        )
    ]
    assert len(got) == 10


def test_the_real_clock_never_wakes_before_the_deadline_on_either_loop() -> None:
    import asyncio
    import time

    import uvloop

    from loadtest.engine.schedule import MonotonicClock

    async def earliest_wakeups() -> list[int]:
        clock = MonotonicClock()
        late = []
        for i in range(50):
            deadline = time.perf_counter_ns() + 100_000 + 10_000 * i  # 0.1-0.6 ms ahead
            await clock.sleep_until(deadline)
            late.append(time.perf_counter_ns() - deadline)
        return late

    # uvloop fires sub-millisecond timers early; the clock must sleep again.
    assert min(uvloop.run(earliest_wakeups())) >= 0
    assert min(asyncio.run(earliest_wakeups())) >= 0
