"""Arrival stamps: token times are when bytes reached the process, not when it read them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import orjson

from loadtest.arrivals import stamping_connector, stamps_arrivals
from loadtest.datasets import build_pool
from loadtest.record import RequestRecord
from loadtest.runner import RunConfig, Runner
from loadtest.sim import SimConfig, SimProcess
from tests.conftest import make_scenario

HOG_S = 0.05


async def test_this_aiohttp_lets_the_client_stamp_arrivals() -> None:
    # If aiohttp changes how its connector builds protocols, stamping degrades to the
    # reader's clock; this says so before the figures quietly get worse.
    connector = stamping_connector(limit=0)
    try:
        assert stamps_arrivals(connector)
    finally:
        await connector.close()


def _hog(loop: asyncio.AbstractEventLoop, stop: list[bool]) -> None:
    """Hold the loop for HOG_S once per iteration, like a driver busy with other streams."""
    if stop:
        return
    time.sleep(HOG_S)
    loop.call_soon(_hog, loop, stop)


async def test_a_busy_loop_is_reported_as_client_lag_not_as_server_latency(
    tmp_path: Path,
) -> None:
    # The hog runs once per loop iteration. A reader resumes one iteration after its
    # bytes were received, behind the hog, so it sees them at least HOG_S late: that
    # time must show as client_lag_ms, and the token times must be the earlier arrivals,
    # never earlier than the simulator wrote the token.
    records: list[RequestRecord] = []
    sim_cfg = SimConfig(ttft_ms=20.0, itl_ms=10.0, ttft_sigma=0.0, itl_sigma=0.0)
    with SimProcess(sim_cfg) as sim:
        sc = make_scenario({"mode": "closed", "concurrency": 1, "requests": 5}, max_tokens=4)
        pool, _ = build_pool(sc)
        runner = Runner(RunConfig(sc, sim.url, "sim-llm", tmp_path), pool, on_record=records.append)
        loop = asyncio.get_running_loop()
        stop: list[bool] = []
        loop.call_soon(_hog, loop, stop)
        try:
            outcome = await runner.run()
        finally:
            stop.append(True)
        async with aiohttp.ClientSession() as s, s.get(sim.url + "/sim/truth") as resp:
            truth = {t["id"]: t for t in orjson.loads(await resp.read())}
    assert len(records) == 5 and all(r.outcome == "ok" for r in records)
    for r in records:
        assert r.client_lag_ns is not None and r.client_lag_ns >= HOG_S * 1e9, r.client_lag_ns
        t = truth[r.response_id or ""]
        assert r.first_token_ns is not None
        assert r.first_token_ns >= t["first_token_written_ns"]
        # The request left after the send began and before the simulator handled it.
        assert r.written_ns is not None and r.sent_ns <= r.written_ns <= t["received_ns"]
    lag = outcome.metrics.total.hists["client_lag_ms"]
    assert lag.get_total_count() == 5 and lag.get_min_value() >= HOG_S * 1e6  # µs
