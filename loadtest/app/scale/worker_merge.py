"""Merging a run's workers: their files into the run's, and each one's own figures.

``requests.jsonl`` and ``tasks.jsonl`` are concatenated in worker order with a ``worker``
field on every line; the ``.hlog`` intervals are added interval by interval. The
histograms themselves merge in ``loadtest.measure.merge``; the summary blocks (and the
files that are blocks of their own, ``multiturn.json`` and ``workload.json``) from the
parts each worker hands back in its result (``engine.blocks``).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from loadtest.app.scale.worker_main import WorkerResult
from loadtest.config.scenario import Scenario
from loadtest.measure.recorders import MetricSet, fast_percentile
from loadtest.model.summary import WorkerLag

__all__ = ["merge_files", "worker_lag"]


def worker_lag(worker: int, result: WorkerResult, scenario: Scenario) -> WorkerLag:
    """One worker's own dispatch lag p50/p99, from its encoded metrics."""
    from loadtest.measure.merge import merge_metrics

    own = merge_metrics([result.metrics], closed_loop=scenario.load.mode == "closed", t0_ns=0)
    hist = own.total.hists["dispatch_lag_ms"]
    return {
        "worker": worker,
        "dispatch_lag_ms": {
            "p50": round(fast_percentile(hist, 50) / 1e3, 3),
            "p99": round(fast_percentile(hist, 99) / 1e3, 3),
        },
    }


def _merge_tasks(dirs: list[Path], run_dir: Path) -> None:
    """The workers' ``tasks.jsonl`` as one, each line tagged with its worker."""
    if not any((d / "tasks.jsonl").exists() for d in dirs):
        return
    with open(run_dir / "tasks.jsonl", "wb") as out:
        for i, d in enumerate(dirs):
            if (d / "tasks.jsonl").exists():
                _tagged(d / "tasks.jsonl", i, out)


def _tagged(path: Path, worker: int, out: BinaryIO) -> None:
    """The whole lines of a JSONL file into ``out``, each with ``"worker": worker`` added,
    a line at a time (a worker's requests.jsonl is not held in memory whole)."""
    suffix = b',"worker":' + str(worker).encode() + b"}"
    with open(path, "rb") as f:
        for raw in f:
            line = raw.rstrip(b"\n")
            if line.endswith(b"}"):  # a torn last line is left out, as every reader does
                out.write(line[:-1] + suffix + b"\n")


def merge_files(dirs: list[Path], run_dir: Path, started_wall: float) -> None:
    """requests.jsonl (lines tagged with their worker) and histograms.hlog (by interval)."""
    from loadtest.report.hlog import HlogWriter, read_intervals

    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "requests.jsonl", "wb") as out:
        for i, d in enumerate(dirs):
            _tagged(d / "requests.jsonl", i, out)
    _merge_tasks(dirs, run_dir)
    per_worker = [read_intervals(d / "histograms.hlog") for d in dirs]
    n = max((len(v) for w in per_worker for v in w.values()), default=0)
    writer = HlogWriter(run_dir / "histograms.hlog", started_wall)
    for k in range(n):
        ms = MetricSet()
        start, length = 0.0, 1.0
        for w in per_worker:
            for tag, items in w.items():
                if k < len(items) and tag in ms.hists:
                    start, length, h = items[k]
                    ms.hists[tag].add(h)
        writer.write_interval(ms, start, length)
    writer.close()
