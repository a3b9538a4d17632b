"""The speculation decision across load: per category and step, judged over the sweep.

Every step of ``ab --sweep`` is an ``ab`` (both sides interleaved and repeated), with
its own ``comparison.json``. The decision asks one narrower question of all of them at
once: per prompt category, is the candidate faster on the metric that decides for that
category, at each load? The metric follows the category:

- **tool calls** (a category where at least half of the baseline's completed requests
  made a valid tool call, agent sessions' included): the median time to a valid tool
  call;
- **text** (code, reasoning, multilingual, any other): median end-to-end time, then
  median TPOT;
- **whole mix**: goodput per second under the scenario's per-request SLOs, from each
  run's own value (``summary.json``): goodput is a rate of a whole run, not a value per
  request, so its test is Welch's t-test on the runs' values (two or more a side;
  with one, it cannot tell) and its interval Welch's.

**The family**: every test of every step x category x deciding metric (goodput
included) is adjusted together with Holm-Bonferroni, so the chance of calling any cell
of an unchanged deployment faster or slower is at most ``ALPHA`` over the whole sweep,
not per step. Steps whose comparison cannot stand (nothing measured, unlike sides) test
nothing and so are not in the family. The bootstrap gets enough resamples that its
smallest p-value, adjusted over the family, still falls below ``ALPHA``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sp

from loadtest.measure.stats import (
    ALPHA,
    MIN_EFFECT,
    PercentileDiff,
    compare_groups,
    holm,
    practical_effect,
)
from loadtest.model.decision import (
    CellVerdict,
    Decision,
    DecisionCell,
    DecisionRow,
    DecisionStep,
    StepCall,
)
from loadtest.report.crossover import Point, bracket

__all__ = [
    "GOODPUT",
    "METRIC_LABELS",
    "MIX",
    "RunSamples",
    "Step",
    "decide",
    "resamples_for",
]

GOODPUT = "goodput_per_s"
MIX = "whole mix"
"""The row of goodput: it is a figure of the whole run, not of one category."""
TOOL_METRICS = ("tool_call_ms",)
TEXT_METRICS = ("e2e_ms", "tpot_ms")
METRIC_LABELS = {"tool_call_ms": "tool call", "e2e_ms": "e2e", "tpot_ms": "TPOT", GOODPUT: "good/s"}
TOOL_SHARE = 0.5
"""A category is decided on time to a valid tool call when at least this share of the
baseline's completed requests in it made one."""


@dataclass(frozen=True, slots=True)
class RunSamples:
    """One run as the decision reads it."""

    by_category: Mapping[str, Mapping[str, np.ndarray]]
    """Per category, per metric, the values of the measured ok requests (ms)."""
    ok: Mapping[str, int] = field(default_factory=dict)
    """Per category, the measured ok requests."""
    goodput_per_s: float | None = None
    """The run's goodput under its SLOs (None: no per-request SLO)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One load step: the runs of both sides and whether its comparison stands."""

    load: float
    baseline: Sequence[RunSamples]
    candidate: Sequence[RunSamples]
    folder: str = ""
    blocked: str | None = None


def resamples_for(family: int, floor: int = 2000) -> int:
    """Bootstrap resamples such that the smallest p-value (2 / (R + 1)), adjusted over a
    family of ``family`` tests, is at most half of ``ALPHA``."""
    return max(floor, math.ceil(4 * family / ALPHA))


def _rule(steps: Sequence[Step], category: str) -> tuple[str, tuple[str, ...]]:
    calls = ok = 0
    for s in steps:
        for r in s.baseline:
            ok += r.ok.get(category, 0)
            calls += r.by_category.get(category, {}).get("tool_call_ms", np.empty(0)).size
    if ok and calls >= TOOL_SHARE * ok:
        return "tool calls", TOOL_METRICS
    return "text", TEXT_METRICS


@dataclass(slots=True)
class _Test:
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


def _latency(step: Step, category: str, metric: str, effect: float, resamples: int) -> _Test:
    ga = [r.by_category.get(category, {}).get(metric, np.empty(0)) for r in step.baseline]
    gb = [r.by_category.get(category, {}).get(metric, np.empty(0)) for r in step.candidate]
    c = compare_groups(ga, gb, (50,), resamples=resamples, min_effect=effect)
    if c is None:
        return _Test(None, None, None, None, None, None, effect, "not exercised", "no values")
    d: PercentileDiff = c.percentiles[0]
    if d.p_value is None:
        why = f"too few values ({c.n_a} A, {c.n_b} B)"
        return _Test(d.a, d.b, d.diff, None, None, None, effect, "cannot tell", why)
    return _Test(d.a, d.b, d.diff, d.low, d.high, d.p_value, effect, "no difference")


