"""The ``.hgrm`` table (report/hgrm.py) against hdrh's own, byte for byte.

Ours walks only the non-empty buckets; hdrh walks every count. Every line of the
table, the max and the bucket lines must be hdrh's; the mean and standard deviation
line is hdrh's figures, both divided by the ratio (hdrh leaves the deviation in µs)."""

from __future__ import annotations

import io
import random

import pytest
from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import new_histogram
from loadtest.report.hgrm import hgrm


def _histograms() -> list[tuple[str, HdrHistogram]]:
    rng = random.Random(7)
    cases = []
    for n in (1, 2, 3, 10, 100, 2_000, 30_000):
        h = new_histogram()
        for _ in range(n):
            h.record_value(int(rng.lognormvariate(10, 2)))
        cases.append((f"lognormal-{n}", h))
    same = new_histogram()
    for _ in range(5):
        same.record_value(5)
    cases.append(("one-value-5-times", same))
    zero = new_histogram()
    zero.record_value(0)
    cases.append(("zero", zero))
    ends = new_histogram()
    ends.record_value(1)
    ends.record_value(3_599_999_999)
    cases.append(("both-ends", ends))
    coarse = HdrHistogram(1, 1_000_000, 2)  # another precision: another layout
    for v in range(1, 5_000, 7):
        coarse.record_value(v)
    cases.append(("two-digits", coarse))
    return cases


@pytest.mark.parametrize("ratio", [1000.0, 1.0])
@pytest.mark.parametrize(("name", "hist"), _histograms())
def test_the_table_is_hdrhs_own(name: str, hist: HdrHistogram, ratio: float) -> None:
    theirs = io.BytesIO()
    hist.output_percentile_distribution(theirs, ratio)
    want = theirs.getvalue().decode().splitlines()
    got = hgrm(hist, ratio).decode().splitlines()
    (mean_at,) = [i for i, line in enumerate(want) if line.startswith("#[Mean")]
    assert got[:mean_at] == want[:mean_at], name
    assert got[mean_at + 1 :] == want[mean_at + 1 :], name
    d = hist.significant_figures
    assert got[mean_at] == (
        f"#[Mean    = %12.{d}f, StdDeviation   = %12.{d}f]"
        % (hist.get_mean_value() / ratio, hist.get_stddev() / ratio)
    )


def test_an_empty_histogram_is_a_header_and_a_footer_like_hdrhs() -> None:
    h = new_histogram()
    theirs = io.BytesIO()
    h.output_percentile_distribution(theirs, 1000.0)
    assert hgrm(h, 1000.0) == theirs.getvalue()


def test_a_corrected_histogram_is_hdrhs_own_too() -> None:
    # Back-filled values (coordinated-omission correction) fill many buckets at once.
    hist = new_histogram()
    hist.record_corrected_value(250_000, 10_000)
    hist.record_value(3)
    theirs = io.BytesIO()
    hist.output_percentile_distribution(theirs, 1000.0)
    want = theirs.getvalue().decode().splitlines()
    got = hgrm(hist, 1000.0).decode().splitlines()
    assert [g for g in got if not g.startswith("#[Mean")] == [
        w for w in want if not w.startswith("#[Mean")
    ]
