"""Dispatch lag against a bare asyncio + aiohttp sender, by rate (not a test: prints figures).

    python -m benchmarks.bench_dispatch                       # 250, 500, 1000 req/s
    python -m benchmarks.bench_dispatch --rates 1000 --rounds 3 --rt

The simulator runs on core 1 and the driver on core 0. Each round runs, at each rate,
for ``--seconds``:
- ``poisson``: loadtest's engine, Poisson arrivals (bench_client's setup: 4 output tokens,
  5 ms to the first token, 2 ms between tokens);
- ``trace``: loadtest replaying an evenly spaced trace at the same rate (bench_trace);
- ``bare``: the floor: one asyncio task per arrival from a pacer sleeping to absolute
  Poisson deadlines, each posting with aiohttp and reading its stream line by line,
  stamping the send as loadtest does (when the request's coroutine starts);
- ``armed``: ``bare`` with each arrival's task made one arrival ahead, sleeping to its own
  deadline (one loop turn fewer between the timer and the send: a design tried here).

Each runs on the loops of ``--loops``: ``precise`` (loadtest's, whose timers keep their
microseconds: ``loadtest/_compat/precise_timers.py``) and ``default`` (asyncio's epoll
loop, which wakes on whole milliseconds).

For each: dispatch lag (send minus intended) p50/p99/max in ms, and the driver's CPU per
request in µs (its busy share of core 0 is that times the rate). ``--rt`` runs driver and
simulator under SCHED_FIFO (root only): on a machine where other jobs share the cores it
stands in for the quiet core the target assumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson

from benchmarks.bench_client import DISPATCH_SIM, _run, _scenario
from benchmarks.bench_trace import replay, write_trace
from loadtest.engine.schedule import ArrivalPlan, arrival_offsets_ns
from loadtest.model.record import RequestRecord
from loadtest.sim import SimProcess


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _figures(lags_ns: list[int], cpu_s: float) -> dict[str, float]:
    lags = np.array(lags_ns, dtype=np.float64) / 1e6
    return {
        "n": len(lags),
        "p50": round(float(np.percentile(lags, 50)), 3),
        "p99": round(float(np.percentile(lags, 99)), 3),
        "max": round(float(lags.max()), 3),
        "cpu_us_per_request": round(1e6 * cpu_s / len(lags)),
    }


async def _bare(url: str, rate: float, seconds: float, armed: bool = False) -> list[int]:
    body = orjson.dumps(
        {
            "model": "sim-llm",
            "messages": [{"role": "user", "content": "bench prompt"}],
            "max_tokens": 4,
            "stream": True,
        }
    )
    lags: list[int] = []
    tasks: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession() as session:

        async def one(intended: int) -> None:
            if armed:
                while (delay := intended - time.perf_counter_ns()) > 0:  # noqa: ASYNC110
                    await asyncio.sleep(delay / 1e9)
            lags.append(time.perf_counter_ns() - intended)
            async with session.post(
                url + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        orjson.loads(line[6:])

        loop = asyncio.get_running_loop()
        start = time.perf_counter_ns() + 50_000_000
        end = start + int(seconds * 1e9)
        for off in arrival_offsets_ns(ArrivalPlan("poisson", rate), 0):
            intended = start + off
            if intended >= end:
                break
            if armed:
                # The next arrival's task is made now and sleeps to its own deadline: its
                # timer wakes it directly, one loop turn sooner than a woken pacer would.
                task = loop.create_task(one(intended))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            # Never before the intended time: sleep again until the clock agrees.
            while (delay := intended - time.perf_counter_ns()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(delay / 1e9)
            if not armed:
                task = loop.create_task(one(intended))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    return lags


def _round(kind: str, loop: str, url: str, rate: float, seconds: float) -> dict[str, float]:
    c0 = _cpu()
    run: Any = asyncio.run
    if loop == "precise":
        # Imported here, so that the script runs against a tree without it (before/after).
        from loadtest._compat import precise_timers

        run = precise_timers.run
    if kind in ("bare", "armed"):
        lags = run(_bare(url, rate, seconds, armed=kind == "armed"))
    else:
        records: list[RequestRecord] = []
        if kind == "poisson":
            sc = _scenario({"mode": "poisson", "rate": rate, "duration_s": seconds}, 4)
            run(_run(sc, url, records))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                trace = Path(tmp) / "trace.jsonl"
                write_trace(trace, rate, seconds)
                run(replay(trace, url, Path(tmp), records))
        lags = [r.sent_ns - r.intended_ns for r in records]
    return _figures(lags, _cpu() - c0)


def main() -> None:
    """Run the rounds and print one JSON line per (round, rate, kind)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rates", default="250,500,1000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--kinds", default="poisson,trace,bare")
    ap.add_argument(
        "--loops", default="precise,default", help="event loops to alternate (precise: loadtest's)"
    )
    ap.add_argument("--rt", action="store_true", help="SCHED_FIFO for driver and simulator")
    args = ap.parse_args()
    if args.rt:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    with SimProcess(DISPATCH_SIM) as sim:
        assert sim.pid is not None
        os.sched_setaffinity(sim.pid, {1})
        os.sched_setaffinity(0, {0})
        for r in range(args.rounds):
            for rate in (float(x) for x in args.rates.split(",")):
                for kind in args.kinds.split(","):
                    for loop in args.loops.split(","):
                        fig = _round(kind, loop, sim.url, rate, args.seconds)
                        line = {"round": r, "rate": rate, "kind": kind, "loop": loop, **fig}
                        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
