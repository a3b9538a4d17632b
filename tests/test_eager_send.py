"""Eager sends: the request is written in the call that sends it."""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp
import pytest

from loadtest._compat.arrivals import arrival_stamps, stamping_connector
from loadtest._compat.eager_send import EagerRequest, start_eagerly
from loadtest.sim import SimConfig, SimProcess

HOG_S = 0.05


async def test_the_first_step_runs_at_once_and_the_task_finishes_the_rest() -> None:
    steps: list[str] = []
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def body() -> int:
        steps.append("first")
        got = await gate
        steps.append("rest")
        return got + 1

    coro = start_eagerly(body())
    assert steps == ["first"]  # before any task exists
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    assert steps == ["first"] and not task.done()
    gate.set_result(41)
    assert await task == 42 and steps == ["first", "rest"]


async def test_outcomes_reach_the_task_as_if_it_had_run_the_whole_coroutine() -> None:
    async def done_at_once() -> str:
        return "value"

    async def fails_at_once() -> None:
        raise ValueError("first step")

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    assert await asyncio.ensure_future(start_eagerly(done_at_once())) == "value"
    with pytest.raises(ValueError, match="first step"):
        await asyncio.ensure_future(start_eagerly(fails_at_once()))
    with pytest.raises(KeyError, match="later"):
        await asyncio.ensure_future(start_eagerly(fails_later()))


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    cleaned: list[bool] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    task = asyncio.ensure_future(start_eagerly(waits()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [True]


def _hog(began: list[int]) -> None:
    began.append(time.perf_counter_ns())
    time.sleep(HOG_S)


async def _written_after(
    url: str, request_class: type[aiohttp.ClientRequest]
) -> tuple[float, bytes, bool]:
    # A pooled connection (warmed first), then a loop turn already queued: the hog.
    # The request is written before the hog runs only if the write is eager.
    body = b'{"model": "sim-llm", "prompt": "hi", "max_tokens": 1}'
    url += "/v1/completions"
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(
        connector=stamping_connector(limit=0), request_class=request_class
    ) as s:
        async with s.post(url, data=body, headers=headers) as resp:
            await resp.read()
        began: list[int] = []
        asyncio.get_running_loop().call_soon(_hog, began)
        start = time.perf_counter_ns()
        async with s.post(url, data=body, headers=headers) as resp:
            stamps = arrival_stamps(resp)
            assert stamps is not None
            (hog,) = began
            # Written before the queued hog ran: an ordering of two clock reads in this
            # thread, which no preemption or collection can turn around.
            return (stamps.tx_ns - start) / 1e9, await resp.read(), stamps.tx_ns < hog


async def test_a_request_leaves_before_the_queued_loop_turn() -> None:
    with SimProcess(SimConfig(ttft_ms=1.0, itl_ms=1.0)) as sim:
        eager, answer, before_hog = await _written_after(sim.url, EagerRequest)
        lazy, _, _ = await _written_after(sim.url, aiohttp.ClientRequest)
    assert b'"choices"' in answer  # the request was whole and answered
    assert eager >= 0 and before_hog, eager
    if sys.version_info < (3, 12):  # aiohttp's own write is lazy there: the control
        assert lazy >= HOG_S, lazy
