"""How a run ends against an endpoint that stalls: on time, and every request accounted.

Cancellation means what asyncio means: a run cancelled from outside (the caller, an
``asyncio.timeout``) writes the in-flight requests' records and then raises; only the
engine's own ends (grace expired) turn into ``cancelled`` records of a finished run.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner
from tests.conftest import make_scenario, read_jsonl
from tests.hostile import HostileServer

# Generous bounds only: before the stop timer, this run lasted as long as the stall (30 s).
BOUND_S = 15.0


def _runner(url: str, tmp: Path, **load: float) -> Runner:
    sc = make_scenario({"mode": "closed", "concurrency": 2, **load})
    pool, _ = build_pool(sc)
    return Runner(RunConfig(sc, url, "hostile-llm", tmp), pool)


async def test_a_duration_bound_run_ends_on_time_against_a_stalled_stream(tmp_path: Path) -> None:
    with HostileServer() as hostile:
        runner = _runner(hostile.url("stall"), tmp_path, duration_s=3, warmup_s=1, grace_s=1)
        t = time.perf_counter()
        out = await runner.run()
        took = time.perf_counter() - t
    assert took < BOUND_S
    rows = read_jsonl(tmp_path / "requests.jsonl")
    # Both sessions were stuck in their warm-up request: cancelled after the grace.
    assert len(rows) == out.metrics.sent == 2
    assert sorted(r["index"] for r in rows) == [0, 1]
    assert {r["outcome"] for r in rows} == {"cancelled"}
    assert {r["error_class"] for r in rows} == {"grace_expired"}
    assert out.metrics.errors["grace_expired"] == 2
    assert not out.interrupted
    # The measured window began when the warm-up ended by the clock.
    assert out.measured_s >= 3.0


async def test_a_count_bound_run_ends_when_its_measured_requests_have(tmp_path: Path) -> None:
    # Open loop, 4/s: the first arrival (warm-up) stalls for 30 s, the two measured
    # ones are answered at once. The run must not wait out the warm-up request.
    sc = make_scenario(
        {"mode": "constant", "rate": 4, "requests": 2, "warmup_s": 0.2, "grace_s": 20}
    )
    pool, _ = build_pool(sc)
    with HostileServer() as hostile:
        runner = Runner(RunConfig(sc, hostile.url("stall-first"), "hostile-llm", tmp_path), pool)
        t = time.perf_counter()
        out = await runner.run()
        took = time.perf_counter() - t
    assert took < BOUND_S  # 20 s of grace or the 30 s stall before
    rows = read_jsonl(tmp_path / "requests.jsonl")
    warm = [r for r in rows if r["warmup"]]
    measured = [r for r in rows if not r["warmup"]]
    assert [r["outcome"] for r in measured] == ["ok", "ok"]
    assert warm and all(r["outcome"] == "cancelled" for r in warm)
    assert {r["error_class"] for r in warm} == {"warmup_unneeded"}
    assert len(rows) == out.metrics.sent


async def test_cancelling_the_run_propagates_after_the_records_are_written(
    tmp_path: Path,
) -> None:
    with HostileServer() as hostile:
        runner = _runner(hostile.url("stall"), tmp_path, duration_s=20, grace_s=10)
        task = asyncio.create_task(runner.run())
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, BOUND_S)
    rows = read_jsonl(tmp_path / "requests.jsonl")
    assert len(rows) == 2
    assert {(r["outcome"], r["error_class"]) for r in rows} == {("cancelled", "run_cancelled")}


async def test_an_asyncio_timeout_around_the_run_fires(tmp_path: Path) -> None:
    with HostileServer() as hostile:
        runner = _runner(hostile.url("stall"), tmp_path, duration_s=20, grace_s=10)
        t = time.perf_counter()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await runner.run()
        assert time.perf_counter() - t < BOUND_S
    rows = read_jsonl(tmp_path / "requests.jsonl")
    assert len(rows) == 2 and {r["outcome"] for r in rows} == {"cancelled"}
