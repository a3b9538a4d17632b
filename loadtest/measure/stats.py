"""Statistics that separate a stable difference from noise; pure functions over samples.

A percentile of one run is one number; two runs differ by chance alone. For each
percentile the difference B - A gets a bootstrap confidence interval (both samples
resampled independently, percentile method) and a bootstrap p-value (how often the
resampled difference lands on the other side of zero). One comparison asks many
questions (a dozen metric-percentile lines), and at 5% each, equal deployments would be
called different most of the time; so the p-values of one comparison are adjusted
together (Holm-Bonferroni, ``holm``), and a line is called ``faster`` or ``slower`` only
when its adjusted p-value is below ``ALPHA``, its interval excludes zero, *and* the
difference is larger than a practical threshold (``MIN_EFFECT`` of A's value, and never
below the recorders' resolution). Otherwise "no detectable difference", which is not
"the same". The Mann-Whitney rank test of the whole distributions is kept as a figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from loadtest.measure.pvalues import ALPHA, format_p, round_p
from loadtest.model.json import JsonObject

__all__ = [
    "ALPHA",
    "LONE_RUN_EFFECT",
    "MIN_EFFECT",
    "MIN_SAMPLES",
    "MIN_TAIL",
    "MetricComparison",
    "PercentileDiff",
    "Verdict",
    "bootstrap_diff",
    "compare_groups",
    "compare_samples",
    "format_p",
    "holm",
    "judge_family",
    "practical_effect",
    "rank_test",
    "round_p",
]

Verdict = Literal[
    "faster", "slower", "no detectable difference", "too few samples", "not exercised"
]
"""B relative to A. ``too few samples`` (the "cannot tell" state): fewer than
``MIN_SAMPLES`` values on a side, or fewer than ``MIN_TAIL`` above the line's percentile,
so no test was trusted; ``not exercised``: no value at all on a side."""

MIN_EFFECT = 0.02
"""Smallest difference worth a verdict, as a fraction of A's value (``--min-effect``)."""
LONE_RUN_EFFECT = 0.15
"""Smallest difference called when a side is one run (``practical_effect``), as a fraction
of A's value: the 95th percentile, rounded up, of how far identical one-run sides'
medians moved apart in ``benchmarks/bench_compare_fpr.py`` (docs/capacity-and-ab.md):
what moves a whole run, beyond what its requests' spread shows. One run cannot show it;
a block bootstrap over time slices of the run was tried and flagged as often as the
plain one."""
MIN_SAMPLES = 10
"""Fewest values per side before a metric is tested at all."""
MIN_TAIL = 5
"""Fewest values per side above a percentile before its line is tested: p99 of 40 values
is their maximum, whose bootstrap interval is far too narrow (resamples can never exceed
it), so p95 needs 100 values and p99 500; below that the line says ``too few samples``."""
RESOLUTION = 1e-3
"""Relative resolution of the HDR recorders (3 significant digits): nothing finer is real."""
RESOLUTION_MS = 1e-4
"""requests.jsonl rounds durations to 0.1 us."""


@dataclass(frozen=True, slots=True)
class PercentileDiff:
    """B - A at one percentile, with its confidence interval, test and own verdict."""

    pct: float
    a: float
    b: float
    diff: float
    low: float
    high: float
    p_value: float | None = None
    """Bootstrap two-sided p-value of this line alone (None: not tested)."""
    p_adjusted: float | None = None
    """``p_value`` after Holm's adjustment over the whole comparison."""
    threshold: float = 0.0
    """The practical threshold |B - A| must reach (ms)."""
    verdict: Verdict = "no detectable difference"

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0

    def judged(self, p_adjusted: float | None) -> PercentileDiff:
        """This line with its adjusted p-value and the verdict that follows from it."""
        if self.verdict in ("too few samples", "not exercised"):
            return self
        called = (
            p_adjusted is not None
            and p_adjusted < ALPHA
            and self.excludes_zero
            and abs(self.diff) >= self.threshold
        )
        verdict: Verdict = (
            ("slower" if self.diff > 0 else "faster") if called else "no detectable difference"
        )
        return replace(self, p_adjusted=p_adjusted, verdict=verdict)


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric of two samples: percentile lines, rank test, the median's verdict."""

    n_a: int
    n_b: int
    percentiles: tuple[PercentileDiff, ...]
    p_value: float | None
    """Mann-Whitney rank test of the whole distributions (a figure, not adjusted)."""
    verdict: Verdict
    """The verdict of the median line (or of the first line without a median)."""

    def to_json(self) -> JsonObject:
        """A JSON-ready dict."""
        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "p_value": round_p(self.p_value),
            "verdict": self.verdict,
            "percentiles": {
                f"p{d.pct:g}": {
                    "a": _round(d.a),
                    "b": _round(d.b),
                    "diff": _round(d.diff),
                    "ci_low": _round(d.low),
                    "ci_high": _round(d.high),
                    "significant": d.excludes_zero,
                    "p_value": round_p(d.p_value),
                    "p_holm": round_p(d.p_adjusted),
                    "threshold": round(d.threshold, 4),
                    "verdict": d.verdict,
                }
                for d in self.percentiles
            },
        }


