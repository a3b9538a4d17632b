"""Files of a finished run: summary.json, one .hgrm per metric, summary.csv."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

from loadtest.measure.hdr import PERCENTILES
from loadtest.measure.recorders import Metrics
from loadtest.model.atomic import write_atomic
from loadtest.model.io import dump_summary
from loadtest.model.summary import Summary
from loadtest.report.hgrm import hgrm

__all__ = ["hgrm", "write_results"]

_CSV_STATS = ("count", "min", "mean", *(k for k, _ in PERCENTILES), "max")


def _cell(stats: Mapping[str, object], key: str) -> object:
    return stats.get(key, "")


def write_results(run_dir: Path, summary: Summary, metrics: Metrics) -> list[Path]:
    """Write the end-of-run files beside ``requests.jsonl`` and ``histograms.hlog``.

    Each is written atomically, and summary.json last: its presence means the run's
    files are complete.
    """
    written = []
    for name, hist in metrics.total.hists.items():
        if hist.get_total_count() == 0:
            continue
        # Recorded in µs; a ratio of 1000 prints milliseconds (tokens_per_chunk: x1000).
        written.append(write_atomic(run_dir / f"{name}.hgrm", hgrm(hist, 1000.0)))
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(["category", "metric", *_CSV_STATS])
    rows = [("all", summary["metrics"])]
    rows += [(cat, block["metrics"]) for cat, block in summary["by_category"].items()]
    for cat, block in rows:
        for metric, stats in block.items():
            w.writerow([cat, metric, *(_cell(stats, k) for k in _CSV_STATS)])
    written.append(write_atomic(run_dir / "summary.csv", text.getvalue()))
    written.append(write_atomic(run_dir / "summary.json", dump_summary(summary)))
    return written
