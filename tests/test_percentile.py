"""One percentile: a list of values and an HDR histogram of them give the same answer.

The fault table, the conversation turns and the length report take percentiles of short
lists; the summary reads HDR histograms. Both use ``target_rank``, so a fault window's
TTFT p95 is the summary's, up to the histogram's 3 significant digits.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.measure.hdr import fast_percentile, new_histogram, percentile, record_many


def test_the_rank_is_a_histograms_on_small_lists() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    # 20 values: p95 is the 19th (round half up of 0.95 * 20), p50 the 10th.
    values = [float(v) for v in range(20, 0, -1)]
    assert percentile(values, 95) == 19.0
    assert percentile(values, 50) == 10.0
    assert percentile(values, 100) == 20.0 and percentile(values, 0) == 1.0


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(min_value=1, max_value=10_000_000), min_size=1, max_size=300),
    st.sampled_from([0.1, 1.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0]),
)
def test_a_list_and_its_histogram_agree(values: list[int], q: float) -> None:
    hist = new_histogram()
    record_many(hist, values)
    exact = percentile([float(v) for v in values], q)
    assert exact is not None
    assert hist.values_are_equivalent(int(exact), fast_percentile(hist, q))
