"""The .hgrm percentile tables a run writes: hdrh's own bytes, computed without its walk."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import new_histogram, record_many
from loadtest.report.export import hgrm


def _hdrh_table(hist: HdrHistogram, ratio: float) -> bytes:
    """hdrh's table, its footer's deviation scaled like its mean (what hgrm promises)."""
    buf = io.BytesIO()
    hist.output_percentile_distribution(buf, ratio)
    digits = hist.significant_figures
    line = f"#[Mean    = %12.{digits}f, StdDeviation   = %12.{digits}f]" % (
        hist.get_mean_value() / ratio,
        hist.get_stddev() / ratio,
    )
    return re.sub(rb"#\[Mean .*\]", line.encode("ascii"), buf.getvalue(), count=1)


def _shapes() -> list[np.ndarray]:
    rng = np.random.default_rng(18)
    return [
        np.array([1]),
        np.array([5000] * 7),
        np.array([1, 3_599_999_999]),
        rng.integers(1, 100, 50),
        rng.lognormal(9, 1.0, 3000).astype(np.int64) + 1,
        rng.lognormal(12, 2.5, 20_000).astype(np.int64) + 1,
        np.concatenate([np.full(990, 900), rng.integers(10**6, 10**7, 10)]),
    ]


@pytest.mark.parametrize("shape", range(len(_shapes())))
@pytest.mark.parametrize("ratio", [1000.0, 1.0])
def test_the_table_is_hdrhs_own_byte_for_byte(shape: int, ratio: float) -> None:
    hist = new_histogram()
    record_many(hist, _shapes()[shape])
    assert hgrm(hist, ratio) == _hdrh_table(hist, ratio)


def test_a_corrected_histogram_and_an_empty_one() -> None:
    hist = new_histogram()
    hist.record_corrected_value(250_000, 10_000)
    hist.record_value(3)
    assert hgrm(hist) == _hdrh_table(hist, 1000.0)
    empty = new_histogram()
    assert hgrm(empty) == _hdrh_table(empty, 1000.0)
