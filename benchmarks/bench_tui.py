"""The dashboard's cost to the driver (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_tui [--seconds 10] [--rounds 3] [--streams 64] [--itl-ms 25]

The same closed-loop run (``--streams`` sessions of 128-token streams from the
simulator, in its own process, 20 ms to the first token and ``--itl-ms`` between
tokens: a pace one driver process keeps on a shared 2-core machine) goes once plain
and once under the dashboard, alternating, ``--rounds`` times. Both go through
``run_here``, the loop ``loadtest run`` uses; the dashboard is its own process, as in a
terminal, but headless (120x48, drawn and shown nowhere).

The figure is the client lag: how late the driver's loop got to bytes the kernel
already had, p50 and p99 over the run's requests (each request's worst read), and the
difference the dashboard makes to the p99. Beside it: output tokens/s, the CPU seconds
of the driver's process and of the dashboard's, and the states the dashboard drew. On
a shared machine the rounds differ by milliseconds: read the spread, not one round.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from loadtest.app.process.inprocess import run_here
from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import PromptPool, build_pool
from loadtest.engine.gc_policy import QuietGc
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.measure.hdr import fast_percentile
from loadtest.sim import SimConfig, SimProcess
from loadtest.tui import DashboardProcess


@dataclass(frozen=True, slots=True)
class Leg:
    """One run's figures."""

    lag_p50_ms: float
    lag_p99_ms: float
    tok_s: float
    driver_cpu_s: float
    dashboard_cpu_s: float
    states: int


def _scenario(seconds: float, streams: int) -> Scenario:
    return parse_scenario(
        {
            "name": "bench-tui",
            "max_tokens": 128,
            "sources": [{"kind": "inline", "prompts": [f"prompt {i}" for i in range(200)]}],
            "load": {"concurrency": streams, "duration_s": seconds, "warmup_s": 1, "grace_s": 30},
        },
        "bench-tui.toml",
    )


def _run(
    sc: Scenario, url: str, out: Path, pool: PromptPool, dashboard: bool
) -> tuple[RunOutcome, int]:
    """The run, plain or under a headless dashboard; its outcome and the states drawn."""

    async def prepare() -> Runner:
        return Runner(RunConfig(sc, url, "sim-llm", out), pool, hooks=[QuietGc()])

    if not dashboard:
        return run_here(prepare, False)[1], 0
    with DashboardProcess(headless=(120, 48)) as feed:
        outcome = run_here(prepare, False, feed)[1]
    return outcome, feed.states


def _cpu_s(who: int) -> float:
    use = resource.getrusage(who)
    return use.ru_utime + use.ru_stime


def _leg(sc: Scenario, url: str, out: Path, dashboard: bool) -> Leg:
    pool, _ = build_pool(sc)
    # The simulator is a child too, but still running: only the dashboard's process
    # ends (and is waited for) within the leg.
    mine, theirs = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN)
    outcome, states = _run(sc, url, out, pool, dashboard)
    h = outcome.metrics.total.hists["client_lag_ms"]
    return Leg(
        fast_percentile(h, 50) / 1e3,
        fast_percentile(h, 99) / 1e3,
        outcome.metrics.output_tokens / outcome.measured_s,
        _cpu_s(resource.RUSAGE_SELF) - mine,
        _cpu_s(resource.RUSAGE_CHILDREN) - theirs,
        states,
    )


def main() -> None:
    """Alternate plain and dashboard runs; print one table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--itl-ms", type=float, default=25.0, help="the simulator's token gap")
    args = ap.parse_args()
    sim = SimProcess(SimConfig(itl_ms=args.itl_ms))
    url = sim.start()
    sc = _scenario(args.seconds, args.streams)
    rounds: list[tuple[Leg, Leg]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                plain = _leg(sc, url, Path(tmp) / f"plain-{i}", False)
                dash = _leg(sc, url, Path(tmp) / f"dash-{i}", True)
                rounds.append((plain, dash))
    finally:
        sim.stop()
    print(
        f"{args.streams} streams, token gap {args.itl_ms:g} ms, {args.seconds:g} s per run; "
        "client lag p50/p99 in ms, CPU in s"
    )
    print(
        "| round | plain p50/p99 | dashboard p50/p99 | p99 difference | tok/s plain/dash "
        "| driver CPU plain/dash | dashboard CPU | states drawn |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for i, (p, d) in enumerate(rounds, 1):
        print(
            f"| {i} | {p.lag_p50_ms:.2f} / {p.lag_p99_ms:.2f} "
            f"| {d.lag_p50_ms:.2f} / {d.lag_p99_ms:.2f} | {d.lag_p99_ms - p.lag_p99_ms:+.2f} "
            f"| {p.tok_s:,.0f} / {d.tok_s:,.0f} | {p.driver_cpu_s:.2f} / {d.driver_cpu_s:.2f} "
            f"| {d.dashboard_cpu_s:.2f} | {d.states} |"
        )
    med = statistics.median
    diffs = [d.lag_p99_ms - p.lag_p99_ms for p, d in rounds]
    print(
        f"| median | {med(p.lag_p50_ms for p, _ in rounds):.2f} / "
        f"{med(p.lag_p99_ms for p, _ in rounds):.2f} "
        f"| {med(d.lag_p50_ms for _, d in rounds):.2f} / "
        f"{med(d.lag_p99_ms for _, d in rounds):.2f} "
        f"| {med(diffs):+.2f} (range {min(diffs):+.2f} .. {max(diffs):+.2f}) | | | | |"
    )


if __name__ == "__main__":
    main()
