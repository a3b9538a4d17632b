"""Benchmarks of the driver itself (not a test: prints figures, asserts nothing about speed).

    python -m benchmarks.bench_client            # all three, ~2 minutes
    python -m benchmarks.bench_client --quick    # shorter runs

1. ingest: token chunks per second one driver process takes in, per CPU-second of the
   driver and per wall second, beside a minimal aiohttp line reader as the yardstick.
2. ttft: client TTFT minus the simulator's truth (its own TTFT: first token written
   minus request received, both stamped by the kernel on Linux) at 1, 100 and 1,000
   concurrent streams; p50 and p99; the client lag per request (how late the reader got
   to bytes already received, which arrival stamps keep out of the TTFT); and that gap
   split into the simulator's own queue (request written -> its arrival stamp), the
   client's share (send start -> request written, plus simulator's write -> client's
   arrival stamp) and, within it, the send (send start -> request written).
3. poisson: achieved send rate, dispatch lag and intended send -> request written, for
   Poisson arrivals at 1,000 req/s.

The simulator runs as its own process (its own core on a 2-core machine); the driver
runs here. Results go to stdout and, with --json PATH, to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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

from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.engine.gc_policy import QuietGc
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.engine.schedule import ArrivalPlan, arrival_offsets_ns
from loadtest.model.record import RequestRecord
from loadtest.sim import SimConfig, SimProcess


def _scenario(load: dict[str, Any], max_tokens: int, prompts: list[str] | None = None) -> Scenario:
    """A bench scenario: inline prompts (500 short ones unless given), no timeouts in
    the way, ``load`` as the ``[load]`` table."""
    texts = prompts if prompts is not None else [f"bench prompt {i}" for i in range(500)]
    return parse_scenario(
        {
            "name": "bench",
            "max_tokens": max_tokens,
            "sources": [{"kind": "inline", "prompts": texts}],
            "load": {"grace_s": 30, **load},
            "timeouts": {"first_byte_s": 60, "between_chunks_s": 60},
        },
        "bench.toml",
    )


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _run(
    sc: Scenario,
    url: str,
    sink: list[RequestRecord] | None = None,
    record_outputs: bool = False,
    resent: list[int] | None = None,
) -> RunOutcome:
    """One whole run of ``sc`` against ``url``, its records to ``sink`` (with
    ``record_outputs``, each carries the digest of its answer); the requests the client
    resent on a fresh connection are appended to ``resent``."""
    pool, _ = build_pool(sc)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(
            scenario=sc,
            endpoint=url,
            model="sim-llm",
            run_dir=Path(tmp),
            record_outputs=record_outputs,
        )
        runner = Runner(
            cfg, pool, on_record=sink.append if sink is not None else None, hooks=[QuietGc()]
        )
        out = await runner.run()
        if resent is not None:
            resent.append(runner.stale_retries)
        return out


# -- 1. ingest -----------------------------------------------------------------------------
async def _plain_reader(
    url: str,
    concurrency: int,
    seconds: float,
    max_tokens: int,
    content: str = "x",
    read_bufsize: int = 2**16,
    requests: int | None = None,
) -> int:
    """The yardstick: aiohttp, one session, read lines, count the data lines; for
    ``seconds``, or until ``requests`` were sent.

    aiohttp's line reader refuses a line over twice ``read_bufsize`` ("Chunk too big"):
    long lines need a larger one."""
    body = orjson.dumps(
        {
            "model": "sim-llm",
            "stream": True,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": content}],
        }
    )
    end = time.perf_counter() + seconds
    lines = 0
    left = requests
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, read_bufsize=read_bufsize) as s:

        async def worker() -> None:
            nonlocal lines, left
            while time.perf_counter() < end and (left is None or left > 0):
                if left is not None:
                    left -= 1
                async with s.post(
                    url + "/v1/chat/completions",
                    data=body,
                    headers={"Content-Type": "application/json"},
                ) as r:
                    async for line in r.content:
                        if line.startswith(b"data: {"):
                            lines += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return lines


FAST_SIM = SimConfig(
    step_token_share=0.0,
    ttft_ms=0.0,
    itl_ms=0.0,
    ttft_sigma=0,
    itl_sigma=0,
    ttft_per_1k_tokens_ms=0,
    min_output_fraction=1.0,
    max_batch=256,
)
"""No delays at all: the simulator writes as fast as the socket takes it, in batches."""


def bench_ingest(seconds: float, concurrency: int) -> dict[str, Any]:
    sim_cfg = FAST_SIM
    max_tokens = 2000
    out: dict[str, Any] = {"concurrency": concurrency, "tokens_per_response": max_tokens}
    with SimProcess(sim_cfg) as sim:
        for loop_name in ("asyncio", "uvloop"):
            records: list[RequestRecord] = []
            sc = _scenario(
                {"mode": "closed", "concurrency": concurrency, "duration_s": seconds}, max_tokens
            )
            cpu0, t0, sim0 = _cpu(), time.perf_counter(), _sim_cpu(sim)
            _drive(loop_name, _run(sc, sim.url, records))
            cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
            sim_cpu = _sim_cpu(sim) - sim0
            chunks = sum(r.chunks for r in records)
            out[f"loadtest_{loop_name}"] = {
                "chunks": chunks,
                "chunks_per_wall_s": round(chunks / wall),
                "chunks_per_cpu_s": round(chunks / cpu),
                "driver_cpu_share": round(cpu / wall, 3),
                # The simulator's own figure: chunks it writes per CPU-second of its own.
                "sim_chunks_per_cpu_s": round(chunks / sim_cpu) if sim_cpu else None,
                "sim_cpu_share": round(sim_cpu / wall, 3),
                "failed": sum(r.outcome != "ok" for r in records),
            }
        cpu0, t0 = _cpu(), time.perf_counter()
        lines = asyncio.run(_plain_reader(sim.url, concurrency, seconds, max_tokens))
        cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
        out["plain_aiohttp_lines"] = {
            "chunks": lines,
            "chunks_per_wall_s": round(lines / wall),
            "chunks_per_cpu_s": round(lines / cpu),
            "driver_cpu_share": round(cpu / wall, 3),
        }
    return out


def _sim_cpu(sim: SimProcess) -> float:
    import psutil

    assert sim.pid is not None
    t = psutil.Process(sim.pid).cpu_times()
    return float(t.user + t.system)


def _drive(loop_name: str, coro: Any) -> Any:
    if loop_name == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def _p50_p99(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50": round(float(np.percentile(values, 50)), 3),
        "p99": round(float(np.percentile(values, 99)), 3),
    }


# -- 2. TTFT against the truth --------------------------------------------------------------
async def _truth(url: str) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.get(url + "/sim/truth") as r:
        return {t["id"]: t for t in orjson.loads(await r.read())}


def bench_ttft(
    levels: list[int], seconds: float, loop_name: str = "asyncio", itl_ms: float | None = None
) -> dict[str, Any]:
    results = {}
    for n in levels:
        # Slow enough per stream that the streams stay within one simulator core.
        itl = itl_ms or (20.0 if n < 1000 else 100.0 if n < 5000 else 500.0)
        sim_cfg = SimConfig(
            step_token_share=0.0,
            ttft_ms=30.0,
            ttft_sigma=0.2,
            itl_ms=itl,
            itl_sigma=0.2,
            min_output_fraction=1.0,
        )
        with SimProcess(sim_cfg) as sim:
            records: list[RequestRecord] = []
            sc = _scenario(
                {
                    "mode": "closed",
                    "concurrency": n,
                    "duration_s": seconds,
                    "warmup_s": 2.0,
                    "ramp_up_s": 1.5,
                },
                16,
            )
            cpu0, sim0, t0 = _cpu(), _sim_cpu(sim), time.monotonic()
            _drive(loop_name, _run(sc, sim.url, records))
            wall = time.monotonic() - t0
            cpu = {
                "driver_cpu_pct": round(100 * (_cpu() - cpu0) / wall),
                "sim_cpu_pct": round(100 * (_sim_cpu(sim) - sim0) / wall),
            }
            truth = asyncio.run(_truth(sim.url))
        deltas, delivery, lag, client_share, sim_queue, send = [], [], [], [], [], []
        for r in records:
            t = truth.get(r.response_id or "")
            if r.warmup or r.outcome != "ok" or t is None or r.first_token_ns is None:
                continue
            client_ttft = r.first_token_ns - r.sent_ns
            server_ttft = t["first_token_written_ns"] - t["received_ns"]
            deltas.append((client_ttft - server_ttft) / 1e6)
            delivery.append((r.first_token_ns - t["first_token_written_ns"]) / 1e6)
            lag.append((r.client_lag_ns or 0) / 1e6)
            if r.written_ns is not None:
                # The simulator's own queue (its loop, before the handler ran) is in the
                # truth gap but not the client's doing: kept apart.
                queue = t["received_ns"] - r.written_ns
                send.append((r.written_ns - r.sent_ns) / 1e6)
                sim_queue.append(queue / 1e6)
                client_share.append((client_ttft - server_ttft - queue) / 1e6)
        results[str(n)] = {
            "requests": len(deltas),
            "failed": sum(r.outcome != "ok" for r in records),
            **cpu,
            "ttft_minus_truth_ms": _p50_p99(deltas),
            "first_token_delivery_ms": _p50_p99(delivery),
            # What reading on the reader's clock would have added (loadtest._compat.arrivals).
            "client_lag_ms": _p50_p99(lag),
            # The truth gap split: request written -> simulator handler (its queue), and
            # the rest, the client's own (send start -> written, sim write -> stamp).
            "sim_queue_ms": _p50_p99(sim_queue),
            "client_share_ms": _p50_p99(client_share),
            # The client's share split again: send start -> request written.
            "send_ms": _p50_p99(send),
        }
    return results


# -- 3. Poisson at 1,000 req/s -------------------------------------------------------------
DISPATCH_SIM = SimConfig(
    step_token_share=0.0,
    ttft_ms=5.0,
    itl_ms=2.0,
    ttft_sigma=0.1,
    itl_sigma=0.1,
    min_output_fraction=1.0,
)
"""The dispatch benchmarks' simulator: short, steady answers (5 ms, then 2 ms a token)."""


