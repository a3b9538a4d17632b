"""Arrival stamps: token times are when bytes reached the process, not when it read them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import orjson

from loadtest._compat.arrivals import stamping_connector, stamps_arrivals
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.model.record import RequestRecord
from loadtest.sim import InProcessSim, SimConfig, SimProcess
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


def _hog(loop: asyncio.AbstractEventLoop, stop: list[bool], began: list[int]) -> None:
    """Hold the loop for HOG_S once per iteration, like a driver busy with other streams;
    ``began`` gets the start of each hold."""
    if stop:
        return
    began.append(time.perf_counter_ns())
    time.sleep(HOG_S)
    loop.call_soon(_hog, loop, stop, began)


async def _hogged_run(
    url: str, out: Path, max_tokens: int, records: list[RequestRecord], began: list[int]
) -> RunOutcome:
    """Five requests, one at a time, while the hog holds the loop once per iteration."""
    sc = make_scenario({"mode": "closed", "concurrency": 1, "requests": 5}, max_tokens=max_tokens)
    pool, _ = build_pool(sc)
    runner = Runner(RunConfig(sc, url, "sim-llm", out), pool, on_record=records.append)
    loop = asyncio.get_running_loop()
    stop: list[bool] = []
    loop.call_soon(_hog, loop, stop, began)
    try:
        return await runner.run()
    finally:
        stop.append(True)


async def test_a_busy_loop_is_reported_as_client_lag_not_as_server_latency(
    tmp_path: Path, kernel_stamping: bool
) -> None:
    # The hog runs once per loop iteration. A reader resumes one iteration after its
    # bytes were received, behind the hog, so it sees them at least HOG_S late: that
    # time must show as client_lag_ms, and the token times must be the earlier arrivals,
    # never earlier than the simulator wrote the token. Tokens come 3 hogs apart, so
    # each arrives in a read of its own (a read's stamp is that of its newest bytes).
    records: list[RequestRecord] = []
    sim_cfg = SimConfig(ttft_ms=20.0, itl_ms=3e3 * HOG_S, ttft_sigma=0.0, itl_sigma=0.0)
    with SimProcess(sim_cfg) as sim:
        outcome = await _hogged_run(sim.url, tmp_path, 3, records, [])
        async with aiohttp.ClientSession() as s, s.get(sim.url + "/sim/truth") as resp:
            truth = {t["id"]: t for t in orjson.loads(await resp.read())}
    assert len(records) == 5 and all(r.outcome == "ok" for r in records)
    for r in records:
        assert r.client_lag_ns is not None and r.client_lag_ns >= HOG_S * 1e9, r.client_lag_ns
        t = truth[r.response_id or ""]
        assert r.first_token_ns is not None
        assert r.first_token_ns >= t["first_token_written_ns"]
        if kernel_stamping:  # the kernel's stamp: the hog cannot delay it
            # Read by the loop, the token would be seen >= HOG_S after it arrived (the
            # client_lag check above), so half a hog tells the two apart every time; the
            # stamp passes it only if the simulator's process (whose write time is the
            # truth) was held 25 ms between noting the write and making it.
            assert r.first_token_ns - t["first_token_written_ns"] < HOG_S * 1e9 / 2
        # The request left after the send began and before the simulator handled it.
        assert r.written_ns is not None and r.sent_ns <= r.written_ns <= t["received_ns"]
    clock = "kernel" if kernel_stamping else "loop"
    assert all(r.arrival_clock == clock for r in records)
    assert outcome.metrics.kernel_stamped == (5 if kernel_stamping else 0)
    lag = outcome.metrics.total.hists["client_lag_ms"]
    assert lag.get_total_count() == 5 and lag.get_min_value() >= HOG_S * 1e6  # µs


async def test_the_simulators_truth_starts_when_the_request_reached_it(
    tmp_path: Path, kernel_stamping: bool
) -> None:
    # Simulator and client share this loop, and the hog holds it: a request waits in
    # the simulator's socket up to HOG_S before its handler runs. That wait is the
    # server's (a client sees it), so the truth's received_ns is the kernel's arrival:
    # just after the client wrote the request.
    records: list[RequestRecord] = []
    sim_cfg = SimConfig(ttft_ms=5.0, itl_ms=5.0, ttft_sigma=0.0, itl_sigma=0.0)
    async with InProcessSim(sim_cfg) as sim:
        began: list[int] = []
        await _hogged_run(sim.url, tmp_path, 2, records, began)
        assert sim.server is not None
        truth = {t.id: t for t in sim.server.truth}
    assert len(records) == 5 and all(r.outcome == "ok" for r in records)
    for r in records:
        t = truth[r.response_id or ""]
        assert r.written_ns is not None and r.written_ns <= t.received_ns
        if kernel_stamping:
            # The request reached the simulator's socket within the client's write, so
            # before the next hold of the loop began; the handler runs only after that
            # hold (>= HOG_S later). Half a hog past its start covers the stamp's
            # conversion to perf_counter (two adjacent clock reads) and separates the
            # kernel's arrival from the handler's time on every request.
            hog = min(h for h in began if h >= r.written_ns)
            assert t.received_ns < hog + HOG_S * 1e9 / 2, (t.received_ns - hog) / 1e6