def _round(v: float) -> float | None:
    # JSON has no infinity: an unbounded interval is written as null.
    return round(v, 4) if math.isfinite(v) else None


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
    diff, low, high, _ = _bootstrap(a, b, pct, resamples, confidence, seed)
    return diff, low, high


def _bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    pct: float,
    resamples: int,
    confidence: float,
    seed: int,
) -> tuple[float, float, float, float]:
    """Like ``bootstrap_diff``, plus the two-sided bootstrap p-value of B - A = 0."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(np.percentile(xb, pct) - np.percentile(xa, pct))

    def stat(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.asarray(np.percentile(y, pct, axis=axis) - np.percentile(x, pct, axis=axis))

    # scipy.stats is imported here, not at the top: its import is slow, and a plain run
    # (which imports this module for its constants) never resamples.
    from scipy import stats as sp

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
    return diff, float(ci.low), float(ci.high), _p_value(np.asarray(res.bootstrap_distribution))


def _p_value(dist: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "B - A = 0" from the resampled differences."""
    # Ties at zero count against a difference (discrete data: many resamples give 0);
    # the +1s keep a p-value from being 0 with finitely many resamples.
    below, above = int(np.sum(dist <= 0)), int(np.sum(dist >= 0))
    return min(1.0, 2 * (min(below, above) + 1) / (dist.size + 1))


def _two_stage(
    ga: Sequence[np.ndarray], gb: Sequence[np.ndarray], pct: float, resamples: int, seed: int
) -> tuple[float, float, float, float]:
    """Like ``_bootstrap`` for sides of several runs: runs are resampled, then requests."""
    rng = np.random.default_rng(seed)
    dist = _stage(gb, pct, resamples, rng) - _stage(ga, pct, resamples, rng)
    diff = float(np.percentile(np.concatenate(gb), pct) - np.percentile(np.concatenate(ga), pct))
    low, high = np.percentile(dist, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return diff, float(low), float(high), _p_value(dist)


_STAGE_BATCH = 2_000_000  # values held (16 MB) before their percentiles are taken


def _stage(
    groups: Sequence[np.ndarray], pct: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    out = np.empty(resamples)
    k = len(groups)
    # Drawn in the order of one resample at a time (a seed gives the same distribution);
    # the percentiles are taken a batch of equal-length rows at a time, bit for bit the
    # values of one np.percentile call per resample, once most of a decision's CPU.
    pending: dict[int, list[tuple[int, np.ndarray]]] = {}
    held = 0
    for r in range(resamples):
        picked = [groups[i] for i in rng.integers(0, k, k)] if k > 1 else groups
        sample = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in picked])
        pending.setdefault(sample.size, []).append((r, sample))
        held += sample.size
        if held >= _STAGE_BATCH:
            held = _percentiles_into(out, pending, pct)
    _percentiles_into(out, pending, pct)
    return out


def _percentiles_into(
    out: np.ndarray, pending: dict[int, list[tuple[int, np.ndarray]]], pct: float
) -> int:
    for rows in pending.values():
        out[[r for r, _ in rows]] = np.percentile(np.stack([x for _, x in rows]), pct, axis=1)
    pending.clear()
    return 0  # the values held now