def bench_poisson(rate: float, seconds: float) -> dict[str, Any]:
    with SimProcess(DISPATCH_SIM) as sim:
        records: list[RequestRecord] = []
        sc = _scenario({"mode": "poisson", "rate": rate, "duration_s": seconds}, 4)
        out = asyncio.run(_run(sc, sim.url, records))
    sent = np.array(sorted(r.sent_ns for r in records), dtype=np.int64)
    lags = np.array([(r.sent_ns - r.intended_ns) / 1e6 for r in records])
    # Intended send -> request handed to the kernel: the pacer's lag and the send's cost.
    leave = np.array(
        [(r.written_ns - r.intended_ns) / 1e6 for r in records if r.written_ns is not None]
    )
    planned = sum(
        1
        for _ in itertools.takewhile(
            lambda o: o < seconds * 1e9, arrival_offsets_ns(ArrivalPlan("poisson", rate), 0)
        )
    )
    achieved = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
    return {
        "target_rate": rate,
        "planned_requests": planned,
        "sent": len(records),
        "ok": out.metrics.outcomes["ok"],
        "achieved_rate": round(achieved, 2),
        "achieved_vs_target_pct": round(100 * (achieved - rate) / rate, 3),
        "sent_vs_planned_pct": round(100 * (len(records) - planned) / planned, 3),
        "dispatch_lag_ms": {
            "p50": round(float(np.percentile(lags, 50)), 3),
            "p99": round(float(np.percentile(lags, 99)), 3),
            "max": round(float(lags.max()), 3),
        },
        "intended_to_written_ms": _p50_p99(list(leave)),
    }


def main() -> None:
    """Run the benchmarks and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--only", choices=("ingest", "ttft", "poisson"))
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--levels", default="1,100,1000", help="concurrent streams of the TTFT benchmark"
    )
    ap.add_argument(
        "--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the TTFT driver's loop"
    )
    ap.add_argument("--itl-ms", type=float, help="the simulator's token gap in the TTFT benchmark")
    args = ap.parse_args()
    secs = 4.0 if args.quick else 10.0
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    if args.only in (None, "ingest"):
        report["ingest"] = bench_ingest(secs, 64)
        print(json.dumps({"ingest": report["ingest"]}, indent=2), flush=True)
    if args.only in (None, "ttft"):
        report["ttft"] = bench_ttft(
            [int(x) for x in args.levels.split(",")], secs, args.loop, args.itl_ms
        )
        print(json.dumps({"ttft": report["ttft"]}, indent=2), flush=True)
    if args.only in (None, "poisson"):
        report["poisson"] = bench_poisson(1000.0, 2 * secs)
        print(json.dumps({"poisson": report["poisson"]}, indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
