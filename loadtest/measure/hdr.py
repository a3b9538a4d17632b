"""HdrHistogram primitives: the histogram loadtest uses, and numpy paths around hdrh.

hdrh is pure Python: every recorded value is a Python call, and reading a percentile
walks 23,552 counts (docs/benchmarks.md). Here the same arithmetic runs on whole arrays,
with results identical to hdrh's own (tested), so recording and reading stay cheap beside
the load. The parts that touch hdrh's private layout live in
``loadtest._compat.hdr_internals``, which checks itself once; where that check fails,
every function here takes hdrh's own (slower) path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest._compat import hdr_internals as _hi
from loadtest._compat.checks import warn_once
from loadtest.model.summary import MetricStats

__all__ = [
    "PERCENTILES",
    "add_into",
    "bucket_arrays",
    "fast_percentile",
    "fits",
    "metric_stats",
    "new_histogram",
    "percentile",
    "record_array",
    "record_corrected_many",
    "record_many",
    "target_rank",
]

_LOWEST, _HIGHEST, _DIGITS = 1, 3_600_000_000, 3


def new_histogram() -> HdrHistogram:
    """A histogram of microseconds from 1 µs to 1 h at 3 significant digits."""
    return HdrHistogram(_LOWEST, _HIGHEST, _DIGITS)


def _fast() -> bool:
    check = _hi.self_check()
    if not check.ok:
        warn_once(check)
    return check.ok


def bucket_arrays(hist: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lowest value, highest equivalent value, count) of every non-empty bucket, in µs.

    hdrh walks its counts in pure Python (a percentile or an iteration costs tens of ms
    on a full histogram); reading the counts array with numpy costs well under 1 ms, so
    drawing stays cheap beside the load. The arithmetic is hdrh's ``get_value_from_index``.
    """
    if _fast():
        return _hi.bucket_arrays(hist)
    rows = [
        (
            hist.get_lowest_equivalent_value(v.value_iterated_to),
            hist.get_highest_equivalent_value(v.value_iterated_to),
            v.count_at_value_iterated_to,
        )
        for v in hist.get_recorded_iterator()
    ]
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return table[:, 0], table[:, 1], table[:, 2]


def fast_percentile(hist: HdrHistogram, q: float) -> int:
    """``hist.get_value_at_percentile(q)`` (same value) without hdrh's Python walk.

    hdrh walks its counts array in Python, which costs milliseconds on a full histogram;
    a stall like that once a second in the event loop shows up in the latency it
    measures. Returns 0 for an empty histogram.
    """
    if not _fast() or q <= 0:
        return int(hist.get_value_at_percentile(q)) if hist.get_total_count() else 0
    _, highest, counts = bucket_arrays(hist)
    if not len(counts):
        return 0
    cum = np.cumsum(counts)
    at = target_rank(q, int(cum[-1]))
    return int(highest[min(int(np.searchsorted(cum, at)), len(highest) - 1)])


