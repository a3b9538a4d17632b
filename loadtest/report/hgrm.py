"""HdrHistogram's percentile table (``.hgrm``), written from the counts with one pass.

hdrh's ``output_percentile_distribution`` walks every one of the 23,552 counts in pure
Python, and its footer walks them twice more for the mean and the standard deviation:
seconds for a run's files (docs/benchmarks.md). Here the non-empty buckets come from
``measure.hdr.bucket_arrays`` (numpy) and the table follows hdrh's percentile iterator
step for step over those buckets only, so the bytes are hdrh's own (tested against it),
except the footer's standard deviation, which hdrh leaves unscaled (µs beside a mean in
ms): here both are in the table's unit.
"""

from __future__ import annotations

import math

from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import bucket_arrays

__all__ = ["hgrm"]

_TICKS_PER_HALF_DISTANCE = 5
"""hdrh's default, and HdrHistogram's: five lines per halving of the distance to 100%."""


def _next_level(level: float) -> float:
    # hdrh's PercentileIterator.increment_iteration_level, operation for operation, so
    # that every level (a float) is the very same number it prints.
    gap = 100.0 - level
    if not gap:
        return level
    half_distance = math.pow(2, (math.log(100 / gap) / math.log(2)) + 1)
    return level + 100.0 / (_TICKS_PER_HALF_DISTANCE * half_distance)


def _lines(hist: HdrHistogram) -> list[tuple[int, float, int]]:
    """(value, percentile level, count up to it) of every line, as hdrh iterates them."""
    _, highest, counts = bucket_arrays(hist)
    total = int(counts.sum())
    out: list[tuple[int, float, int]] = []
    level: float = 0.0
    cum = 0
    for value, count in zip(highest.tolist(), counts.tolist(), strict=True):
        cum += count
        # A bucket gives a line for every level its cumulative share has reached; the
        # last one gives one more, at exactly 100%.
        while (100.0 * cum) / total >= level:
            out.append((value, level, cum))
            level = _next_level(level)
            if cum == total:
                out.append((value, 100.0, cum))
                return out
    return out


def _mean_and_stddev(hist: HdrHistogram) -> tuple[float, float]:
    """hdrh's ``get_mean_value`` and ``get_stddev``: each bucket at its median value."""
    lowest, highest, counts = bucket_arrays(hist)
    total = int(counts.sum())
    if not total:
        return 0.0, 0.0
    rows = list(zip(lowest.tolist(), highest.tolist(), counts.tolist(), strict=True))
    medians = [lo + ((hi - lo + 1) >> 1) for lo, hi, _ in rows]
    mean = float(sum(m * c for m, (_, _, c) in zip(medians, rows, strict=True))) / total
    dev_total = 0.0
    for m, (_, _, c) in zip(medians, rows, strict=True):
        dev = (m * 1.0) - mean
        dev_total += (dev * dev) * c
    return mean, math.sqrt(dev_total / total)


def hgrm(hist: HdrHistogram, ratio: float = 1000.0) -> bytes:
    """The ``.hgrm`` table of ``hist`` with values divided by ``ratio`` (µs -> ms: 1000)."""
    digits = hist.significant_figures
    row = f"%12.{digits}f %2.12f %10d %14.2f\n"
    last_row = f"%12.{digits}f %2.12f %10d\n"
    parts = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}\n\n"]
    for value, level, cum in _lines(hist):
        if level != 100:
            parts.append(row % (value / ratio, level / 100, cum, 1 / (1 - level / 100)))
        else:
            parts.append(last_row % (value / ratio, level / 100, cum))
    mean, stddev = _mean_and_stddev(hist)
    parts.append(
        f"#[Mean    = %12.{digits}f, StdDeviation   = %12.{digits}f]\n"
        % (mean / ratio, stddev / ratio)
    )
    parts.append(
        f"#[Max     = %12.{digits}f, TotalCount     = %12.{digits}f]\n"
        % (hist.get_max_value() / ratio, hist.get_total_count())
    )
    parts.append(
        f"#[Buckets = {hist.bucket_count:12d}, SubBuckets     = {hist.sub_bucket_count:12d}]\n"
    )
    return "".join(parts).encode("ascii")
