"""The dashboard's cost to the driver (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_tui [--seconds 8] [--rounds 3]

The same saturating closed-loop run (64 sessions, 256-token streams from a fast
simulator in its own process) goes once plain and once under the dashboard (Textual,
headless, 120x48, refreshing four times a second), alternating, ``--rounds`` times.
The driver's capacity is the output tokens per second it ingested; the overhead is
1 - with / without, per round and over all rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.engine.gc_policy import QuietGc
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.sim import SimConfig, SimProcess
from loadtest.tui import Dashboard


def _scenario(seconds: float) -> Scenario:
    return parse_scenario(
        {
            "name": "bench-tui",
            "max_tokens": 256,
            "sources": [{"kind": "inline", "prompts": [f"prompt {i}" for i in range(200)]}],
            "load": {"concurrency": 64, "duration_s": seconds, "warmup_s": 1, "grace_s": 30},
        },
        "bench-tui.toml",
    )


async def _plain(sc: Scenario, url: str, out: Path) -> RunOutcome:
    pool, _ = build_pool(sc)
    return await Runner(RunConfig(sc, url, "sim-llm", out), pool, hooks=[QuietGc()]).run()


async def _dashboard(sc: Scenario, url: str, out: Path) -> RunOutcome:
    pool, _ = build_pool(sc)

    async def prepare() -> Runner:
        return Runner(RunConfig(sc, url, "sim-llm", out), pool, hooks=[QuietGc()])

    app = Dashboard(prepare)
    async with app.run_test(size=(120, 48)) as pilot:
        while app.outcome is None and app.error is None:
            await pilot.pause(0.5)
    if app.error is not None:
        raise app.error
    assert app.outcome is not None
    return app.outcome


def _tok_s(o: RunOutcome) -> float:
    return o.metrics.output_tokens / o.measured_s


def main() -> None:
    """Alternate plain and dashboard runs; print one table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sim = SimProcess(SimConfig(ttft_ms=1.0, itl_ms=0.0, ttft_sigma=0.0, itl_sigma=0.0))
    url = sim.start()
    sc = _scenario(args.seconds)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                plain = _tok_s(asyncio.run(_plain(sc, url, Path(tmp) / f"plain-{i}")))
                dash = _tok_s(asyncio.run(_dashboard(sc, url, Path(tmp) / f"dash-{i}")))
                rows.append((plain, dash))
    finally:
        sim.stop()
    print("| round | plain tok/s | dashboard tok/s | overhead |")
    print("| --- | --- | --- | --- |")
    for i, (p, d) in enumerate(rows, 1):
        print(f"| {i} | {p:,.0f} | {d:,.0f} | {1 - d / p:+.1%} |")
    p_mean = statistics.fmean(p for p, _ in rows)
    d_mean = statistics.fmean(d for _, d in rows)
    print(f"| mean | {p_mean:,.0f} | {d_mean:,.0f} | {1 - d_mean / p_mean:+.1%} |")


if __name__ == "__main__":
    main()
