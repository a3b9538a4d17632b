"""hdrh's counts layout, read and written with numpy: the private half of ``measure.hdr``.

hdrh is pure Python: every recorded value is a Python call, and reading a percentile
walks 23,552 counts in a Python loop (docs/benchmarks.md). The same arithmetic on whole
arrays (hdrh's ``_counts_index_for`` and ``get_value_from_index``) costs microseconds,
but it leans on hdrh's private fields: the ctypes ``counts`` array, ``counts_len``, the
bucket magnitudes, ``total_count``, ``min_value`` and ``max_value``. ``self_check``
records the same values both ways into two small histograms and compares every count,
the totals and some percentiles; where anything differs (a changed hdrh),
``measure.hdr`` uses hdrh's own methods instead and a warning says so.
"""

from __future__ import annotations

import functools

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest._compat.checks import CompatCheck

__all__ = ["add_at", "bucket_arrays", "counts_view", "fitting", "indices", "self_check"]

_PARTS = (
    "counts",
    "counts_len",
    "sub_bucket_half_count_magnitude",
    "sub_bucket_half_count",
    "sub_bucket_mask",
    "sub_bucket_count",
    "unit_magnitude",
    "word_size",
    "total_count",
    "min_value",
    "max_value",
)


def counts_view(hist: HdrHistogram) -> np.ndarray:
    """hdrh's counts array itself (not a copy), as numpy."""
    return np.ctypeslib.as_array(hist.counts)


def bucket_arrays(hist: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lowest value, highest equivalent value, count) of every non-empty bucket."""
    counts = counts_view(hist)[: hist.counts_len]
    idx = np.flatnonzero(counts)
    half_mag = hist.sub_bucket_half_count_magnitude
    half = hist.sub_bucket_half_count
    bucket = (idx >> half_mag) - 1
    sub = (idx & (half - 1)) + half
    low_bucket = bucket < 0
    sub = np.where(low_bucket, sub - half, sub)
    bucket = np.where(low_bucket, 0, bucket)
    shift = bucket + hist.unit_magnitude
    lowest = sub.astype(np.int64) << shift
    highest = lowest + (np.int64(1) << shift) - 1
    return lowest, highest, counts[idx].astype(np.int64)


def indices(hist: HdrHistogram, v: np.ndarray) -> np.ndarray:
    """Counts-array index of each non-negative value: hdrh's ``_counts_index_for``."""
    _, exp = np.frexp((v | hist.sub_bucket_mask).astype(np.float64))
    bucket = exp.astype(np.int64) - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub = v >> (bucket + hist.unit_magnitude)
    idx: np.ndarray = (
        ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + sub - hist.sub_bucket_half_count
    )
    return idx


def fitting(hist: HdrHistogram, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which values ``record_value`` would accept, and every value's counts index."""
    ok = v >= 0
    idx = indices(hist, np.where(ok, v, 0))
    ok &= idx < hist.counts_len
    return ok, idx


def add_at(hist: HdrHistogram, idx: np.ndarray, v: np.ndarray) -> None:
    """Count values ``v`` (all fitting) at their counts-array indices ``idx``."""
    if v.size == 0:
        return
    np.add.at(counts_view(hist), idx, 1)
    hist.total_count += int(v.size)
    hist.min_value = min(hist.min_value, int(v.min()))
    hist.max_value = max(hist.max_value, int(v.max()))


@functools.cache
def self_check() -> CompatCheck:
    """Record the same values through hdrh and through numpy; every count must agree."""
    name = "hdr_internals"
    probe = HdrHistogram(1, 3_600_000_000, 3)
    missing = [a for a in _PARTS if not hasattr(probe, a)]
    if missing:
        return CompatCheck(name, False, "HdrHistogram lacks " + ", ".join(missing))
    values = np.array(
        [0, 1, 2, 7, 1023, 2047, 2048, 2049, 99_999, 12_345_678, 3_599_999_999, -1, 1 << 40],
        dtype=np.int64,
    )
    want = HdrHistogram(1, 3_600_000_000, 3)
    accepted = [want.record_value(int(x)) is not False for x in values]
    got = HdrHistogram(1, 3_600_000_000, 3)
    try:
        ok, idx = fitting(got, values)
        add_at(got, idx[ok], values[ok])
        same = (
            ok.tolist() == accepted
            and np.array_equal(counts_view(got), counts_view(want))
            and got.get_total_count() == want.get_total_count()
            and got.get_min_value() == want.get_min_value()
            and got.get_max_value() == want.get_max_value()
        )
        lowest, highest, counts = bucket_arrays(want)
        # hdrh's own view of each recorded value's bucket, asked value by value: its
        # recorded iterator would say the same but walks all 23,552 counts in Python
        # (a visible cost, paid by every process that starts; docs/benchmarks.md).
        walked = sorted(
            {
                (want.get_lowest_equivalent_value(v), want.get_count_at_value(v))
                for v, fits in zip(values.tolist(), accepted, strict=True)
                if fits
            }
        )
        same = same and list(zip(lowest.tolist(), counts.tolist(), strict=True)) == walked
        same = same and all(
            int(h) == want.get_highest_equivalent_value(int(lo))
            for lo, h in zip(lowest, highest, strict=True)
        )
    except (AttributeError, TypeError, ValueError) as exc:
        return CompatCheck(name, False, f"numpy paths failed: {exc!r}")
    if not same:
        return CompatCheck(name, False, "numpy paths disagree with hdrh's own")
    return CompatCheck(name, True, "hdrh counts layout (numpy record, merge, buckets)")
