"""The cells of the decision: one test of one deciding metric, then its verdict.

Shared by the decision against the baseline (``report.decision``) and the choice
between draft lengths (``report.draft_choice``), so that both are judged by one rule:
a cell is called only after Holm's correction over the whole family, beyond its
interval and the practical threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sp

from loadtest.measure.stats import ALPHA, PercentileDiff, compare_groups, round_p
from loadtest.model.decision import CellVerdict, DecisionCell

__all__ = ["RunSamples", "Test", "goodput_test", "joint", "judged", "latency_test"]


@dataclass(frozen=True, slots=True)
class RunSamples:
    """One run as the decision reads it."""

    by_category: Mapping[str, Mapping[str, np.ndarray]]
    """Per category, per metric, the values of the measured ok requests (ms)."""
    ok: Mapping[str, int] = field(default_factory=dict)
    """Per category, the measured ok requests."""
    goodput_per_s: float | None = None
    """The run's goodput under its SLOs (None: no per-request SLO)."""


@dataclass(slots=True)
class Test:
    """A cell before Holm: its figures and, where tested, its p-value."""

    a: float | None
    b: float | None
    diff: float | None
    low: float | None
    high: float | None
    p_value: float | None
    threshold: float
    verdict: CellVerdict
    why: str | None = None
    lower_is_better: bool = True


def latency_test(
    a: Sequence[RunSamples],
    b: Sequence[RunSamples],
    category: str,
    metric: str,
    effect: float,
    resamples: int,
) -> Test:
    """The medians of ``metric`` in ``category``, B against A, by the run bootstrap."""
    ga = [r.by_category.get(category, {}).get(metric, np.empty(0)) for r in a]
    gb = [r.by_category.get(category, {}).get(metric, np.empty(0)) for r in b]
    c = compare_groups(ga, gb, (50,), resamples=resamples, min_effect=effect)
    if c is None:
        return Test(None, None, None, None, None, None, effect, "not exercised", "no values")
    d: PercentileDiff = c.percentiles[0]
    if d.p_value is None:
        why = f"too few values ({c.n_a} A, {c.n_b} B)"
        return Test(d.a, d.b, d.diff, None, None, None, effect, "cannot tell", why)
    return Test(d.a, d.b, d.diff, d.low, d.high, d.p_value, effect, "no difference")


def goodput_test(a: Sequence[RunSamples], b: Sequence[RunSamples], effect: float) -> Test:
    """The runs' goodput, B against A, by Welch's t-test (two or more runs a side)."""
    va = [r.goodput_per_s for r in a]
    vb = [r.goodput_per_s for r in b]
    if any(v is None for v in (*va, *vb)) or not va or not vb:
        why = "the scenario sets no per-request SLO"
        return Test(None, None, None, None, None, None, effect, "not exercised", why, False)
    xa, xb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
    ma, mb = float(xa.mean()), float(xb.mean())
    if min(xa.size, xb.size) < 2:
        why = "one run a side: a run's goodput is one value"
        return Test(ma, mb, mb - ma, None, None, None, effect, "cannot tell", why, False)
    if xa.std() == 0 and xb.std() == 0:
        why = "no spread between runs to test against"
        return Test(ma, mb, mb - ma, None, None, None, effect, "cannot tell", why, False)
    res = sp.ttest_ind(xb, xa, equal_var=False)
    ci = res.confidence_interval(1 - ALPHA)
    return Test(
        ma,
        mb,
        mb - ma,
        float(ci.low),
        float(ci.high),
        float(res.pvalue),
        effect,
        "no difference",
        lower_is_better=False,
    )


def judged(t: Test, p_holm: float | None, alpha: float = ALPHA) -> DecisionCell:
    """The cell as written: called faster/slower only past Holm at ``alpha``, the
    interval and the threshold."""
    verdict, why = t.verdict, t.why
    if (
        t.a
        and p_holm is not None
        and t.diff is not None
        and t.low is not None
        and t.high is not None
    ):
        called = (
            p_holm < alpha and (t.low > 0 or t.high < 0) and abs(t.diff) >= t.threshold * abs(t.a)
        )
        worse = (t.diff > 0) == t.lower_is_better
        verdict = ("slower" if worse else "faster") if called else "no difference"
    scale = abs(t.a) if t.a else None

    def rel(v: float | None) -> float | None:
        ok = v is not None and scale is not None and math.isfinite(v)
        return round(v / scale, 4) if ok and v is not None and scale else None

    return {
        "metric": "",
        "a": None if t.a is None else round(t.a, 4),
        "b": None if t.b is None else round(t.b, 4),
        "effect": rel(t.diff),
        "effect_low": rel(t.low),
        "effect_high": rel(t.high),
        "p_value": None if t.p_value is None else float(f"{t.p_value:.4g}"),
        "p_holm": round_p(p_holm),
        "threshold": t.threshold,
        "verdict": verdict,
        "why": why,
    }


def joint(cells: Sequence[DecisionCell]) -> CellVerdict:
    """One verdict for a category at a load from its deciding metrics' cells."""
    said = {c["verdict"] for c in cells}
    if said == {"not exercised"}:
        return "not exercised"
    if "faster" in said and "slower" in said:
        return "cannot tell"  # the metrics disagree: no one answer
    if "slower" in said:
        return "slower"
    if "faster" in said:
        return "faster"
    return "no difference" if said == {"no difference"} else "cannot tell"