def _goodput(step: Step, effect: float) -> _Test:
    va = [r.goodput_per_s for r in step.baseline]
    vb = [r.goodput_per_s for r in step.candidate]
    if any(v is None for v in (*va, *vb)) or not va or not vb:
        why = "the scenario sets no per-request SLO"
        return _Test(None, None, None, None, None, None, effect, "not exercised", why, False)
    xa, xb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
    a, b = float(xa.mean()), float(xb.mean())
    if min(xa.size, xb.size) < 2:
        why = "one run a side: a run's goodput is one value"
        return _Test(a, b, b - a, None, None, None, effect, "cannot tell", why, False)
    if xa.std() == 0 and xb.std() == 0:
        why = "no spread between runs to test against"
        return _Test(a, b, b - a, None, None, None, effect, "cannot tell", why, False)
    res = sp.ttest_ind(xb, xa, equal_var=False)
    ci = res.confidence_interval(1 - ALPHA)
    return _Test(
        a,
        b,
        b - a,
        float(ci.low),
        float(ci.high),
        float(res.pvalue),
        effect,
        "no difference",
        lower_is_better=False,
    )


def _judged(t: _Test, p_holm: float | None) -> DecisionCell:
    verdict, why = t.verdict, t.why
    if (
        t.a
        and p_holm is not None
        and t.diff is not None
        and t.low is not None
        and t.high is not None
    ):
        called = (
            p_holm < ALPHA and (t.low > 0 or t.high < 0) and abs(t.diff) >= t.threshold * abs(t.a)
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
        "p_holm": None if p_holm is None else float(f"{p_holm:.4g}"),
        "threshold": t.threshold,
        "verdict": verdict,
        "why": why,
    }


def _joint(cells: Sequence[DecisionCell]) -> CellVerdict:
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


def _quoted(call: StepCall) -> DecisionCell:
    return next((c for c in call["cells"] if c["verdict"] == call["verdict"]), call["cells"][0])


def decide(
    kind: str,
    steps: Sequence[Step],
    *,
    repeat: int,
    min_effect: float = MIN_EFFECT,
    interrupted: bool = False,
    resamples: int | None = None,
) -> Decision:
    """The decision over ``steps`` (in load order): rows, cells, brackets (pure)."""
    categories = sorted(
        {c for s in steps for r in (*s.baseline, *s.candidate) for c in r.by_category}
    )
    rules = {c: _rule(steps, c) for c in categories}
    rows: list[tuple[str, str, tuple[str, ...]]] = [(c, *rules[c]) for c in categories]
    rows.append((MIX, "whole mix", (GOODPUT,)))
    live = [s for s in steps if s.blocked is None]
    family = sum(len(m) for _, _, m in rows) * len(live)
    r = resamples or resamples_for(family)
    tests: dict[tuple[int, int, str], _Test] = {}
    for i, s in enumerate(steps):
        effect = practical_effect(len(s.baseline), len(s.candidate), min_effect)
        for j, (cat, _, metrics) in enumerate(rows):
            for m in metrics:
                if s.blocked is not None:
                    tests[i, j, m] = _Test(
                        None, None, None, None, None, None, effect, "cannot tell", s.blocked
                    )
                elif m == GOODPUT:
                    tests[i, j, m] = _goodput(s, effect)
                else:
                    tests[i, j, m] = _latency(s, cat, m, effect, r)
    keys = [k for k, t in tests.items() if t.p_value is not None]
    adjusted = dict(zip(keys, holm([tests[k].p_value or 0.0 for k in keys]), strict=True))
    out_rows: list[DecisionRow] = []
    for j, (cat, rule, metrics) in enumerate(rows):
        calls: list[StepCall] = []
        for i, s in enumerate(steps):
            cells = []
            for m in metrics:
                cell = _judged(tests[i, j, m], adjusted.get((i, j, m)))
                cell["metric"] = m
                cells.append(cell)
            calls.append({"load": s.load, "verdict": _joint(cells), "cells": cells})
        points = []
        for call in calls:
            q = _quoted(call)
            label = METRIC_LABELS[q["metric"]]
            points.append(
                Point(
                    call["load"],
                    call["verdict"],
                    q["effect"],
                    q["effect_low"],
                    q["effect_high"],
                    label,
                    q["metric"] != GOODPUT,
                )
            )
        out_rows.append(
            {
                "category": cat,
                "deciding": list(metrics),
                "rule": rule,
                "steps": calls,
                "bracket": bracket(points),
            }
        )
    step_json: list[DecisionStep] = [
        {"load": s.load, "folder": s.folder, "blocked": s.blocked} for s in steps
    ]
    lone = any(min(len(s.baseline), len(s.candidate)) < 2 for s in steps)
    return {
        "kind": kind,
        "loads": [s.load for s in steps],
        "repeat": repeat,
        "alpha": ALPHA,
        "min_effect": practical_effect(1 if lone else 2, 2, min_effect),
        "min_effect_asked": min_effect,
        "family": (
            "Holm-Bonferroni over every tested cell of the sweep: each step x each "
            "category's deciding metrics (time to a valid tool call; e2e and TPOT) x the "
            f"whole mix's goodput; {len(keys)} tests of {family} planned"
        ),
        "family_size": len(keys),
        "resamples": r,
        "steps": step_json,
        "rows": out_rows,
        "interrupted": interrupted,
    }
