"""The comparison statistics on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np

from loadtest.measure.stats import bootstrap_diff, compare_samples, rank_test


def _lognormal(seed: int, n: int, median_ms: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median_ms), 0.4, n)


def test_equal_distributions_are_rarely_flagged() -> None:
    flagged = 0
    for seed in range(60):
        a = _lognormal(seed, 300, 50.0)
        b = _lognormal(seed + 1000, 300, 50.0)
        c = compare_samples(a, b, resamples=400, seed=seed)
        assert c is not None
        flagged += c.verdict != "no detectable difference"
    # At a 5% level, 60 equal pairs flag about 3; 8 or more would be a broken test.
    assert flagged <= 7, flagged


def test_a_ten_percent_shift_is_detected_in_both_directions() -> None:
    a = _lognormal(1, 800, 50.0)
    faster = compare_samples(a, _lognormal(2, 800, 45.0), resamples=500)
    slower = compare_samples(a, _lognormal(3, 800, 55.0), resamples=500)
    assert faster is not None and slower is not None
    assert faster.verdict == "faster" and faster.p_value is not None and faster.p_value < 0.001
    assert slower.verdict == "slower"
    p50 = faster.percentiles[0]
    assert p50.pct == 50 and p50.high < 0 and p50.excludes_zero
    # The true median difference (-5 ms) lies inside the interval.
    assert p50.low < -5.0 < p50.high


def test_the_interval_covers_a_known_difference() -> None:
    a = np.arange(1000, dtype=float)
    b = a + 100.0
    diff, low, high = bootstrap_diff(a, b, 50, resamples=500)
    assert diff == 100.0
    assert low <= 100.0 <= high
    assert high - low < 120  # about 4 standard errors of a median of 1,000


def test_rank_test_extremes() -> None:
    assert rank_test([1.0, 2.0, 3.0] * 20, [1.0, 2.0, 3.0] * 20) > 0.9
    assert rank_test(list(range(50)), list(range(100, 150))) < 1e-10


def test_empty_and_tiny_samples() -> None:
    assert compare_samples([], [1.0]) is None
    tiny = compare_samples([1.0], [2.0], resamples=50)
    assert tiny is not None and tiny.verdict == "too few samples" and tiny.p_value is None
