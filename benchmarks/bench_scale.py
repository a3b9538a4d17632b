"""Scale of one driver process (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_scale streams [--levels 1000,5000]
    python -m benchmarks.bench_scale long [--requests 1000000]

``streams``: N sessions hold N slow streams open at once (the simulator, in its own
process, sends a token every second); once all are open, the driver's RSS above its
idle RSS, divided by N, is the memory per open stream, and the in-flight count shows
whether one process holds them all.

``long``: a fast simulator (one token per answer, no delay) and 64 sessions for
``--requests`` requests; the driver's RSS is sampled every 100,000 requests. Nothing
per request is kept in memory (records go to requests.jsonl and into histograms), so it
must stay flat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.engine.gc_policy import QuietGc
from loadtest.engine.runner import RunConfig, Runner
from loadtest.sim import SimConfig, SimProcess


def _scenario(load: dict[str, Any], max_tokens: int) -> Scenario:
    return parse_scenario(
        {
            "name": "scale",
            "max_tokens": max_tokens,
            "sources": [{"kind": "inline", "prompts": [f"scale prompt {i}" for i in range(100)]}],
            "load": {"grace_s": 1, **load},
            "timeouts": {"first_byte_s": 120, "between_chunks_s": 60, "total_s": 3600},
        },
        "scale.toml",
    )


def _rss_mib() -> float:
    return psutil.Process(os.getpid()).memory_info().rss / 2**20


async def _streams(url: str, n: int, out: Path) -> dict[str, Any]:
    sc = _scenario({"mode": "closed", "concurrency": n, "duration_s": 3600, "ramp_up_s": 5}, 600)
    pool, _ = build_pool(sc)
    runner = Runner(RunConfig(sc, url, "sim-llm", out), pool, hooks=[QuietGc()])
    base = _rss_mib()
    task = asyncio.create_task(runner.run())
    t0 = time.monotonic()
    peak_in_flight = 0
    while time.monotonic() - t0 < 30:
        await asyncio.sleep(0.5)
        peak_in_flight = max(peak_in_flight, runner.in_flight)
        if runner.in_flight >= n and time.monotonic() - t0 > 6:
            break
    await asyncio.sleep(2)  # every stream open and receiving tokens
    held = runner.in_flight
    rss = _rss_mib()
    runner.cancel_in_flight()
    outcome = await task
    m = outcome.metrics
    return {
        "streams": n,
        "in_flight_held": held,
        "peak_in_flight": peak_in_flight,
        "rss_idle_mib": round(base, 1),
        "rss_open_mib": round(rss, 1),
        "kib_per_stream": round((rss - base) * 1024 / max(held, 1), 1),
        "accounted": m.sent == m.outcomes["ok"] + m.outcomes["failed"] + m.outcomes["cancelled"],
        "failed": m.outcomes["failed"],
    }


def bench_streams(levels: list[int]) -> list[dict[str, Any]]:
    """Memory per open stream at each level, one fresh driver state per level."""
    cfg = SimConfig(
        step_token_share=0.0,
        ttft_ms=50.0,
        itl_ms=1000.0,
        ttft_sigma=0.0,
        itl_sigma=0.0,
        min_output_fraction=1.0,
    )
    rows = []
    with SimProcess(cfg) as sim, tempfile.TemporaryDirectory() as tmp:
        for n in levels:
            rows.append(asyncio.run(_streams(sim.url, n, Path(tmp) / f"s{n}")))
    return rows


async def _long(url: str, requests: int, out: Path) -> list[tuple[int, float, float]]:
    sc = _scenario({"mode": "closed", "concurrency": 64, "requests": requests}, 1)
    pool, _ = build_pool(sc)
    runner = Runner(RunConfig(sc, url, "sim-llm", out), pool, hooks=[QuietGc()])
    task = asyncio.create_task(runner.run())
    samples = [(0, 0.0, _rss_mib())]
    t0 = time.monotonic()
    step = max(1, requests // 10)
    while not task.done():
        await asyncio.sleep(0.5)
        sent = runner.metrics.sent
        if sent >= samples[-1][0] + step:
            samples.append((sent, time.monotonic() - t0, _rss_mib()))
    await task
    samples.append((runner.metrics.sent, time.monotonic() - t0, _rss_mib()))
    return samples


def bench_long(requests: int) -> list[tuple[int, float, float]]:
    """RSS every tenth of a ``requests``-long run against a fast simulator."""
    cfg = SimConfig(
        step_token_share=0.0,
        ttft_ms=0.0,
        itl_ms=0.0,
        ttft_sigma=0.0,
        itl_sigma=0.0,
        ttft_per_1k_tokens_ms=0,
    )
    with SimProcess(cfg) as sim, tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_long(sim.url, requests, Path(tmp)))


def main() -> None:
    """Run one benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("which", choices=("streams", "long"))
    ap.add_argument("--levels", default="1000,5000")
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args()
    if args.which == "streams":
        print("| streams | held open | RSS idle MiB | RSS open MiB | KiB per stream | accounted |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in bench_streams([int(x) for x in args.levels.split(",")]):
            print(
                f"| {r['streams']:,} | {r['in_flight_held']:,} | {r['rss_idle_mib']} | "
                f"{r['rss_open_mib']} | {r['kib_per_stream']} | {r['accounted']} |"
            )
    else:
        print("| requests done | seconds | driver RSS MiB |")
        print("| --- | --- | --- |")
        for sent, secs, rss in bench_long(args.requests):
            print(f"| {sent:,} | {secs:.0f} | {rss:.1f} |")


if __name__ == "__main__":
    main()
