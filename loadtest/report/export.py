"""loadtest's own output files: summary.json, summary.csv, one .hgrm per metric.

Each is an output plugin (``report.outputs``), registered in pyproject.toml's
``loadtest.outputs`` group as a third party's would be; ``write_results`` writes every
registered output, these and any installed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from loadtest.measure.hdr import PERCENTILES
from loadtest.measure.recorders import Metrics
from loadtest.model.io import dump_summary
from loadtest.model.summary import Summary
from loadtest.report.hgrm import hgrm
from loadtest.report.outputs import RunResults, write_outputs

__all__ = ["CSV", "HGRM", "SUMMARY", "hgrm", "write_results"]

_CSV_STATS = ("count", "min", "mean", *(k for k, _ in PERCENTILES), "max")


def _cell(stats: Mapping[str, object], key: str) -> object:
    return stats.get(key, "")


@dataclass(frozen=True, slots=True)
class _Hgrm:
    """One HdrHistogram percentile table per metric that recorded a value."""

    name: str = "*.hgrm"
    made_from: frozenset[str] = frozenset({"metrics"})

    def render(self, results: RunResults) -> Iterator[tuple[str, bytes]]:
        for name, hist in results.metrics.total.hists.items():
            if hist.get_total_count() == 0:
                continue
            # Recorded in µs; a ratio of 1000 prints milliseconds (tokens_per_chunk: x1000).
            yield f"{name}.hgrm", hgrm(hist, 1000.0)


@dataclass(frozen=True, slots=True)
class _Csv:
    """Every metric's statistics, the run's and each category's, a row each."""

    name: str = "summary.csv"
    made_from: frozenset[str] = frozenset({"summary"})

    def render(self, results: RunResults) -> Iterator[tuple[str, str]]:
        summary = results.summary
        text = io.StringIO(newline="")
        w = csv.writer(text)
        w.writerow(["category", "metric", *_CSV_STATS])
        rows = [("all", summary["metrics"])]
        rows += [(cat, block["metrics"]) for cat, block in summary["by_category"].items()]
        for cat, block in rows:
            for metric, stats in block.items():
                w.writerow([cat, metric, *(_cell(stats, k) for k in _CSV_STATS)])
        yield self.name, text.getvalue()


@dataclass(frozen=True, slots=True)
class _Summary:
    """The typed summary (``model.summary.Summary``), written last (``outputs.COMPLETE``)."""

    name: str = "summary.json"
    made_from: frozenset[str] = frozenset({"summary"})

    def render(self, results: RunResults) -> Iterator[tuple[str, bytes]]:
        yield self.name, dump_summary(results.summary)


HGRM = _Hgrm()
CSV = _Csv()
SUMMARY = _Summary()


def write_results(
    run_dir: Path,
    summary: Summary,
    metrics: Metrics,
    blocks: Mapping[str, object] | None = None,
) -> list[Path]:
    """Write the end-of-run files beside ``requests.jsonl`` and ``histograms.hlog``:
    every registered output (``outputs.write_outputs``), each atomically, and
    summary.json last: its presence means the run's files are complete. ``blocks``: the
    run's merged summary blocks (``engine.blocks``; the files of their own among them)."""
    return write_outputs(run_dir, summary, metrics, blocks=blocks)
