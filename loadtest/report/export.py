"""Files of a finished run: summary.json, one .hgrm per metric, summary.csv."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import orjson

from loadtest.metrics import Metrics
from loadtest.report.summary import PERCENTILES

__all__ = ["write_results"]

_CSV_STATS = ("count", "min", "mean", *(k for k, _ in PERCENTILES), "max")


def write_results(run_dir: Path, summary: dict[str, Any], metrics: Metrics) -> list[Path]:
    """Write the end-of-run files beside ``requests.jsonl`` and ``histograms.hlog``."""
    written = []
    path = run_dir / "summary.json"
    path.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    written.append(path)
    for name, hist in metrics.total.hists.items():
        if hist.get_total_count() == 0:
            continue
        hgrm = run_dir / f"{name}.hgrm"
        with open(hgrm, "wb") as f:
            # Recorded in µs; a ratio of 1000 prints milliseconds (tokens_per_chunk: x1000).
            hist.output_percentile_distribution(f, 1000.0)
        written.append(hgrm)
    csv_path = run_dir / "summary.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["category", "metric", *_CSV_STATS])
        rows = [("all", summary["metrics"])]
        rows += [(cat, block["metrics"]) for cat, block in summary["by_category"].items()]
        for cat, block in rows:
            for metric, stats in block.items():
                w.writerow([cat, metric, *(stats.get(k, "") for k in _CSV_STATS)])
    written.append(csv_path)
    return written