def target_rank(q: float, n: int) -> int:
    """The 1-based rank of the ``q``-th percentile among ``n`` values: loadtest's one
    definition of a percentile, for histograms and for lists of values alike.

    hdrh's ``get_target_count_at_percentile``, operation for operation: another order of
    the same arithmetic rounds differently where the count lands on a half.
    """
    return max(1, int((min(q, 100.0) * n / 100) + 0.5))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``, by the rank a histogram uses.

    For the few values a fault window or a conversation turn has, exact; the same value
    an HDR histogram of them reports, up to its 3 significant digits. None when empty.
    """
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered), target_rank(q, len(ordered))) - 1])


_BATCH_MIN = 48
_MAX_EXPANSION = 100_000
"""A corrected value that stands for more missed samples than this is recorded by hdrh
itself, one by one, rather than expanded into an array."""


def fits(hist: HdrHistogram, v: np.ndarray) -> np.ndarray:
    """Which integer values ``hist.record_value`` would accept (0 <= v, within range)."""
    if _fast():
        return _hi.fitting(hist, v)[0]
    top = hist.get_highest_equivalent_value(hist.highest_trackable_value)
    ok: np.ndarray = (v >= 0) & (v <= top)
    return ok


def _add_counts(hist: HdrHistogram, v: np.ndarray) -> None:
    """Record values already known to fit (fast path only)."""
    _hi.add_at(hist, _hi.indices(hist, v), v)


def record_array(hist: HdrHistogram, values: np.ndarray) -> np.ndarray:
    """Record an int64 array; returns which values fitted (the others are skipped)."""
    # The indices are computed once, for the check and the counting both: this runs
    # for every metric at every roll, inside the event loop.
    if not _fast():
        ok = fits(hist, values)
        for value in values[ok].tolist():
            hist.record_value(value)
        return ok
    ok, idx = _hi.fitting(hist, values)
    if ok.all():
        _hi.add_at(hist, idx, values)
    else:
        _hi.add_at(hist, idx[ok], values[ok])
    return ok


def add_into(dst: HdrHistogram, src: HdrHistogram) -> None:
    """``dst.add(src)``, with numpy where both have the same layout (same result).

    hdrh adds the counts arrays in C, yet numpy adds a pair several times faster, and a
    roll merges some thirty pairs inside the event loop (docs/benchmarks.md).
    """
    same = _fast() and (
        dst.counts_len == src.counts_len
        and dst.unit_magnitude == src.unit_magnitude
        and dst.sub_bucket_count == src.sub_bucket_count
        and dst.word_size == src.word_size == 8
    )
    if not same:
        dst.add(src)
        return
    if src.get_total_count():
        view = _hi.counts_view(dst)
        np.add(view, _hi.counts_view(src), out=view)
        dst.total_count += src.get_total_count()
        dst.max_value = max(dst.max_value, src.get_max_value())
        dst.min_value = min(dst.get_min_value(), src.get_min_value())
    dst.start_time_stamp_msec = min(dst.start_time_stamp_msec, src.start_time_stamp_msec)
    dst.end_time_stamp_msec = max(dst.end_time_stamp_msec, src.end_time_stamp_msec)


def record_many(hist: HdrHistogram, values: Sequence[int] | np.ndarray) -> int:
    """Record many integer values; returns how many were out of range (not recorded).

    ``record_value`` is pure Python, which for a 1,000-token response holds the event
    loop for a millisecond or more in one block (docs/benchmarks.md). For long batches
    the counts-array indices are computed with numpy (the same arithmetic as ``hdrh``'s
    ``_counts_index_for``) and added per distinct bucket; the result is identical to
    recording one by one.
    """
    if len(values) < _BATCH_MIN:
        rec = hist.record_value
        return sum(1 for v in values if rec(int(v)) is False)
    ok = record_array(hist, np.asarray(values, dtype=np.int64))
    return int(ok.size - np.count_nonzero(ok))


def record_corrected_many(
    hist: HdrHistogram, values: np.ndarray, expected: np.ndarray
) -> np.ndarray:
    """``record_corrected_value(v, e)`` for each pair; returns which values were recorded.

    hdrh's correction records v, v - e, v - 2e, ... down to the first value <= e
    (``max(1, ceil(v / e))`` values in all) and records nothing when v itself is out
    of range; the same values are built here with numpy.
    """
    v = np.asarray(values, dtype=np.int64)
    e = np.asarray(expected, dtype=np.int64)
    ok = fits(hist, v)
    if not _fast():
        for value, interval in zip(v[ok].tolist(), e[ok].tolist(), strict=True):
            hist.record_corrected_value(value, interval)
        return ok
    v, e = v[ok], e[ok]
    reps = np.where((e > 0) & (v > e), -(-v // np.maximum(e, 1)), 1)
    huge = reps > _MAX_EXPANSION
    for value, interval in zip(v[huge].tolist(), e[huge].tolist(), strict=True):
        hist.record_corrected_value(value, interval)
    v, e, reps = v[~huge], e[~huge], reps[~huge]
    starts = np.cumsum(reps) - reps
    step = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(starts, reps)
    _add_counts(hist, np.repeat(v, reps) - np.repeat(e, reps) * step)
    return ok


PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))


def metric_stats(hist: HdrHistogram, total_us: float, scale: float = 1e3) -> MetricStats:
    """count/min/mean/p50/p90/p95/p99/p999/max of one histogram, in ms (``scale`` µs)."""
    n = hist.get_total_count()
    if n == 0:
        return {"count": 0}
    # fast_percentile is hdrh's value without its walk over every count (milliseconds
    # each; docs/benchmarks.md).
    p = {key: round(fast_percentile(hist, q) / scale, 3) for key, q in PERCENTILES}
    return {
        "count": n,
        "min": round(hist.get_min_value() / scale, 3),
        # The running sum is exact; HdrHistogram's own mean is slow and bucketed.
        "mean": round(total_us / n / scale, 3),
        "p50": p["p50"],
        "p90": p["p90"],
        "p95": p["p95"],
        "p99": p["p99"],
        "p999": p["p999"],
        "max": round(hist.get_max_value() / scale, 3),
    }
