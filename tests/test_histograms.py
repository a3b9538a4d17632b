"""Quantiles of Prometheus histograms, and the change between two scrapes of one."""

from __future__ import annotations

import math

import pytest

from loadtest.features.histograms import Buckets, bucket_bounds, bucket_quantile, buckets_between


def _b(*counts: float) -> Buckets:
    return {"le": [0.01, 0.025, 0.05], "counts": list(counts)}


def test_a_quantile_is_interpolated_within_its_bucket_as_prometheus_does() -> None:
    seen = _b(40, 80, 100, 100)  # 40 in 0-10 ms, 40 in 10-25 ms, 20 in 25-50 ms
    assert bucket_quantile(0.2, seen) == pytest.approx(0.005)  # half-way into the first
    assert bucket_quantile(0.5, seen) == pytest.approx(0.01 + 0.015 * 10 / 40)
    assert bucket_quantile(0.95, seen) == pytest.approx(0.025 + 0.025 * 15 / 20)
    assert bucket_quantile(1.0, seen) == pytest.approx(0.05)


def test_a_rank_past_the_last_bound_reads_the_last_bound_and_none_read_none() -> None:
    assert bucket_quantile(0.99, _b(1, 1, 1, 10)) == 0.05
    assert bucket_quantile(0.5, _b(0, 0, 0, 0)) is None


def test_the_change_between_scrapes_and_what_cannot_be_subtracted() -> None:
    assert buckets_between(_b(1, 2, 3, 3), _b(5, 8, 9, 10)) == _b(4, 6, 6, 7)
    assert buckets_between(_b(5, 8, 9, 10), _b(1, 2, 3, 3)) is None  # a restart
    other: Buckets = {"le": [0.1], "counts": [1, 1]}
    assert buckets_between(_b(1, 2, 3, 3), other) is None  # not the same histogram


def test_the_bucket_of_a_quantile_is_all_the_histogram_knows_of_it() -> None:
    seen = _b(40, 80, 100, 100)
    assert bucket_bounds(0.2, seen) == (0.0, 0.01, 40)
    assert bucket_bounds(0.5, seen) == (0.01, 0.025, 40)
    assert bucket_bounds(0.95, seen) == (0.025, 0.05, 20)
    assert bucket_bounds(0.99, _b(1, 1, 1, 10)) == (0.05, math.inf, 9)
    assert bucket_bounds(0.5, _b(0, 0, 0, 0)) is None
