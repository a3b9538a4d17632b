"""The live outputs' pure parts: the last seconds' histograms, and the series' names."""

from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.live.families import BUCKETS_S, series_name
from loadtest.live.view import sparse_percentile, window_counts
from loadtest.measure.hdr import bucket_arrays, fast_percentile, new_histogram, record_many

values = st.lists(st.integers(min_value=1, max_value=50_000_000), min_size=0, max_size=300)


def _histogram(vs: list[int]) -> HdrHistogram:
    h = new_histogram()
    record_many(h, np.asarray(vs, dtype=np.int64))
    return h


def _sparse(vs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    _, highest, counts = bucket_arrays(_histogram(vs))
    return highest, counts


@settings(max_examples=60, deadline=None)
@given(before=values, after=values, q=st.sampled_from([50.0, 90.0, 95.0, 99.0, 99.9]))
def test_the_window_is_the_histogram_of_the_values_recorded_in_it(
    before: list[int], after: list[int], q: float
) -> None:
    """Cumulative now minus cumulative then is the histogram of what came between, and
    its percentile is what an HDR histogram of those values alone says."""
    window = window_counts(_sparse(before + after), _sparse(before))
    alone = _histogram(after)
    assert int(np.sum(window[1])) == len(after)
    expected = fast_percentile(alone, q) if after else None
    assert sparse_percentile(window, q) == expected


def test_a_window_with_nothing_before_is_everything_so_far() -> None:
    now = _sparse([5, 7, 1000])
    assert window_counts(now, None) is now
    assert sparse_percentile(window_counts(now, _sparse([])), 50) == fast_percentile(
        _histogram([5, 7, 1000]), 50
    )


def test_series_names_follow_prometheus_base_units() -> None:
    assert series_name("ttft_ms") == "loadtest_ttft_seconds"
    assert series_name("e2e_ms_corrected") == "loadtest_e2e_corrected_seconds"
    assert series_name("client_lag_ms") == "loadtest_client_lag_seconds"


def test_buckets_are_log_spaced_from_one_millisecond() -> None:
    assert BUCKETS_S[0] == 0.001 and BUCKETS_S[-1] > 250
    ratios = np.diff(np.log2(BUCKETS_S))
    assert np.allclose(ratios, 0.25, atol=1e-3)  # four to a doubling
