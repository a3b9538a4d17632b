"""Start-up cost of the command line (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_startup                  # --help x10, then 3 one-request runs
    python -m benchmarks.bench_startup --help-runs 20 --runs 1 --scenario code

Two figures: the wall time of ``loadtest --help`` (what every mistyped command costs),
and where the time of ``loadtest run --requests 1`` against the built-in deployment
goes. The run is timed from outside: each line of its ``-v`` output is stamped as it
arrives (the ``phase: ...`` lines mark the orchestrator's steps), the first request's
send time comes from requests.jsonl (relative to the load's start), and the data set
and readiness times from summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def time_help(runs: int) -> list[float]:
    """Wall seconds of ``python -m loadtest --help``, one per run."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "loadtest", "--help"], check=True, capture_output=True
        )
        out.append(time.perf_counter() - t0)
    return out


@dataclass(frozen=True, slots=True)
class RunTimes:
    """Seconds from the command's start, per phase, of one ``loadtest run``."""

    marks: tuple[tuple[str, float], ...]
    """(phase, seconds since the start) in the order they were printed."""
    first_sent_s: float | None
    """The first request (warm-up or not) left the client."""
    first_measured_sent_s: float | None
    total_s: float
    prompt_load_s: float | None
    target_ready_s: float | None
    duration_s: float | None
    summary: dict[str, object]
    """The run's summary.json."""


def time_run(
    scenario: str | None,
    out: Path,
    endpoint: str | None = None,
    requests: int = 1,
    extra: Sequence[str] = (),
    cpus: set[int] | None = None,
    tree: str | None = None,
) -> RunTimes:
    """One ``loadtest run --requests N`` (against the built-in deployment without
    ``endpoint``; on the cores ``cpus`` where given; the loadtest of checkout ``tree``
    where given, for A/B runs of two commits), stamped."""
    cmd = [sys.executable, "-m", "loadtest", "run", "--requests", str(requests), "--no-tui"]
    cmd += ["-v", "--out", str(out)] + ([scenario] if scenario else [])
    cmd += (["--endpoint", endpoint] if endpoint else []) + list(extra)
    marks: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        env=dict(os.environ, PYTHONPATH=tree) if tree else None,
        cwd=tree,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if line.startswith("phase: "):
            marks.append((line.removeprefix("phase: ").strip(), now))
        elif line.startswith(("no --endpoint", "draft server")):
            marks.append((line.split(":", 1)[0].strip(), now))
    proc.wait()
    total = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"the run failed ({proc.returncode}): {' '.join(cmd)}")
    run_dir = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    summary = json.loads((run_dir / "summary.json").read_text())
    run = summary["run"]
    sent = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    starts = [t for name, t in marks if name == "load starts"]
    start = starts[0] if starts else None

    def first(rows: list[dict[str, object]]) -> float | None:
        times = [float(str(r["sent_ms"])) for r in rows if r.get("sent_ms") is not None]
        return None if start is None or not times else start + min(times) / 1000

    return RunTimes(
        marks=tuple(marks),
        first_sent_s=first(sent),
        first_measured_sent_s=first([r for r in sent if not r.get("warmup")]),
        total_s=total,
        prompt_load_s=run.get("prompt_load_s"),
        target_ready_s=run.get("target_time_to_ready_s"),
        duration_s=run.get("duration_s"),
        summary=summary,
    )


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:6.3f}"


def report(t: RunTimes) -> None:
    """The phases of one run, in seconds since the command started."""
    for name, at in t.marks:
        print(f"  {at:6.3f}  {name}")
    print(f"  {_fmt(t.first_sent_s)}  first request sent (requests.jsonl sent_ms)")
    print(f"  {_fmt(t.first_measured_sent_s)}  first measured request sent")
    print(f"  {t.total_s:6.3f}  process exit")
    print(
        f"  summary.json: prompt_load_s {_fmt(t.prompt_load_s)}  target_time_to_ready_s "
        f"{_fmt(t.target_ready_s)}  duration_s {_fmt(t.duration_s)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--help-runs", type=int, default=10, help="loadtest --help runs")
    ap.add_argument("--runs", type=int, default=3, help="one-request runs")
    ap.add_argument("--scenario", help="scenario name or TOML (default: mixed)")
    ap.add_argument("--endpoint", help="run against this endpoint, not the built-in deployment")
    ap.add_argument("--tree", help="run the loadtest of this checkout (A/B of two commits)")
    args = ap.parse_args()
    if args.help_runs:
        h = time_help(args.help_runs)
        print(
            f"loadtest --help: median {statistics.median(h):.3f} s, min {min(h):.3f} s, "
            f"max {max(h):.3f} s over {len(h)} runs"
        )
    with tempfile.TemporaryDirectory() as tmp:
        firsts = []
        for i in range(args.runs):
            t = time_run(args.scenario, Path(tmp) / f"run{i}", args.endpoint, tree=args.tree)
            print(f"run {i + 1}: loadtest run --requests 1 {args.scenario or ''}")
            report(t)
            if t.first_sent_s is not None:
                firsts.append(t.first_sent_s)
        if firsts:
            print(f"first request sent: median {statistics.median(firsts):.3f} s")


if __name__ == "__main__":
    main()
