"""Files of a finished run: summary.json, one .hgrm per metric, summary.csv."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path

from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import bucket_arrays
from loadtest.measure.recorders import Metrics
from loadtest.model.io import dump_summary
from loadtest.model.summary import Summary
from loadtest.report.atomic import write_atomic
from loadtest.report.summary import PERCENTILES

__all__ = ["hgrm", "write_results"]

_CSV_STATS = ("count", "min", "mean", *(k for k, _ in PERCENTILES), "max")


def _cell(stats: Mapping[str, object], key: str) -> object:
    return stats.get(key, "")


def hgrm(hist: HdrHistogram, ratio: float = 1000.0) -> bytes:
    """HdrHistogram's percentile table (``.hgrm``) of ``hist``, values divided by ``ratio``.

    The bytes of hdrh's ``output_percentile_distribution`` (5 ticks per half distance),
    but for the footer's standard deviation: hdrh writes it unscaled (µs beside a mean in
    ms), here both are in the same unit. hdrh walks every counts slot in Python three
    times (the table, the mean, the deviation: ~0.2 s a file, ~2 s of CPU a run); this
    walks only the non-empty buckets, with hdrh's arithmetic in the same order.
    """
    lows, highs, counts = (a.tolist() for a in bucket_arrays(hist))
    total = hist.get_total_count()
    digits = hist.significant_figures
    row = f"%12.{digits}f %2.12f %10d %14.2f\n".encode()
    last_row = f"%12.{digits}f %2.12f %10d\n".encode()
    out = [
        b"%12s %14s %10s %14s\n\n" % (b"Value", b"Percentile", b"TotalCount", b"1/(1-Percentile)")
    ]
    level = 0.0  # hdrh's PercentileIterator: the next percentile level to report
    seen = 0
    for i, (high, count) in enumerate(zip(highs, counts, strict=True)):
        seen += count
        while (100.0 * seen) / total >= level:
            if level != 100:
                out.append(row % (high / ratio, level / 100, seen, 1 / (1 - level / 100)))
            else:  # a level rounded up to 100%: hdrh writes it without the last column
                out.append(last_row % (high / ratio, 1.0, seen))
            gap = 100.0 - level
            if gap:
                half_distance = math.pow(2, (math.log(100 / gap) / math.log(2)) + 1)
                level += 100.0 / (5 * half_distance)
            if seen == total and i == len(highs) - 1:
                break  # hdrh's one more step, to 100%, comes next
    if counts:
        out.append(last_row % (highs[-1] / ratio, 1.0, total))
    # hdrh's mean and deviation: each bucket's values at its middle value.
    mids = [low + ((high - low + 1) >> 1) for low, high in zip(lows, highs, strict=True)]
    mean = float(sum(c * m for c, m in zip(counts, mids, strict=True))) / total if total else 0.0
    dev_total = 0.0
    for c, m in zip(counts, mids, strict=True):
        dev = (m * 1.0) - mean
        dev_total += (dev * dev) * c
    stddev = math.sqrt(dev_total / total) if total else 0.0
    out.append(
        f"#[Mean    = %12.{digits}f, StdDeviation   = %12.{digits}f]\n".encode()
        % (mean / ratio, stddev / ratio)
    )
    out.append(
        f"#[Max     = %12.{digits}f, TotalCount     = %12.{digits}f]\n".encode()
        % (hist.get_max_value() / ratio, total)
    )
    out.append(
        b"#[Buckets = %12d, SubBuckets     = %12d]\n" % (hist.bucket_count, hist.sub_bucket_count)
    )
    return b"".join(out)


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
