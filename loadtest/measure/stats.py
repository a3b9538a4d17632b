"""Statistics that separate a stable difference from noise; pure functions over samples.

A percentile of one run is one number; two runs differ by chance alone. For each
percentile the difference B - A gets a bootstrap confidence interval (both samples
resampled independently, percentile method), and the two distributions a Mann-Whitney
rank test (no assumption of normality: latency never is). A metric is called faster or
slower only when the rank test rejects equality *and* the median difference's interval
excludes zero; otherwise "no detectable difference", which is not "the same".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sp

__all__ = ["MetricComparison", "PercentileDiff", "bootstrap_diff", "compare_samples", "rank_test"]

ALPHA = 0.05
"""The significance level of the rank test, and 1 - the intervals' confidence."""


@dataclass(frozen=True, slots=True)
class PercentileDiff:
    """B - A at one percentile, with its confidence interval."""

    pct: float
    a: float
    b: float
    diff: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric of two samples: percentile differences, rank test, verdict."""

    n_a: int
    n_b: int
    percentiles: tuple[PercentileDiff, ...]
    p_value: float | None
    verdict: str
    """``faster``, ``slower`` or ``no detectable difference`` (B relative to A)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "p_value": None if self.p_value is None else round(self.p_value, 6),
            "verdict": self.verdict,
            "percentiles": {
                f"p{d.pct:g}": {
                    "a": round(d.a, 4),
                    "b": round(d.b, 4),
                    "diff": round(d.diff, 4),
                    "ci_low": round(d.low, 4),
                    "ci_high": round(d.high, 4),
                    "significant": d.excludes_zero,
                }
                for d in self.percentiles
            },
        }


def bootstrap_diff(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    pct: float,
    *,
    resamples: int = 2000,
    confidence: float = 1 - ALPHA,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(B - A at ``pct``, interval low, interval high), resampling both sides."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(np.percentile(xb, pct) - np.percentile(xa, pct))

    def stat(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.asarray(np.percentile(y, pct, axis=axis) - np.percentile(x, pct, axis=axis))

    res = sp.bootstrap(
        (xa, xb),
        stat,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=max(1, min(resamples, 2_000_000 // max(1, len(xa) + len(xb)))),
        rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return diff, float(ci.low), float(ci.high)


def rank_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value: are A and B drawn from one distribution?"""
    return float(sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def compare_samples(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    pcts: Sequence[float] = (50, 95, 99),
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> MetricComparison | None:
    """Compare two samples of one metric (lower is better); None when either is empty.

    Below 2 values on a side no test is possible: the verdict says so.
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        return None
    if xa.size < 2 or xb.size < 2:
        # No interval is possible: an unbounded one is never called significant.
        unknown = tuple(PercentileDiff(pct, *_at(xa, xb, pct), -math.inf, math.inf) for pct in pcts)
        return MetricComparison(xa.size, xb.size, unknown, None, "too few samples")
    diffs = tuple(
        PercentileDiff(
            pct,
            *_at(xa, xb, pct)[:2],
            *bootstrap_diff(xa, xb, pct, resamples=resamples, seed=seed),
        )
        for pct in pcts
    )
    p = rank_test(xa, xb)
    median_diff, low, high = bootstrap_diff(xa, xb, 50, resamples=resamples, seed=seed)
    if p < ALPHA and (low > 0 or high < 0):
        verdict = "slower" if median_diff > 0 else "faster"
    else:
        verdict = "no detectable difference"
    return MetricComparison(xa.size, xb.size, diffs, p, verdict)


def _at(xa: np.ndarray, xb: np.ndarray, pct: float) -> tuple[float, float, float]:
    a, b = float(np.percentile(xa, pct)), float(np.percentile(xb, pct))
    return a, b, b - a