def rank_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value: are A and B drawn from one distribution?"""
    from scipy import stats as sp

    return float(sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given (family-wise error control)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def threshold_ms(a_value: float, min_effect: float = MIN_EFFECT) -> float:
    """The smallest |B - A| worth a verdict at a line whose A value is ``a_value``."""
    return max(abs(a_value) * max(min_effect, RESOLUTION), RESOLUTION_MS)


def practical_effect(runs_a: int, runs_b: int, min_effect: float = MIN_EFFECT) -> float:
    """The practical threshold of a comparison of ``runs_a`` runs against ``runs_b``.

    With two or more runs on each side the bootstrap resamples runs, so what moves a
    whole run is in the intervals; with one run on a side it is not, and only a
    difference beyond how far whole runs move (``LONE_RUN_EFFECT``) is called.
    """
    return min_effect if min(runs_a, runs_b) > 1 else max(min_effect, LONE_RUN_EFFECT)


def compare_samples(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    pcts: Sequence[float] = (50, 95, 99),
    *,
    resamples: int = 2000,
    seed: int = 0,
    min_effect: float = MIN_EFFECT,
    min_samples: int = MIN_SAMPLES,
) -> MetricComparison | None:
    """Compare two samples of one metric (lower is better); None when either is empty.

    The lines are adjusted together (this metric as its own family); a comparison of
    several metrics adjusts them all again with ``judge_family``. Below ``min_samples``
    values on a side no test is trusted: the verdict says so.
    """
    return compare_groups(
        [np.asarray(a, dtype=float)],
        [np.asarray(b, dtype=float)],
        pcts,
        resamples=resamples,
        seed=seed,
        min_effect=min_effect,
        min_samples=min_samples,
    )


def compare_groups(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    pcts: Sequence[float] = (50, 95, 99),
    *,
    resamples: int = 2000,
    seed: int = 0,
    min_effect: float = MIN_EFFECT,
    min_samples: int = MIN_SAMPLES,
) -> MetricComparison | None:
    """``compare_samples`` for sides of one or more runs each (one array per run).

    With several runs on a side the bootstrap resamples the runs, then the requests
    within them: what moves a whole run (a neighbour's load, a cache's state, the
    machine's clock) widens the interval instead of passing for a difference, as it
    does when the requests of the runs are pooled as if independent.
    """
    ga = [np.asarray(g, dtype=float) for g in a if len(g)]
    gb = [np.asarray(g, dtype=float) for g in b if len(g)]
    xa = np.concatenate(ga) if ga else np.empty(0)
    xb = np.concatenate(gb) if gb else np.empty(0)
    if xa.size == 0 or xb.size == 0:
        return None
    if min(xa.size, xb.size) < max(2, min_samples):
        # An unbounded interval is never called significant.
        unknown = tuple(
            PercentileDiff(pct, *_at(xa, xb, pct), -math.inf, math.inf, verdict="too few samples")
            for pct in pcts
        )
        return MetricComparison(xa.size, xb.size, unknown, None, "too few samples")
    lines = []
    for pct in pcts:
        a_at, b_at, _ = _at(xa, xb, pct)
        if min(xa.size, xb.size) * (1 - pct / 100) < MIN_TAIL:
            lines.append(
                PercentileDiff(
                    pct, a_at, b_at, b_at - a_at, -math.inf, math.inf, verdict="too few samples"
                )
            )
            continue
        if len(ga) == 1 and len(gb) == 1:
            diff, low, high, p = _bootstrap(xa, xb, pct, resamples, 1 - ALPHA, seed)
        else:
            diff, low, high, p = _two_stage(ga, gb, pct, resamples, seed)
        lines.append(
            PercentileDiff(
                pct, a_at, b_at, diff, low, high, p, None, threshold_ms(a_at, min_effect)
            )
        )
    untested = MetricComparison(xa.size, xb.size, tuple(lines), rank_test(xa, xb), "not exercised")
    (judged,) = judge_family([untested])
    return judged


def judge_family(metrics: Sequence[MetricComparison]) -> list[MetricComparison]:
    """Every line of every metric judged with Holm's adjustment over all of them."""
    tested = [(i, j) for i, m in enumerate(metrics) for j, d in enumerate(m.percentiles)]
    tested = [(i, j) for i, j in tested if metrics[i].percentiles[j].p_value is not None]
    adjusted = holm([metrics[i].percentiles[j].p_value or 0.0 for i, j in tested])
    by_line = dict(zip(tested, adjusted, strict=True))
    out = []
    for i, m in enumerate(metrics):
        lines = tuple(d.judged(by_line.get((i, j))) for j, d in enumerate(m.percentiles))
        centre = next((d for d in lines if d.pct == 50), lines[0]) if lines else None
        out.append(replace(m, percentiles=lines, verdict=centre.verdict if centre else m.verdict))
    return out


def _at(xa: np.ndarray, xb: np.ndarray, pct: float) -> tuple[float, float, float]:
    a, b = float(np.percentile(xa, pct)), float(np.percentile(xb, pct))
    return a, b, b - a
